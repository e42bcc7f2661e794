// The crawler dashboard: polls the JSON API every second, no page reloads.
// Everything from the API is put in the page with textContent, never as HTML:
// URLs and error texts come from crawled sites.
"use strict";

const POLL_MS = 1000;
// The report is fetched again only when its broken count or the state changed,
// and no sooner than this; a big report waits longer (a second per 50 KB), so
// a crawl with 10,000 broken links is not re-downloaded every two seconds.
const REPORT_EVERY_MS = 2000;
const REPORT_BYTES_PER_S = 50000;
const TERMINAL = new Set(["finished", "cancelled", "failed"]);
// Per-host statistics and exclusion reasons: every 5 s while a crawl runs, once after.
const STATS_EVERY_MS = 5000;

const $ = (id) => document.getElementById(id);
const view = {
  crawlId: null,
  definitionId: null,
  report: null,
  reportAt: 0,
  reportState: null,
  reportBroken: null,
  reportWaitMs: REPORT_EVERY_MS,
  statsAt: 0,
  statsState: null,
};

function token() {
  return $("token").value.trim();
}

async function send(method, path, body) {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    const type = response.headers.get("Content-Type") || "";
    const data = type.includes("json") ? await response.json() : await response.text();
    let message = data && data.error ? data.error : response.status + " " + response.statusText;
    if (response.status === 401) message += " (enter the service's token above)";
    throw new Error(message);
  }
  return response;
}

async function api(method, path, body) {
  const response = await send(method, path, body);
  if (response.status === 204) return null;
  const type = response.headers.get("Content-Type") || "";
  return type.includes("json") ? await response.json() : await response.text();
}

// Report links: fetched with the token (a plain link cannot send it), then shown.
async function openReport(event) {
  event.preventDefault();
  try {
    const response = await send("GET", event.currentTarget.dataset.href);
    const url = URL.createObjectURL(await response.blob());
    window.open(url, "_blank", "noopener");
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    showError("crawl-error", null);
  } catch (error) {
    showError("crawl-error", error);
  }
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function showError(id, error) {
  const node = $(id);
  node.textContent = error ? error.message || String(error) : "";
  node.hidden = !error;
}

function eta(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 60) return Math.round(seconds) + " s";
  if (seconds < 3600) return Math.round(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function fraction(p) {
  const total = p.crawled + p.pending + p.leased;
  return total > 0 ? p.crawled / total : 0;
}

function safeLink(url) {
  try {
    const parsed = new URL(url);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") {
      const a = el("a", url);
      a.href = parsed.href;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      return a;
    }
  } catch (e) {
    // not a URL: shown as text
  }
  return el("span", url);
}

// -- the list -------------------------------------------------------------------

const ACTIONS = {
  queued: ["pause", "cancel", "delete"],
  running: ["pause", "cancel", "delete"],
  paused: ["resume", "cancel", "delete"],
  failed: ["resume", "delete"],
  finished: ["delete"],
  cancelled: ["delete"],
  pausing: [],
  cancelling: [],
  deleting: [],
};

function renderRow(row, crawl) {
  const p = crawl.progress;
  const cells = row.children;
  cells[0].replaceChildren(Object.assign(el("a", crawl.id), { href: "#/crawls/" + crawl.id }));
  cells[1].textContent = crawl.state + (crawl.queue_position ? " #" + crawl.queue_position : "");
  cells[1].className = "state state-" + crawl.state;
  cells[2].textContent = crawl.seeds.join(" ");
  const bar = cells[3].querySelector("progress") || cells[3].appendChild(el("progress"));
  bar.max = 1;
  bar.value = crawl.state === "finished" ? 1 : fraction(p);
  cells[4].textContent = p.crawled;
  cells[5].textContent = p.pending;
  cells[6].textContent = p.leased;
  cells[7].textContent = p.broken;
  cells[8].textContent = p.pages_per_s.toFixed(1);
  cells[9].textContent = crawl.state === "running" ? eta(p.eta_s) : "";
  const wanted = (ACTIONS[crawl.state] || []).join(",");
  if (cells[10].dataset.actions !== wanted) {
    cells[10].dataset.actions = wanted;
    cells[10].replaceChildren(
      ...(ACTIONS[crawl.state] || []).map((action) => {
        const button = el("button", action);
        button.type = "button";
        button.dataset.action = action;
        button.dataset.id = crawl.id;
        return button;
      })
    );
  }
}

function renderList(data) {
  const body = $("crawls").tBodies[0];
  const rows = new Map([...body.rows].map((row) => [row.dataset.id, row]));
  let previous = null;
  for (const crawl of data.crawls) {
    const key = String(crawl.id);
    let row = rows.get(key);
    if (!row) {
      row = el("tr");
      row.dataset.id = key;
      for (let i = 0; i < 11; i++) row.appendChild(el("td"));
    }
    rows.delete(key);
    renderRow(row, crawl);
    const next = previous ? previous.nextSibling : body.firstChild;
    if (row !== next) body.insertBefore(row, next);
    previous = row;
  }
  for (const row of rows.values()) row.remove();
  $("no-crawls").hidden = data.crawls.length > 0;
}

async function act(action, id) {
  try {
    if (action === "delete") {
      if (!window.confirm("Delete crawl " + id + " and its results?")) return;
      await api("DELETE", "/crawls/" + id);
    } else {
      await api("POST", "/crawls/" + id + "/" + action);
    }
    showError("list-error", null);
  } catch (error) {
    showError("list-error", error);
  }
  refresh();
}

function intOrNull(id) {
  const text = $(id).value.trim();
  return text === "" ? null : Number(text);
}

async function startCrawl(event) {
  event.preventDefault();
  let settings = {};
  try {
    const extra = $("settings-json").value.trim();
    if (extra) settings = JSON.parse(extra);
  } catch (error) {
    showError("form-error", new Error("More settings: " + error.message));
    return;
  }
  settings.scope = $("scope").value;
  if (intOrNull("max-depth") !== null) settings.max_depth = intOrNull("max-depth");
  if (intOrNull("max-concurrency") !== null) settings.max_concurrency = intOrNull("max-concurrency");
  if ($("internal-only").checked) settings.internal_only = true;
  const seeds = $("seeds").value.split(/\s+/).filter((s) => s);
  try {
    await api("POST", "/crawls", { seeds, settings });
    showError("form-error", null);
    $("seeds").value = "";
  } catch (error) {
    showError("form-error", error);
  }
  refresh();
}

// -- one crawl ------------------------------------------------------------------

function renderSummary(crawl) {
  const p = crawl.progress;
  $("crawl-title").textContent = "Crawl " + crawl.id + ": " + crawl.seeds.join(" ");
  const parts = [
    crawl.state,
    p.crawled + " crawled",
    p.pages + " pages",
    p.pending + " pending",
    p.broken + " broken",
    p.pages_per_s.toFixed(1) + " pages/s",
  ];
  if (crawl.state === "running" && p.eta_s !== null) parts.push("ETA " + eta(p.eta_s));
  if (crawl.error) parts.push(crawl.error);
  $("crawl-summary").textContent = parts.join(" · ");
  $("crawl-summary").dataset.state = crawl.state;
  $("report-json").dataset.href = crawl.report_url + "?format=json";
  $("report-text").dataset.href = crawl.report_url + "?format=text";
  renderWorkers(crawl.workers || []);
}

// The service's own engine and, on PostgreSQL, `crawler work` processes elsewhere.
function renderWorkers(workers) {
  const rows = workers.map((w) => {
    const row = el("tr");
    row.dataset.worker = w.id;
    const heartbeat = new Date(w.heartbeat_at).toLocaleTimeString();
    for (const value of [
      w.id, w.hostname, w.pid, w.crawled, w.pages,
      w.pages_per_s.toFixed(1), w.urls_per_s.toFixed(1), heartbeat,
    ]) {
      row.appendChild(el("td", value));
    }
    return row;
  });
  $("workers").tBodies[0].replaceChildren(...rows);
  $("workers").hidden = rows.length === 0;
  $("no-workers").hidden = rows.length !== 0;
}

async function refreshStats(crawl) {
  if (crawl.state === "queued") return;
  const now = Date.now();
  const fresh = view.statsState === crawl.state;
  if (fresh && (TERMINAL.has(crawl.state) || now - view.statsAt < STATS_EVERY_MS)) return;
  view.statsAt = now;
  view.statsState = crawl.state;
  renderStats(await api("GET", "/crawls/" + crawl.id + "/stats"));
}

function renderStats(stats) {
  const rows = (stats ? stats.hosts : []).map((h) => {
    const row = el("tr");
    row.dataset.host = h.host;
    const mean = h.mean_latency_ms === null ? "" : Math.round(h.mean_latency_ms);
    for (const value of [
      h.host, h.requests, h.failures, h.status_2xx, h.status_3xx,
      h.status_4xx, h.status_5xx, h.no_response, mean,
    ]) {
      row.appendChild(el("td", value));
    }
    return row;
  });
  $("hosts").tBodies[0].replaceChildren(...rows);
  const items = [];
  for (const seed of stats ? stats.refused_seeds : []) {
    items.push(el("li", "seed refused: " + seed.url + " (" + (seed.error || "private address") + ")", "error"));
  }
  for (const e of stats ? stats.exclusions : []) {
    const item = el("li", e.reason + ": " + e.count);
    item.dataset.reason = e.reason;
    items.push(item);
  }
  if (!items.length && stats) items.push(el("li", "Every URL found was requested."));
  $("exclusions").replaceChildren(...items);
}

function groupBySource(broken) {
  const groups = new Map();
  for (const link of broken) {
    const sources = link.sources && link.sources.length ? link.sources : ["(seed)"];
    for (const source of sources) {
      if (!groups.has(source)) groups.set(source, []);
      groups.get(source).push(link);
    }
  }
  return [...groups.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

function renderBroken() {
  const container = $("broken");
  const report = view.report;
  if (!report) {
    container.replaceChildren();
    $("broken-count").textContent = "";
    return;
  }
  const needle = $("filter").value.trim().toLowerCase();
  const matches = (text) => String(text || "").toLowerCase().includes(needle);
  const groups = [];
  let shown = 0;
  for (const [source, links] of groupBySource(report.broken)) {
    const kept = needle
      ? links.filter((l) => matches(source) || matches(l.url) || matches(l.error) || matches(l.status))
      : links;
    if (!kept.length) continue;
    const group = el("section", null, "group");
    group.dataset.source = source;
    group.appendChild(el("h4")).appendChild(safeLink(source));
    const list = group.appendChild(el("ul"));
    for (const link of kept) {
      const item = list.appendChild(el("li", null, "broken-link"));
      item.appendChild(safeLink(link.url));
      item.appendChild(el("span", link.error || String(link.status), "reason"));
      shown++;
    }
    groups.push(group);
  }
  container.replaceChildren(...groups);
  const total = report.broken.length;
  $("broken-count").textContent = needle
    ? shown + " of the broken links match"
    : total === 0
      ? "No broken links" + (report.summary && report.summary.pending ? " so far." : ".")
      : total + " broken link" + (total === 1 ? "" : "s") + " on " + groups.length + " page" + (groups.length === 1 ? "" : "s");
}

async function refreshCrawl(id) {
  let crawl;
  try {
    crawl = await api("GET", "/crawls/" + id);
  } catch (error) {
    $("crawl-title").textContent = "Crawl " + id;
    $("crawl-summary").textContent = "";
    view.report = null;
    renderBroken();
    throw error;
  }
  renderSummary(crawl);
  await refreshStats(crawl);
  const now = Date.now();
  const changed = view.reportState !== crawl.state || view.reportBroken !== crawl.progress.broken;
  const waited = now - view.reportAt >= view.reportWaitMs;
  if (crawl.state !== "queued" && changed && (waited || view.reportState !== crawl.state)) {
    const response = await send("GET", crawl.report_url + "?format=json");
    const text = await response.text();
    view.report = JSON.parse(text);
    view.reportAt = now;
    view.reportState = crawl.state;
    view.reportBroken = crawl.progress.broken;
    view.reportWaitMs = Math.max(REPORT_EVERY_MS, (1000 * text.length) / REPORT_BYTES_PER_S);
    renderBroken();
  }
}

// -- recurring crawls (definitions) ------------------------------------------------

function scheduleText(schedule) {
  return schedule.every ? "every " + schedule.every : schedule.cron + " (" + schedule.timezone + ")";
}

function renderDefinitions(data) {
  const rows = data.definitions.map((d) => {
    const row = el("tr");
    const link = el("a", d.id);
    link.href = "#/definitions/" + d.id;
    row.appendChild(el("td")).appendChild(link);
    for (const value of [
      d.name, d.seeds.join(" "), scheduleText(d.schedule),
      d.next_run_at ? new Date(d.next_run_at).toLocaleString() : "", d.keep_runs,
    ]) {
      row.appendChild(el("td", value));
    }
    return row;
  });
  $("definitions").tBodies[0].replaceChildren(...rows);
  $("no-definitions").hidden = rows.length > 0;
}

const SVG = "http://www.w3.org/2000/svg";
const CHART = { width: 400, height: 120, pad: 24 };

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

// Broken links per finished run, oldest on the left: an inline SVG built from
// numbers alone; each point's tooltip is set with textContent.
function renderChart(runs) {
  const done = runs.filter((r) => r.state === "finished").reverse();
  const box = svg("svg", {
    viewBox: "0 0 " + CHART.width + " " + CHART.height,
    role: "img",
    "aria-label": "broken links per run",
  });
  const top = Math.max(1, ...done.map((r) => r.progress.broken));
  const x = (i) => CHART.pad + (done.length < 2 ? 0 : (i * (CHART.width - 2 * CHART.pad)) / (done.length - 1));
  const y = (n) => CHART.height - CHART.pad - (n * (CHART.height - 2 * CHART.pad)) / top;
  box.appendChild(svg("line", { class: "axis", x1: CHART.pad, y1: y(0), x2: CHART.width - CHART.pad, y2: y(0) }));
  const label = svg("text", { x: 2, y: y(top) + 4 });
  label.textContent = String(top);
  box.appendChild(label);
  const zero = svg("text", { x: 2, y: y(0) + 4 });
  zero.textContent = "0";
  box.appendChild(zero);
  if (done.length > 1) {
    const points = done.map((r, i) => x(i).toFixed(1) + "," + y(r.progress.broken).toFixed(1));
    box.appendChild(svg("polyline", { class: "line", points: points.join(" ") }));
  }
  done.forEach((r, i) => {
    const dot = svg("circle", { class: "dot", cx: x(i), cy: y(r.progress.broken), r: 3 });
    dot.dataset.run = String(r.id);
    const title = svg("title", {});
    title.textContent = "run " + r.id + ": " + r.progress.broken + " broken";
    dot.appendChild(title);
    box.appendChild(dot);
  });
  $("runs-chart").replaceChildren(box);
}

function renderRuns(runs) {
  const rows = runs.map((r) => {
    const row = el("tr");
    const link = el("a", r.id);
    link.href = "#/crawls/" + r.id;
    row.appendChild(el("td")).appendChild(link);
    const state = el("td", r.state, "state state-" + r.state);
    row.appendChild(state);
    row.appendChild(el("td", r.started_at ? new Date(r.started_at).toLocaleString() : ""));
    row.appendChild(el("td", r.progress.pages));
    row.appendChild(el("td", r.progress.broken));
    return row;
  });
  $("runs").tBodies[0].replaceChildren(...rows);
}

function diffList(title, links) {
  const group = el("div", null, "diff");
  group.appendChild(el("h4", title + " (" + links.length + ")"));
  const list = el("ul");
  for (const link of links.slice(0, 200)) {
    const item = el("li", null, "broken-link");
    item.appendChild(safeLink(link.url));
    item.appendChild(el("span", link.status !== null ? link.status : link.error, "reason"));
    list.appendChild(item);
  }
  group.appendChild(list);
  return group;
}

function renderDiff(diff) {
  if (!diff) {
    $("diff-summary").textContent = "No diff yet: it needs two finished runs.";
    $("diff").replaceChildren();
    return;
  }
  const c = diff.counts;
  $("diff-summary").textContent =
    "Run " + diff.from_crawl + " → " + diff.to_crawl + ": " + c.new_broken + " new broken, " +
    c.fixed + " fixed, " + c.still_broken + " still broken";
  $("diff").replaceChildren(diffList("New broken", diff.new_broken), diffList("Fixed", diff.fixed));
}

async function refreshDefinition(id) {
  const d = await api("GET", "/definitions/" + id);
  $("definition-title").textContent = "Recurring crawl " + d.id + (d.name ? ": " + d.name : "");
  const parts = [scheduleText(d.schedule), "keeps " + d.keep_runs + " runs"];
  if (d.next_run_at) parts.push("next run " + new Date(d.next_run_at).toLocaleString());
  if (d.active_run) parts.push("run " + d.active_run + " active");
  $("definition-summary").textContent = parts.join(" · ");
  const runs = (await api("GET", d.runs_url)).runs;
  renderChart(runs);
  renderRuns(runs);
  let diff = null;
  try {
    diff = await api("GET", d.diff_url);
  } catch (error) {
    diff = null; // 409 until two runs have finished
  }
  renderDiff(diff);
}

// -- routing and polling ----------------------------------------------------------

function route() {
  const match = location.hash.match(/^#\/crawls\/(\d+)$/);
  const id = match ? match[1] : null;
  const definition = location.hash.match(/^#\/definitions\/(\d+)$/);
  view.definitionId = definition ? definition[1] : null;
  if (id !== view.crawlId) {
    view.crawlId = id;
    view.report = null;
    view.reportAt = 0;
    view.reportState = null;
    view.reportBroken = null;
    view.reportWaitMs = REPORT_EVERY_MS;
    view.statsAt = 0;
    view.statsState = null;
    showError("crawl-error", null);
    renderBroken();
    renderStats(null);
  }
  $("list-view").hidden = id !== null || view.definitionId !== null;
  $("crawl-view").hidden = id === null;
  $("definition-view").hidden = view.definitionId === null;
  refresh();
}

function errorId() {
  if (view.crawlId !== null) return "crawl-error";
  return view.definitionId !== null ? "definition-error" : "list-error";
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    if (view.crawlId !== null) {
      await refreshCrawl(view.crawlId);
    } else if (view.definitionId !== null) {
      await refreshDefinition(view.definitionId);
    } else {
      renderList(await api("GET", "/crawls"));
      renderDefinitions(await api("GET", "/definitions"));
    }
    showError(errorId(), null);
  } catch (error) {
    // In the view the user looks at: an unknown crawl id, a missing token, a
    // service that went away.
    showError(errorId(), error);
  } finally {
    refreshing = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("token").value = sessionStorage.getItem("crawler-token") || "";
  $("token").addEventListener("change", () => sessionStorage.setItem("crawler-token", token()));
  $("crawl-form").addEventListener("submit", startCrawl);
  $("crawls").tBodies[0].addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (button) act(button.dataset.action, button.dataset.id);
  });
  $("filter").addEventListener("input", renderBroken);
  $("report-json").addEventListener("click", openReport);
  $("report-text").addEventListener("click", openReport);
  window.addEventListener("hashchange", route);
  route();
  setInterval(refresh, POLL_MS);
});
