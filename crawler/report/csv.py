"""``csv``: one row per (broken URL, source page), RFC 4180, with a header row.

Columns: ``url, status, error, source, element, line, column``. ``status`` is
empty when there was no HTTP response, ``source`` and ``element`` are empty for
a broken seed; ``element`` lists the tags the page links with (``a``, ``img``,
…), space-separated when there are several. ``line`` and ``column`` (1-based,
in characters) say where the source first writes the link, empty when unknown.
With ``--render``, a link found only in the page's rendered DOM has its element
marked ``js:`` (``js:a``).
"""

from __future__ import annotations

import csv
import io

from crawler.report.model import Format, ReportData

HEADER = ("url", "status", "error", "source", "element", "line", "column")


def render(data: ReportData) -> str:
    """The broken links as CSV (CRLF line ends, quoted only where needed)."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(HEADER)
    for edge in data.edges:
        writer.writerow(
            (
                edge.url,
                "" if edge.status is None else edge.status,
                edge.error or "",
                edge.source or "",
                " ".join(edge.elements),
                "" if edge.line is None else edge.line,
                "" if edge.column is None else edge.column,
            )
        )
    return out.getvalue()


FORMAT = Format("csv", render, "text/csv; charset=utf-8; header=present")
