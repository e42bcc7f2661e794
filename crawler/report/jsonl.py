"""``jsonl``: one JSON object per checked URL, in the order the URLs were checked.

Each line stands alone, so the output can be streamed while a crawl runs
(``lines(results.iter_results(conn, crawl_id, after))``) and processed with
``jq -c`` or line by line. ``class``, ``status`` and ``error`` are after
following redirects, as in every other format. ``locations`` lists, for a
broken, blocked or redirected URL, the pages linking to it with the line and
column where each first writes it (null for the other classes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from crawler.report._common import iso
from crawler.report.model import Format, ReportData, ResultRow


def line(row: ResultRow) -> str:
    """One result as one line of JSON, newline included."""
    record = {
        "url": row.url,
        "class": row.result_class,
        "status": row.status,
        "error": row.error,
        "content_type": row.content_type,
        "elapsed_ms": row.elapsed_ms,
        "checked_at": iso(row.checked_at, timespec="milliseconds"),
        "locations": (
            None
            if row.locations is None
            else [{"source": w.source, "line": w.line, "column": w.column} for w in row.locations]
        ),
    }
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def lines(rows: Iterable[ResultRow]) -> Iterator[str]:
    """Lines for results as they come, e.g. from ``results.iter_results``."""
    for row in rows:
        yield line(row)


def render(data: ReportData) -> str:
    """Every result of the crawl, one line each."""
    return "".join(lines(data.need_results()))


FORMAT = Format("jsonl", render, "application/jsonl", needs=frozenset({"results"}))
