"""Array parameters sent as PostgreSQL array literals (one text value), not lists.

asyncpg encodes a list parameter element by element and asks of each element
whether it is an array itself (``isinstance`` against abstract base classes,
each check a Python call). A completion carries about fifty links a page in
such arrays: that encoding was most of the store thread's CPU, all of it
holding the GIL the crawl's event loop needs. A literal is one string built by
``str.join``; the statement casts it back (``$1::text::bigint[]``), and the
server parses it in C.
"""

from __future__ import annotations

from collections.abc import Iterable


def numbers(values: Iterable[int | float | bool | None]) -> str:
    """A literal for a column of numbers (integer, bigint, smallint, double precision) or booleans.

    ``str`` of an int, a float (``inf``, ``nan`` included) or a bool is what
    PostgreSQL's input functions read; no number's text contains ``None``, so
    that word alone becomes ``NULL``.
    """
    return "{" + ",".join(map(str, values)).replace("None", "NULL") + "}"


def texts(values: Iterable[str | None]) -> str:
    """A ``text[]`` literal: each element quoted, with ``\\`` and ``"`` escaped."""
    return (
        "{"
        + ",".join(
            [
                "NULL"
                if value is None
                else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
                for value in values
            ]
        )
        + "}"
    )
