"""A link's line and column as SQLite keeps them (migration 0015): one small integer.

``line << 10 | column`` while the column is under 1024 (two or three bytes in
the record), else ``-(line << 32 | column)``; NULL when unknown.
"""

from __future__ import annotations

from crawler.models import Discovered


def packed(child: Discovered) -> int | None:
    """A link's line and column as migration 0015 stores them: one small integer."""
    line, column = child.line, child.column
    if line is None or column is None:
        return None
    return line << 10 | column if column < 1024 else -(line << 32 | column)


def unpacked(at: int | None) -> tuple[int | None, int | None]:
    """``(line, column)`` of a packed ``at`` (``packed``'s inverse); (None, None) when unknown."""
    if at is None:
        return None, None
    if at >= 0:
        return at >> 10, at & 1023
    return -at >> 32, -at & 0xFFFFFFFF
