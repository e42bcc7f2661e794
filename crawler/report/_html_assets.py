"""The stylesheet and the script inlined into the ``html`` report.

Kept apart from the markup so each reads as what it is. The page's
Content-Security-Policy allows exactly these two texts, by hash, so they must
be inserted verbatim.

The script works on the table the page renders (``#links``): a ``tbody`` per
source page (``data-source``), a ``tr.link`` per broken link (``data-url``,
``data-status``, ``data-source``, and ``data-text``, the lowercased text the
filter searches). State lives in the URL fragment: ``#filter=TEXT&sort=KEY``,
``KEY`` one of url, status, source, prefixed with ``-`` for descending.
"""

from __future__ import annotations

CSS = """
:root { color-scheme: light dark; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0;
        --bad: #cf222e; --head: #f6f8fa; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --muted: #9198a1; --line: #3d444d; --bad: #ff7b72; --head: #151b23; }
}
[hidden] { display: none !important; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); margin: 2rem auto;
       max-width: 80rem; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.2rem; margin: 1.5rem 0 .5rem; }
.meta, .count, footer { color: var(--muted); }
.meta { margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .5rem; text-align: left;
         vertical-align: top; }
.summary { width: auto; }
.summary th, .summary td { font-variant-numeric: tabular-nums; text-align: right; }
.summary .bad { color: var(--bad); font-weight: 600; }
.url { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; word-break: break-all; }
thead th { background: var(--head); position: sticky; top: 0; }
th button { all: unset; cursor: pointer; font-weight: 600; }
th button:focus-visible { outline: 2px solid currentColor; }
th[aria-sort=ascending] button::after { content: " \\25B2"; }
th[aria-sort=descending] button::after { content: " \\25BC"; }
tr.group th { background: var(--head); border-top: 2px solid var(--line); }
td.status { color: var(--bad); font-variant-numeric: tabular-nums; }
#filter { font: inherit; padding: .3rem .5rem; width: min(30rem, 100%); }
footer { margin-top: 2rem; font-size: .85em; }
"""

JS = """
(function () {
  "use strict";
  var table = document.getElementById("links");
  if (!table) { return; }
  var input = document.getElementById("filter");
  var shown = document.getElementById("shown");
  var none = document.getElementById("none");
  var headers = table.tHead.querySelectorAll("th[data-key]");
  var total = table.querySelectorAll("tr.link").length;
  var state = { filter: "", sort: "" };

  function list(items) { return Array.prototype.slice.call(items); }
  function rowsOf(group) { return list(group.querySelectorAll("tr.link")); }

  function filter(text) {
    var needle = text.trim().toLowerCase();
    var count = 0;
    list(table.tBodies).forEach(function (group) {
      var visible = 0;
      rowsOf(group).forEach(function (row) {
        var match = row.getAttribute("data-text").indexOf(needle) !== -1;
        row.hidden = !match;
        if (match) { visible += 1; }
      });
      group.hidden = visible === 0;
      count += visible;
    });
    shown.textContent = needle ? count + " of " + total + " shown" : "";
    none.hidden = count !== 0;
  }

  function compare(key) {
    var name = "data-" + key;
    if (key === "status") {
      return function (a, b) {
        var x = parseInt(a.getAttribute(name), 10), y = parseInt(b.getAttribute(name), 10);
        return (isNaN(x) ? 1000 : x) - (isNaN(y) ? 1000 : y);
      };
    }
    return function (a, b) {
      var x = a.getAttribute(name), y = b.getAttribute(name);
      return x < y ? -1 : (x > y ? 1 : 0);
    };
  }

  function sort(key, descending) {
    var cmp = compare(key);
    var sign = descending ? -1 : 1;
    if (key === "source") {
      list(table.tBodies)
        .sort(function (a, b) { return sign * cmp(a, b); })
        .forEach(function (group) { table.appendChild(group); });
    } else {
      list(table.tBodies).forEach(function (group) {
        rowsOf(group)
          .sort(function (a, b) { return sign * cmp(a, b) || compare("url")(a, b); })
          .forEach(function (row) { group.appendChild(row); });
      });
    }
    list(headers).forEach(function (th) {
      var on = th.getAttribute("data-key") === key;
      th.setAttribute("aria-sort", on ? (descending ? "descending" : "ascending") : "none");
    });
    state.sort = (descending ? "-" : "") + key;
  }

  function readHash() {
    var wanted = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var eq = part.indexOf("=");
      if (eq < 0) { return; }
      var value = part.slice(eq + 1);
      try { value = decodeURIComponent(value); } catch (e) { /* keep it as written */ }
      wanted[part.slice(0, eq)] = value;
    });
    return wanted;
  }

  function writeHash() {
    var parts = [];
    if (state.filter) { parts.push("filter=" + encodeURIComponent(state.filter)); }
    if (state.sort) { parts.push("sort=" + encodeURIComponent(state.sort)); }
    var target = parts.length ? "#" + parts.join("&") : location.pathname + location.search;
    try { history.replaceState(null, "", target); } catch (e) { /* file: URLs may refuse */ }
  }

  function apply() {
    var wanted = readHash();
    var sortBy = wanted.sort || "";
    var key = sortBy.replace(/^-/, "");
    if (key === "url" || key === "status" || key === "source") {
      sort(key, sortBy.charAt(0) === "-");
    }
    input.value = wanted.filter || "";
    state.filter = input.value;
    filter(input.value);
  }

  input.addEventListener("input", function () {
    state.filter = input.value;
    filter(input.value);
    writeHash();
  });
  list(headers).forEach(function (th) {
    th.querySelector("button").addEventListener("click", function () {
      sort(th.getAttribute("data-key"), th.getAttribute("aria-sort") === "ascending");
      writeHash();
    });
  });
  window.addEventListener("hashchange", apply);
  apply();
}());
"""
