"""``crawler diff`` rendered: text, json, markdown and html, pure functions of a ``CrawlDiff``.

The json shape is ``{"from_crawl", "to_crawl", "counts", "new_broken",
"fixed", "still_broken", "pages_added", "pages_removed"}`` with broken links
as the report's (``url``, ``status``, ``error``, ``sources``); add to it,
never change it. The html page is self-contained (no script, inline style
allowed by hash only); every URL and message is escaped.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from crawler.report import DIFF_FORMATS
from crawler.report._common import printable, reason
from crawler.report.diff import CrawlDiff
from crawler.report.model import BrokenLink

SECTIONS = (
    ("new_broken", "Newly broken"),
    ("fixed", "Fixed"),
    ("still_broken", "Still broken"),
)
PAGE_SECTIONS = (("pages_added", "Pages added"), ("pages_removed", "Pages removed"))


def render(diff: CrawlDiff, fmt: str) -> str:
    """``diff`` in format ``fmt`` (one of ``DIFF_FORMATS``); ValueError otherwise."""
    renderers: dict[str, Callable[[CrawlDiff], str]] = {
        "text": text,
        "json": as_json,
        "markdown": markdown,
        "html": as_html,
    }
    if fmt not in renderers:
        raise ValueError(f"no diff format {fmt!r}: choose from {', '.join(DIFF_FORMATS)}")
    return renderers[fmt](diff)


def _title(diff: CrawlDiff) -> str:
    if diff.from_crawl == 0:
        return f"crawl {diff.to_crawl} (no earlier crawl of the same seeds)"
    return f"crawl {diff.from_crawl} -> crawl {diff.to_crawl}"


def _links(diff: CrawlDiff, key: str) -> list[BrokenLink]:
    links: list[BrokenLink] = getattr(diff, key)
    return links


def _pages(diff: CrawlDiff, key: str) -> list[str]:
    pages: list[str] = getattr(diff, key)
    return pages


def text(diff: CrawlDiff) -> str:
    """Plain text for a terminal or a CI log."""
    counts = diff.counts()
    lines = [
        _title(diff),
        ", ".join(f"{n} {key.replace('_', ' ')}" for key, n in counts.items()),
    ]
    for key, title in SECTIONS:
        links = _links(diff, key)
        if not links:
            continue
        lines += ["", f"{title} ({len(links)}):"]
        for link in links:
            lines.append(f"  {printable(link.url)}  {printable(reason(link.status, link.error))}")
            lines += [f"    from {printable(source)}" for source in link.sources]
    for key, title in PAGE_SECTIONS:
        pages = _pages(diff, key)
        if pages:
            lines += ["", f"{title} ({len(pages)}):", *(f"  {printable(p)}" for p in pages)]
    return "\n".join(lines) + "\n"


def document(diff: CrawlDiff) -> dict[str, Any]:
    """The diff as a JSON-ready dict."""
    doc: dict[str, Any] = {
        "from_crawl": diff.from_crawl,
        "to_crawl": diff.to_crawl,
        "counts": diff.counts(),
    }
    for key, _ in SECTIONS:
        doc[key] = [asdict(link) for link in _links(diff, key)]
    for key, _ in PAGE_SECTIONS:
        doc[key] = list(_pages(diff, key))
    return doc


def as_json(diff: CrawlDiff) -> str:
    """One indented JSON document."""
    return json.dumps(document(diff), indent=2, ensure_ascii=False) + "\n"


def _md(text: str) -> str:
    return printable(text).replace("|", "\\|").replace("`", "\\`")


def markdown(diff: CrawlDiff) -> str:
    """GitHub-flavoured markdown, for a pull request comment or a job summary."""
    counts = diff.counts()
    lines = [
        f"# What changed: {_title(diff)}",
        "",
        "| change | count |",
        "|---|---|",
        *(f"| {key.replace('_', ' ')} | {n} |" for key, n in counts.items()),
    ]
    for key, title in SECTIONS:
        links = _links(diff, key)
        if not links:
            continue
        lines += [
            "",
            f"## {title} ({len(links)})",
            "",
            "| link | status | sources |",
            "|---|---|---|",
        ]
        for link in links:
            sources = "<br>".join(_md(s) for s in link.sources) or "(seed)"
            lines.append(
                f"| {_md(link.url)} | {_md(reason(link.status, link.error))} | {sources} |"
            )
    for key, title in PAGE_SECTIONS:
        pages = _pages(diff, key)
        if pages:
            lines += ["", f"## {title} ({len(pages)})", "", *(f"- {_md(p)}" for p in pages)]
    return "\n".join(lines) + "\n"


CSS = (
    "body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem}"
    "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.3rem;"
    "text-align:left;vertical-align:top;word-break:break-all}h2{margin-top:2rem}"
)
CSP = (
    "default-src 'none'; style-src 'sha256-"
    + base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()
    + "'; base-uri 'none'; form-action 'none'"
)


def _esc(text: str) -> str:
    return html.escape(printable(text), quote=True)


def _link(url: str) -> str:
    if url.startswith(("http://", "https://")):
        return f'<a href="{_esc(url)}">{_esc(url)}</a>'
    return _esc(url)


def as_html(diff: CrawlDiff) -> str:
    """One self-contained page."""
    counts = diff.counts()
    body = [
        f"<h1>What changed: {_esc(_title(diff))}</h1>",
        "<table><tr><th>change</th><th>count</th></tr>",
        *(f"<tr><td>{key.replace('_', ' ')}</td><td>{n}</td></tr>" for key, n in counts.items()),
        "</table>",
    ]
    for key, title in SECTIONS:
        links = _links(diff, key)
        if not links:
            continue
        body.append(f"<h2>{title} ({len(links)})</h2>")
        body.append("<table><tr><th>link</th><th>status</th><th>sources</th></tr>")
        for link in links:
            sources = "<br>".join(_link(s) for s in link.sources) or "(seed)"
            body.append(
                f"<tr><td>{_link(link.url)}</td>"
                f"<td>{_esc(reason(link.status, link.error))}</td><td>{sources}</td></tr>"
            )
        body.append("</table>")
    for key, title in PAGE_SECTIONS:
        pages = _pages(diff, key)
        if pages:
            items = "".join(f"<li>{_link(p)}</li>" for p in pages)
            body.append(f"<h2>{title} ({len(pages)})</h2><ul>{items}</ul>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{_esc(_title(diff))}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
