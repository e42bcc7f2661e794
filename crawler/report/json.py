"""``json``: the summary and the broken links in one document of a stable shape.

The shape is documented in the README and pinned by
``tests/schemas/report.schema.json``; add to it, never change it.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from crawler.report._common import iso
from crawler.report.model import Format, ReportData


def document(data: ReportData) -> dict[str, Any]:
    """The report as a JSON-ready dict."""
    crawl = data.crawl
    s = data.summary
    return {
        "crawl": {
            "id": crawl.id,
            "seeds": crawl.seeds,
            "state": crawl.state,
            "started_at": iso(crawl.started_at),
            "finished_at": iso(crawl.finished_at),
            "elapsed_s": round(crawl.elapsed_s, 3),
        },
        "summary": {
            "pages": s.pages,
            "links": s.links,
            "ok": s.ok,
            "redirected": s.redirected,
            "broken": s.broken,
            "blocked": s.blocked,
            "skipped": s.skipped,
            "excluded": s.excluded,
            "pending": s.pending,
        },
        "broken": [asdict(link) for link in data.broken],
        "head_overruled": [asdict(link) for link in data.head_overruled],
        "found_after_rendering": [
            {"url": url, "source": source} for url, source in sorted(_rendered(data))
        ],
        "render_issues": [asdict(issue) for issue in data.render_issues],
    }


def _rendered(data: ReportData) -> set[tuple[str, str]]:
    return {(url, source) for url, source in data.rendered_edges() if source is not None}


def render(data: ReportData) -> str:
    """The report as one indented JSON document."""
    return json.dumps(document(data), indent=2, ensure_ascii=False) + "\n"


FORMAT = Format("json", render, "application/json")
