"""Many rows in one statement: bound in multi-row ``VALUES``, or read from a JSON array.

The writer runs on its own thread beside the event loop's. ``executemany``
binds each row holding the GIL and steps it without: it takes the GIL back
once per row, and whenever the loop's thread is running it waits for the
switch interval each time. A group commit's ~5,000 link rows then cost
hundreds of milliseconds of waiting (bench/RESULTS.md, "the writer's GIL
round trips"). One statement for many rows takes the GIL back once for all
of them.

``insert`` binds the rows as parameters of a multi-row ``VALUES``, in
statements of a few fixed sizes (each size's text is prepared once and kept
in the connection's statement cache): SQLite copies bound values as they
are, where reading them out of JSON (``json_each``, then ``json_extract``
per column) cost more than the B-tree insert itself (bench/RESULTS.md,
session 42). Values keep their types and bytes exactly.

A statement that cannot be bound (a lone surrogate, an integer past 64
bits) runs again in smaller statements, and only the rows no statement can
bind go through a JSON array: SQLite's JSON functions end a text at a NUL
character, so a bindable row sent that way beside them would lose the rest
of its text. ``run`` and ``select`` read their rows from JSON: integers,
floats, text, None and booleans (as 1/0). orjson encodes and decodes them:
it holds the GIL a tenth of the time the standard library's C encoder does,
time the event loop's thread waits for. What orjson refuses goes through
``json``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from itertools import chain
from typing import Any

import orjson

# Rows a ``VALUES`` statement binds, largest first: a batch is cut into these
# sizes (at most three statements of each smaller size), so each insert's head
# has a few statement texts, each prepared once. Larger statements were no
# cheaper a row (bench/RESULTS.md, session 42).
STATEMENT_ROWS = (256, 64, 16, 4, 1)
_statements: dict[tuple[str, str, int, int], str] = {}


def encode(values: object) -> str:
    """JSON text of rows (or of a list of values) for ``json_each``."""
    try:
        return orjson.dumps(values).decode()
    except TypeError:  # orjson.JSONEncodeError: a lone surrogate, an integer past 64 bits
        return json.dumps(values)


def columns(count: int) -> str:
    """The select list reading ``count`` values of each row of ``json_each(?)``."""
    return ", ".join(f"json_extract(value, '$[{i}]')" for i in range(count))


def rows_of(count: int, names: Sequence[str] | None = None) -> str:
    """A subquery of the rows, columns named ``names`` (c0, c1, ... by default)."""
    named = names or [f"c{i}" for i in range(count)]
    select = ", ".join(f"json_extract(value, '$[{i}]') AS {name}" for i, name in enumerate(named))
    return f"(SELECT {select} FROM json_each(?1))"


def insert(
    conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[object]], tail: str = ""
) -> None:
    """``head`` (``INSERT INTO t (a, b)``) of these rows, then ``tail`` (an ``ON CONFLICT``).

    Rows are inserted in their order; triggers fire per row as for ``executemany``.
    """
    if not rows:
        return
    width = len(rows[0])
    most = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width
    sizes = [size for size in STATEMENT_ROWS if size <= most]
    done = _insert_bound(conn, head, tail, rows, sizes) if sizes else 0
    _insert_json(conn, head, rows[done:], tail)  # only if no statement fits a row


def _insert_bound(
    conn: sqlite3.Connection,
    head: str,
    tail: str,
    rows: Sequence[Sequence[object]],
    sizes: Sequence[int],
) -> int:
    """Rows in statements of ``sizes``, largest first; how many went in.

    A statement that cannot be bound (nothing of it ran) is tried again in
    the next smaller size: a row that cannot be bound costs a few statements
    and goes alone through JSON; the rows beside it are still bound.
    """
    width = len(rows[0])
    done = 0
    for at, size in enumerate(sizes):
        if len(rows) - done < size:
            continue  # a size this batch does not use: its text is not built
        sql = _values_statement(head, tail, width, size)
        while len(rows) - done >= size:
            part = rows[done : done + size]
            try:
                conn.execute(sql, list(chain.from_iterable(part)))
            except (UnicodeEncodeError, OverflowError):
                smaller = sizes[at + 1 :]
                went = _insert_bound(conn, head, tail, part, smaller) if smaller else 0
                _insert_json(conn, head, part[went:], tail)
            done += size
    return done


def _values_statement(head: str, tail: str, width: int, size: int) -> str:
    key = (head, tail, width, size)
    sql = _statements.get(key)
    if sql is None:
        row = "(" + ", ".join("?" * width) + ")"
        sql = _statements[key] = f"{head} VALUES {', '.join([row] * size)} {tail}"
    return sql


def _insert_json(
    conn: sqlite3.Connection, head: str, rows: Sequence[Sequence[object]], tail: str
) -> None:
    """``insert`` through one JSON array (rows a ``VALUES`` statement cannot bind)."""
    if not rows:
        return
    width = len(rows[0])
    payload = encode(rows)
    # WHERE true: an upsert's ON CONFLICT after a SELECT needs it (SQLite's grammar).
    sql = f"{head} SELECT {columns(width)} FROM json_each(?1) WHERE true {tail}"
    conn.execute(sql, (payload,))


def run(
    conn: sqlite3.Connection, sql: str, rows: Sequence[Sequence[object]], *extra: object
) -> None:
    """``sql`` reading the rows as ``?1`` (see ``rows_of``), ``extra`` as ?2, ?3, ..."""
    if rows:
        conn.execute(sql, (encode(rows), *extra))


def select(
    conn: sqlite3.Connection, sql: str, params: Sequence[object], width: int
) -> list[list[Any]]:
    """The rows of ``sql`` (``width`` columns) as lists, read in one step as one JSON array.

    Each row a cursor steps takes the GIL back, as ``executemany`` does; one
    aggregate row takes it back once. Row order is the query's scan order.
    Integers, text and NULL come back as they are; not for REAL columns
    (SQLite's JSON writes 15 significant digits: a timestamp loses its
    microseconds) nor BLOBs (JSON has none).
    """
    names = ", ".join(f"c{i}" for i in range(width))
    (rows,) = conn.execute(
        f"WITH q({names}) AS ({sql}) SELECT json_group_array(json_array({names})) FROM q",
        tuple(params),
    ).fetchone()
    result: list[list[Any]] = orjson.loads(rows)
    return result
