"""Report formats: each module renders a ``ReportData`` to one kind of text.

The registry maps a format's name (the CLI's ``-f`` choice) to its ``Format``;
``crawler.report`` loads the data once and dispatches here, so every format
shows the same crawl through the same read-side queries.

    text      summary line and broken links by page, for a terminal
    json      the documented stable JSON shape
    jsonl     one object per checked URL, streamable
    markdown  pull-request comment
    csv       one row per (broken link, source page)
    junit     JUnit XML for CI test dashboards
    sarif     SARIF 2.1.0 for code-scanning dashboards
    html      one self-contained page with filter and sorting
"""

from __future__ import annotations

from crawler.formats import csv, html, json, jsonl, junit, markdown, sarif, text
from crawler.formats.model import ALL_PARTS, Format, Part, ReportData

__all__ = ["ALL_PARTS", "REGISTRY", "Format", "Part", "ReportData", "get"]

REGISTRY: dict[str, Format] = {
    module.FORMAT.name: module.FORMAT
    for module in (text, json, jsonl, markdown, csv, junit, sarif, html)
}


def get(name: str) -> Format:
    """The format called ``name``; ValueError naming the choices otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown report format {name!r}; choose from {', '.join(REGISTRY)}"
        ) from None
