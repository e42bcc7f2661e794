"""Small helpers the formats share: grouping by source page, reasons, timestamps."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

from crawler.report.model import BrokenEdge

SEED_SOURCE = "(seed)"  # shown where a broken seed's source page would be
RENDERED_NOTE = "found after rendering"  # beside a link only the rendered DOM had (--render)

# C0 and C1 control characters but tab and newlines: terminal escapes, NUL, ...
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters replaced by U+FFFD, for formats read by people."""
    return _CONTROL.sub("\ufffd", text)


def by_source(
    edges: Iterable[BrokenEdge], *, shown: bool = False
) -> list[tuple[str | None, list[BrokenEdge]]]:
    """Edges grouped by source page, sources sorted (seeds first), links sorted by URL.

    A local file's page is its path (``BrokenEdge.file``: its ``source`` reads
    ``file:line:column``). ``shown``: grouped by ``source:line:column``
    (``BrokenEdge.shown_source``) instead.
    """
    groups: dict[str | None, list[BrokenEdge]] = {}
    # By page, then where the page writes the link (line 9 before line 10).
    order: dict[str | None, tuple[bool, str, int, int]] = {}
    for edge in edges:
        key = edge.shown_source if shown else (edge.file or edge.source)
        groups.setdefault(key, []).append(edge)
        at = (edge.line or 0, edge.column or 0) if shown else (0, 0)
        order[key] = (key is not None, edge.file or edge.source or "", *at)
    ordered = sorted(groups.items(), key=lambda item: order[item[0]])
    return [(source, sorted(links, key=lambda e: e.url)) for source, links in ordered]


def reason(status: int | None, error: str | None) -> str:
    """Why a link is broken, in a few words."""
    if error:
        return error
    return str(status) if status is not None else "broken"


def iso(timestamp: float | None, timespec: str = "seconds") -> str | None:
    """Unix seconds as ISO 8601 in UTC, or None."""
    if timestamp is None:
        return None
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).isoformat(timespec=timespec)
