"""Numbered SQL migrations, applied in order at open.

Files are ``migrations/<dialect>/NNNN_description.sql`` (append-only). The
applied version lives in ``PRAGMA user_version`` and in ``_migrations``; the
application id marks the file as ours.
"""

from __future__ import annotations

import re
import sqlite3
import time
from importlib import resources
from pathlib import Path

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migrations_dir(dialect: str = "sqlite") -> Path:
    """Where the SQL files are: beside the package in a checkout, inside it when installed."""
    packaged = resources.files("crawler").joinpath("migrations", dialect)
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "migrations" / dialect


def available(dialect: str = "sqlite") -> list[tuple[int, str, Path]]:
    """(version, name, path) of every migration file, in order."""
    found = []
    for path in migrations_dir(dialect).iterdir():
        match = _NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path.stem, path))
    return sorted(found)


def latest_version(dialect: str = "sqlite") -> int:
    """The schema version this code writes."""
    files = available(dialect)
    return files[-1][0] if files else 0


def apply(conn: sqlite3.Connection, application_id: int) -> int:
    """Apply every migration newer than the database; return the resulting version."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    pending = [m for m in available() if m[0] > current]
    if not pending:
        return int(current)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"PRAGMA application_id = {application_id}")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        for version, name, path in pending:
            for statement in _statements(path.read_text(encoding="utf-8")):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO _migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, time.time()),
            )
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # a full disk may already have rolled it back
            conn.execute("ROLLBACK")
        raise
    return pending[-1][0]


def _statements(script: str) -> list[str]:
    """Split a migration into statements with sqlite3.complete_statement (handles CTEs)."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        if not buffer and line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
