"""A group commit's statements on SQLite: one per table for the whole batch, not one per row.

``Frontier.complete`` commits a batch of fetched rows (~100 URLs, ~5,000
links) in one transaction. Run row by row, each result, each page's links and
each state change was its own ``execute`` or ``executemany``: the Python
around them held the GIL the event loop needs. Here the batch's rows are
gathered as plain tuples and written with one statement per table.

``take_leases`` decides which completions are accepted (one statement for the
batch: the rows this owner still holds) and marks them done or pending again;
``Rows`` collects what the accepted ones store and writes it. Each table's
rows go in as a few multi-row statements (``bulk``): ``executemany`` took the
GIL back once per row, waiting for the event loop's thread each time.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from crawler.models import Outcome
from crawler.store.sqlite import bulk, links

# The batch's rows this owner still holds: only those may be completed.
_HELD = """
SELECT id FROM url
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 1 AND lease_owner = ?2
"""

# Rows of ?1: (id, retry at); ?2 the owner.
_RETRY = f"""
UPDATE url SET state = 0, lease_owner = NULL, lease_expires_at = NULL,
    attempts = attempts + 1, next_attempt_at = r.at
FROM {bulk.rows_of(2, ["id", "at"])} AS r
WHERE url.id = r.id AND url.state = 1 AND url.lease_owner = ?2
"""

# A row upgraded from check to page while we held it goes back to pending. A
# page crawled OK is settled: links to it go to link_settled from now on.
# Rows of ?1: (id, kind leased, settles); ?2 the owner.
_DONE = f"""
UPDATE url SET state = CASE WHEN url.kind = d.kind THEN 2 ELSE 0 END,
    settled = (url.kind = d.kind AND d.settles),
    lease_owner = NULL, lease_expires_at = NULL, attempts = attempts + 1
FROM {bulk.rows_of(3, ["id", "kind", "settles"])} AS d
WHERE url.id = d.id AND url.state = 1 AND url.lease_owner = ?2
"""

# An upsert, not INSERT OR REPLACE: the counting triggers (crawl_count) see a
# changed result as an update; REPLACE's delete would not fire them.
_RESULT_INTO = """
INSERT INTO result
    (url_id, class, status, error_kind, error, redirect_to_id,
     content_type, bytes, elapsed_ms, checked_at, head_status)
"""
_RESULT_CONFLICT = """
ON CONFLICT (url_id) DO UPDATE SET
    class = excluded.class, status = excluded.status, error_kind = excluded.error_kind,
    error = excluded.error, redirect_to_id = excluded.redirect_to_id,
    content_type = excluded.content_type, bytes = excluded.bytes,
    elapsed_ms = excluded.elapsed_ms, checked_at = excluded.checked_at,
    head_status = excluded.head_status
"""
RESULT = f"{_RESULT_INTO} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) {_RESULT_CONFLICT}"

_VALIDATORS_INTO = "INSERT INTO page_validator (url_id, etag, last_modified)"
_VALIDATORS_CONFLICT = """
ON CONFLICT (url_id) DO UPDATE SET etag = excluded.etag, last_modified = excluded.last_modified
"""

ResultRow = tuple[
    int, str, int | None, str | None, str | None, int | None,
    str | None, int | None, int | None, float, int | None,
]  # fmt: skip


def take_leases(
    conn: sqlite3.Connection, owner: str, outcomes: Sequence[Outcome], now: float
) -> list[bool]:
    """Mark the rows this owner still holds done (or pending, for a retry); False: rejected.

    Only the first completion of a row in a batch can be accepted: the one
    after it finds the lease already given up.
    """
    ids = [o.leased.id for o in outcomes]
    held = {row[0] for row in bulk.select(conn, _HELD, (json.dumps(ids), owner), 1)}
    accepted: list[bool] = []
    retries: list[tuple[int, float]] = []
    dones: list[tuple[int, int, bool]] = []
    for outcome in outcomes:
        url_id = outcome.leased.id
        if url_id not in held:
            accepted.append(False)
            continue
        held.discard(url_id)
        accepted.append(True)
        if outcome.result is None:
            retries.append((url_id, outcome.retry_at or now))
        else:
            dones.append((url_id, int(outcome.leased.kind), outcome.settles))
    bulk.run(conn, _RETRY, retries, owner)
    bulk.run(conn, _DONE, dones, owner)
    return accepted


@dataclass(slots=True)
class Rows:
    """What a batch's accepted completions store besides ``url`` rows, written together."""

    results: list[ResultRow] = field(default_factory=list)
    # (source, target, element, at): links to settled pages (no fragment)
    settled: list[tuple[int, int, str, int | None]] = field(default_factory=list)
    # (target, source, fragment) -> (element, at): the first of duplicates wins
    open: dict[tuple[int, int, str], tuple[str, int | None]] = field(default_factory=dict)
    anchors: list[tuple[int, str]] = field(default_factory=list)
    validators: list[tuple[int, str | None, str | None]] = field(default_factory=list)

    def add_outcome(self, outcome: Outcome, redirect_id: int | None, now: float) -> None:
        """The result, anchors and validators of one accepted completion."""
        source = outcome.leased.id
        result = outcome.result
        assert result is not None
        self.results.append(
            (
                source,
                str(result.result_class),
                result.status,
                result.error_kind,
                result.error,
                redirect_id,
                result.content_type,
                result.bytes,
                result.elapsed_ms,
                now,
                result.head_status,
            )
        )
        if outcome.anchors is not None:
            self.anchors.append((source, ""))
            self.anchors.extend((source, name) for name in outcome.anchors)
        if (result.etag or result.last_modified) and outcome.settles:
            self.validators.append((source, result.etag, result.last_modified))

    def write(self, conn: sqlite3.Connection) -> None:
        """One statement per table (inside the caller's transaction; url rows already there)."""
        if self.open:
            links.record(conn, self.open)
        bulk.insert(
            conn, "INSERT OR IGNORE INTO link_settled (source_id, target_id, element, at)",
            self.settled,
        )  # fmt: skip
        bulk.insert(conn, "INSERT OR IGNORE INTO anchor (url_id, name)", self.anchors)
        self.results.sort(key=lambda r: r[0])
        bulk.insert(conn, _RESULT_INTO, self.results, _RESULT_CONFLICT)
        bulk.insert(conn, _VALIDATORS_INTO, self.validators, _VALIDATORS_CONFLICT)
