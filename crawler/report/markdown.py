"""``markdown``: a report to paste into a pull-request comment (GitHub-flavoured).

A summary table, then one table of broken links per source page (named
``page:line:column`` where it writes the link, when that is known). URLs are
code spans (no autolinking, no emphasis); error texts are escaped. In table
cells a ``|`` is written ``\\|``, which GFM reads as a literal pipe even
inside a code span. Output stops adding pages near ``DEFAULT_MAX_CHARS``,
because GitHub refuses comments over 65536 characters.
"""

from __future__ import annotations

import dataclasses
import re

from crawler.report._common import RENDERED_NOTE, SEED_SOURCE, by_source, printable, reason
from crawler.report.model import BrokenEdge, Format, ReportData, Summary

DEFAULT_MAX_CHARS = 60_000

# What can start Markdown syntax inside a line: code, emphasis, links, HTML,
# entities, strikethrough, math (pipes are escaped by ``cell``; any ASCII punctuation may be).
_SPECIAL = re.compile(r"([\\`*_\[\]<>&~$])")
_SUMMARY_COLUMNS = tuple(f.name for f in dataclasses.fields(Summary))


def code(text: str) -> str:
    """``text`` as a code span, fenced with more backticks than it contains."""
    text = " ".join(printable(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def plain(text: str) -> str:
    """``text`` with Markdown syntax escaped, on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(printable(text).split()))


def cell(text: str) -> str:
    """Inline Markdown made safe for a table cell (escapes the pipes)."""
    return text.replace("|", "\\|")


def render(data: ReportData, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The report as GitHub-flavoured Markdown."""
    head = _head(data)
    body: list[str] = []
    size = len(head)
    groups = by_source(data.edges, shown=True)
    for shown, (source, edges) in enumerate(groups):
        section = _section(source, edges)
        if body and size + len(section) > max_chars:
            rest = sum(len(links) for _, links in groups[shown:])
            body.append(
                f"… and {rest} more broken links on {len(groups) - shown} more pages; "
                "see the full report.\n"
            )
            break
        body.append(section)
        size += len(section)
    if not groups:
        body.append("No broken links found.\n")
    if data.render_issues:
        body.append(_issues(data))
    return head + "\n".join(body)


def _issues(data: ReportData) -> str:
    rows = [
        f"| {cell(code(i.page))} | {cell(plain(i.kind))} | {cell(plain(i.message))} | "
        f"{cell(code(i.url)) if i.url else '—'} |"
        for i in data.render_issues
    ]
    return (
        "### Render issues\n\n"
        "| page | kind | message | request |\n"
        "|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


def _head(data: ReportData) -> str:
    s = data.summary
    crawl = data.crawl
    state = "finished" if crawl.state == "finished" else f"unfinished ({s.pending} pending)"
    seeds = ", ".join(code(seed) for seed in crawl.seeds)
    verdict = f"**{s.broken} broken**" if s.broken else "**no broken links**"
    values = [str(getattr(s, name)) for name in _SUMMARY_COLUMNS]
    return (
        "## Link check\n\n"
        f"{verdict} · {s.links} links checked · {s.pages} pages crawled from {seeds} · "
        f"crawl {crawl.id}, {state}, {crawl.elapsed_s:.1f} s\n\n"
        f"| {' | '.join(_SUMMARY_COLUMNS)} |\n"
        f"|{'---:|' * len(_SUMMARY_COLUMNS)}\n"
        f"| {' | '.join(values)} |\n\n"
    )


def _section(source: str | None, edges: list[BrokenEdge]) -> str:
    title = code(source) if source is not None else plain(SEED_SOURCE)
    rows = [
        f"| {cell(code(e.url))} | {e.status if e.status is not None else '—'} | "
        f"{cell(plain(reason(e.status, e.error)))}{_rendered(e)} |"
        for e in edges
    ]
    return (
        f"### {title}\n\n"
        "| broken link | status | error |\n"
        "|---|---:|---|\n" + "\n".join(rows) + "\n"
    )


def _rendered(edge: BrokenEdge) -> str:
    return f" ({RENDERED_NOTE})" if edge.rendered else ""


FORMAT = Format("markdown", render, "text/markdown; charset=utf-8")
