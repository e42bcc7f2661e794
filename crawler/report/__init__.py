"""Reports: the read model (``ReportData``) and one module per format.

A store loads a crawl's ``ReportData`` once, in one snapshot (``load_report``
in ``crawler.store.open``); ``render`` hands it to a format. Formats never
query a database, so they cannot disagree about what is broken. The registry
maps a format's name (the CLI's ``-f`` choice) to its ``Format``:

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

import functools
import importlib
from typing import Any

from crawler.report.model import ALL_PARTS, Format, Part, ReportData

__all__ = ["ALL_PARTS", "FORMATS", "REGISTRY", "Format", "Part", "ReportData", "get", "render"]

# The formats' names, in the registry's order (a test holds them equal): the
# CLI's --help and completions need the names only, not the formats' modules.
FORMATS: tuple[str, ...] = ("text", "json", "jsonl", "markdown", "csv", "junit", "sarif", "html")
# ``crawler diff``'s formats (``crawler.report.diff_formats`` renders them).
DIFF_FORMATS: tuple[str, ...] = ("text", "json", "markdown", "html")


@functools.cache
def registry() -> dict[str, Format]:
    """Each format by name, its module imported on first use."""
    from crawler.report import csv, html, json, jsonl, junit, markdown, sarif, text

    return {
        module.FORMAT.name: module.FORMAT
        for module in (text, json, jsonl, markdown, csv, junit, sarif, html)
    }


def __getattr__(name: str) -> Any:
    if name == "REGISTRY":
        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get(name: str) -> Format:
    """The format called ``name`` (its module only); ValueError naming the choices otherwise."""
    if name not in FORMATS:
        raise ValueError(f"unknown report format {name!r}; choose from {', '.join(FORMATS)}")
    fmt: Format = importlib.import_module(f"crawler.report.{name}").FORMAT
    return fmt


def render(data: ReportData, fmt: str) -> str:
    """The report in one of ``FORMATS``, without credentials in its URLs."""
    from crawler import redact

    return redact.credentials(get(fmt).render(data))
