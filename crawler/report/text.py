"""``text``: a summary line, then the broken links grouped by the page linking to them.

A page is named ``page:line:column`` where it writes the link, when that is known.
"""

from __future__ import annotations

from collections import defaultdict

from crawler.report._common import RENDERED_NOTE, SEED_SOURCE, printable, reason
from crawler.report.model import BrokenLink, Format, Location, ReportData


def render(data: ReportData) -> str:
    """The report as plain text for a terminal."""
    s = data.summary
    state = "finished" if data.crawl.state == "finished" else f"unfinished, {s.pending} pending"
    lines = [
        f"{s.pages} pages crawled, {s.links} links checked, {s.broken} broken, "
        f"{s.redirected} redirected, {s.skipped} skipped, {s.excluded} excluded "
        f"in {data.crawl.elapsed_s:.1f}s ({data.pages_per_s:.1f} pages/s, {state})"
    ]
    # Shown as ``source:line:column``; the plain source says whether it was rendered.
    by_source: defaultdict[str, list[tuple[BrokenLink, str]]] = defaultdict(list)
    order: dict[str, tuple[str, int, int]] = {}  # a page's links in the order it writes them
    for link in data.broken:
        places = [(where, where.source) for where in link.locations] or [
            (Location(source), source) for source in link.sources or [SEED_SOURCE]
        ]
        for place, source in places:
            by_source[place.shown].append((link, source))
            order[place.shown] = (place.source, place.line or 0, place.column or 0)
    rendered = data.rendered_edges()
    for shown in sorted(by_source, key=order.__getitem__):
        lines.append("")
        lines.append(shown)
        for link, source in by_source[shown]:
            mark = f"  ({RENDERED_NOTE})" if (link.url, source) in rendered else ""
            lines.append(f"  ✗ {link.url}  [{reason(link.status, link.error)}]{mark}")
    if data.render_issues:
        lines.extend(["", "render issues"])
        page = None
        for issue in data.render_issues:
            if issue.page != page:
                page = issue.page
                lines.append(f"  {page}")
            where = f" ({issue.url})" if issue.url else ""
            lines.append(f"    {issue.kind}: {printable(issue.message)}{where}")
    return "\n".join(lines) + "\n"


FORMAT = Format("text", render, "text/plain; charset=utf-8")
