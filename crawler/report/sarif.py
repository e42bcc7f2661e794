"""``sarif``: SARIF 2.1.0, for code-scanning dashboards (GitHub, GitLab, Azure DevOps).

One run of the tool ``crawler``; one rule per failure kind (``http_status``,
``timeout``, ``connection``, ``redirect_loop``, …, ``missing_fragment``); one
result per (source page, broken link), located at the source page (a broken
seed at itself), with a message naming the broken URL and its status. When
the source is a file of a local site, the location is that file, relative to
the working directory, with the link's line and column as its ``region``, so
code scanning annotates the line; a page fetched over HTTP is located by its
URL, with the same ``region`` when the line is known.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from crawler import __version__
from crawler.errors import FailureKind
from crawler.report._common import iso, reason
from crawler.report.model import FRAGMENT_KIND, BrokenEdge, Format, ReportData

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"

_RULE_TEXT = {
    "http_status": "The link answers with an HTTP error status.",
    "timeout": "The link's server does not answer in time.",
    "connection": "The link's server refuses or drops the connection.",
    "dns": "The link's host name does not resolve.",
    "tls": "The TLS handshake with the link's server fails.",
    "redirect_loop": "The link redirects in a loop.",
    "too_many_redirects": "The link redirects more times than allowed.",
    "invalid_response": "The link's server answers with something that is not usable HTTP.",
    "body_too_large": "The link's response is larger than allowed.",
    "invalid_url": "The link is not a valid URL.",
    FRAGMENT_KIND: "The link's #fragment names no anchor on the page it points to.",
}


def document(data: ReportData) -> dict[str, Any]:
    """The report as a SARIF log (a JSON-ready dict)."""
    kinds = [*(str(kind) for kind in FailureKind), FRAGMENT_KIND]
    kinds += sorted({edge.kind for edge in data.edges} - set(kinds))
    index = {kind: i for i, kind in enumerate(kinds)}
    crawl = data.crawl
    invocation: dict[str, Any] = {"executionSuccessful": crawl.state == "finished"}
    invocation["startTimeUtc"] = _utc(crawl.started_at)
    if crawl.finished_at is not None:
        invocation["endTimeUtc"] = _utc(crawl.finished_at)
    return {
        "$schema": SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "crawler",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": [_rule(kind) for kind in kinds],
                    }
                },
                "invocations": [invocation],
                "columnKind": "unicodeCodePoints",
                "results": [_result(edge, index[edge.kind]) for edge in data.edges],
                "properties": {
                    "crawl_id": crawl.id,
                    "seeds": crawl.seeds,
                    "summary": dataclasses.asdict(data.summary),
                },
            }
        ],
    }


def render(data: ReportData) -> str:
    """The report as a SARIF 2.1.0 JSON document."""
    return json.dumps(document(data), indent=2, ensure_ascii=False) + "\n"


def _rule(kind: str) -> dict[str, Any]:
    text = _RULE_TEXT.get(kind, f"The link is broken ({kind.replace('_', ' ')}).")
    return {
        "id": kind,
        "name": "".join(part.capitalize() for part in kind.split("_")),
        "shortDescription": {"text": text},
        "defaultConfiguration": {"level": "error"},
    }


def _result(edge: BrokenEdge, rule_index: int) -> dict[str, Any]:
    status = f"status {edge.status}" if edge.status is not None else "no HTTP status"
    what = "Broken link to" if edge.source is not None else "Broken seed"
    return {
        "ruleId": edge.kind,
        "ruleIndex": rule_index,
        "level": "error",
        "message": {"text": f"{what} {edge.url} ({status}: {reason(edge.status, edge.error)})"},
        "locations": [{"physicalLocation": _physical(edge)}],
        "properties": {"url": edge.url, "status": edge.status, "elements": list(edge.elements)},
    }


def _physical(edge: BrokenEdge) -> dict[str, Any]:
    """The file (a local site) or the page's URL, with the link's line and column when known."""
    physical: dict[str, Any] = {"artifactLocation": {"uri": edge.file or edge.source or edge.url}}
    if edge.line is not None:
        region = {"startLine": edge.line}
        if edge.column is not None:
            region["startColumn"] = edge.column
        physical["region"] = region
    return physical


def _utc(timestamp: float) -> str:
    return (iso(timestamp) or "").replace("+00:00", "Z")


FORMAT = Format("sarif", render, "application/sarif+json")
