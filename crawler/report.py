"""Report formats, rendered from the SQL read side (``store.results``).

Each format is a function from a ``ReportData`` to text; the same data backs
every format, so they cannot disagree.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass

from crawler.store import crawls, results

FORMATS = ("text", "json")


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything a report shows, read in one go."""

    crawl: crawls.CrawlRecord
    summary: results.Summary
    broken: list[results.BrokenLink]

    @property
    def pages_per_s(self) -> float:
        """Pages crawled per second of active crawling."""
        return self.summary.pages / self.crawl.elapsed_s if self.crawl.elapsed_s > 0 else 0.0


def load(conn: sqlite3.Connection, crawl_id: int | None = None) -> ReportData:
    """Read the report of a crawl (the latest when no id is given)."""
    conn.execute("BEGIN")  # one snapshot for all the queries below
    try:
        crawl = crawls.get(conn, crawl_id)
        return ReportData(
            crawl=crawl,
            summary=results.summary(conn, crawl.id),
            broken=results.broken_links(conn, crawl.id),
        )
    finally:
        conn.execute("COMMIT")


def render(data: ReportData, fmt: str) -> str:
    """The report in one of ``FORMATS``."""
    return _RENDERERS[fmt](data)


def render_text(data: ReportData) -> str:
    s = data.summary
    state = "finished" if data.crawl.state == "finished" else f"unfinished, {s.pending} pending"
    lines = [
        f"{s.pages} pages crawled, {s.links} links checked, {s.broken} broken, "
        f"{s.redirected} redirected, {s.skipped} skipped, {s.excluded} excluded "
        f"in {data.crawl.elapsed_s:.1f}s ({data.pages_per_s:.1f} pages/s, {state})"
    ]
    by_source: defaultdict[str, list[results.BrokenLink]] = defaultdict(list)
    for link in data.broken:
        for source in link.sources or ["(seed)"]:
            by_source[source].append(link)
    for source in sorted(by_source):
        lines.append("")
        lines.append(f"{source}")
        for link in by_source[source]:
            lines.append(f"  ✗ {link.url}  [{_reason(link)}]")
    return "\n".join(lines) + "\n"


def render_json(data: ReportData) -> str:
    crawl = data.crawl
    s = data.summary
    document = {
        "crawl": {
            "id": crawl.id,
            "seeds": crawl.seeds,
            "state": crawl.state,
            "started_at": _iso(crawl.started_at),
            "finished_at": _iso(crawl.finished_at),
            "elapsed_s": round(crawl.elapsed_s, 3),
        },
        "summary": {
            "pages": s.pages,
            "links": s.links,
            "ok": s.ok,
            "redirected": s.redirected,
            "broken": s.broken,
            "skipped": s.skipped,
            "excluded": s.excluded,
            "pending": s.pending,
        },
        "broken": [asdict(link) for link in data.broken],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _reason(link: results.BrokenLink) -> str:
    if link.error:
        return link.error
    return str(link.status)


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).isoformat(timespec="seconds")


_RENDERERS: dict[str, Callable[[ReportData], str]] = {"text": render_text, "json": render_json}
