"""The frontier, the visited set and the quiescence detector: one table, ``url``.

``Frontier`` keeps ``crawler.store.contract.FrontierStore``'s meaning on
SQLite (tests/store/ runs the same contract tests on both backends); the
engine reaches it through ``store.AsyncFrontier``. Its methods, each one
transaction:

- ``enqueue``: add seeds (dedup by the UNIQUE key, ``ON CONFLICT``).
- ``lease``: take a batch of due pending rows, with owner token and expiry.
- ``renew``: push this owner's lease expiry forward (and its heartbeat).
- ``complete``: for many fetched rows at once (group commit), insert children
  and edges, store results, mark done, or schedule a retry. A completion whose
  lease this owner no longer holds is rejected. Open links are appended and
  moved into the target-keyed table in batches (``links``).
- ``release``: give this owner's leases back (graceful shutdown).
- ``reclaim``: return expired leases, and those of dead workers, to pending.
- ``finish_if_quiescent``: inside one transaction, if nothing is pending or
  leased, mark the crawl finished.

Correctness lives in SQL; the in-memory caches only save work. This class is
synchronous: ``AsyncFrontier`` runs it on the single writer thread.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from crawler.models import (
    Counts,
    Discovered,
    LeasedUrl,
    Outcome,
    PreviousPage,
    ResultClass,
    UrlKind,
    UrlState,
)
from crawler.store import liveness, worker_counts
from crawler.store.sqlite import links, recrawl
from crawler.store.sqlite.db import WRITER_BUSY_TIMEOUT_MS, atomic
from crawler.store.sqlite.positions import packed as _packed

DEFAULT_SEEN_CACHE_SIZE = 50_000
HOST_CACHE_SIZE = 20_000
LOOKUP_CHUNK = 400  # bound parameters per IN (...) probe


_INSERT = """
INSERT INTO url (crawl_id, url, host_id, kind, depth, hop, state)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (crawl_id, url) DO NOTHING
RETURNING id, kind, settled
"""

# A URL found again with a stronger kind is upgraded (a separate statement, so
# that an upgrade is never counted as a new URL).
_UPGRADE = """
UPDATE url SET kind = ?1, depth = MIN(depth, ?2),
    state = CASE WHEN state = 2 THEN 0 ELSE state END
WHERE crawl_id = ?3 AND url = ?4 AND kind >= 1 AND kind < ?1
RETURNING id, kind, settled
"""

_LEASE = """
UPDATE url SET state = 1, lease_owner = ?, lease_expires_at = ?
WHERE id IN (
    SELECT id FROM url
    WHERE crawl_id = ? AND state = 0 AND next_attempt_at <= ?
    ORDER BY depth - (kind < 3), kind, id
    LIMIT ?
)
RETURNING id, url, host_id, kind, depth, hop, attempts
"""

# An upsert, not INSERT OR REPLACE: the counting triggers (crawl_count) see a
# changed result as an update; REPLACE's delete would not fire them.
_RESULT = """
INSERT INTO result
    (url_id, class, status, error_kind, error, redirect_to_id,
     content_type, bytes, elapsed_ms, checked_at, head_status)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (url_id) DO UPDATE SET
    class = excluded.class, status = excluded.status, error_kind = excluded.error_kind,
    error = excluded.error, redirect_to_id = excluded.redirect_to_id,
    content_type = excluded.content_type, bytes = excluded.bytes,
    elapsed_ms = excluded.elapsed_ms, checked_at = excluded.checked_at,
    head_status = excluded.head_status
"""


# What the writer remembers of a URL: (id, kind, settled). "Settled" means a
# page crawled with an OK result: never fetched again, never reported, so
# links to it go to the append-friendly link_settled table.
Known = tuple[int, int, int]


class Frontier:
    """Frontier, visited set and quiescence of one crawl (see module docstring)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        crawl_id: int,
        *,
        max_urls: int | None = None,
        seen_cache_size: int = DEFAULT_SEEN_CACHE_SIZE,
        max_cache_age_s: float | None = None,
    ) -> None:
        self._conn = conn
        self.crawl_id = crawl_id
        self._max_urls = max_urls
        self._seen: OrderedDict[str, Known] = OrderedDict()
        self._seen_cap = seen_cache_size
        self._host_ids: OrderedDict[str, int] = OrderedDict()
        self._host_names: dict[int, str] = {}
        self._url_count: int | None = None
        self._max_cache_age_s = max_cache_age_s
        self._wal_path: str | None = None
        self._earlier_crawls: list[int] | None = None
        self._previous_crawl: tuple[int | None] | None = None  # read once: (id,)

    # -- the contract -------------------------------------------------------

    def enqueue(self, seeds: Iterable[Discovered], now: float) -> int:
        """Add seeds at depth 0; return how many were new."""
        before = self._count_urls()
        try:
            with atomic(self._conn):
                self.add_seeds(seeds, now)
        except BaseException:
            self._forget_uncommitted()
            raise
        self._url_count = None
        return self._count_urls() - before

    def add_seeds(self, seeds: Iterable[Discovered], now: float) -> None:
        """``enqueue``'s work inside a transaction the caller holds (recording a crawl)."""
        for seed in seeds:
            self._upsert(seed, depth=0, hop=0, now=now)

    def lease(self, owner: str, limit: int, ttl_s: float, now: float) -> list[LeasedUrl]:
        """Lease up to ``limit`` due pending rows, shallowest first.

        A link that is only checked counts one level up and goes before that
        level's pages (migration 0006): checks keep pace with the pages.
        """
        with atomic(self._conn):
            rows = self._conn.execute(
                _LEASE, (owner, now + ttl_s, self.crawl_id, now, limit)
            ).fetchall()
        return [
            LeasedUrl(
                id=row[0],
                url=row[1],
                host=self._host_name(row[2]),
                kind=UrlKind(row[3]),
                depth=row[4],
                hop=row[5],
                attempts=row[6],
            )
            for row in sorted(rows, key=lambda r: (r[4] - (r[3] < UrlKind.PAGE), r[3], r[0]))
        ]

    def renew(self, owner: str, ttl_s: float, now: float) -> int:
        """Extend every lease this owner holds; return how many."""
        with atomic(self._conn):
            cur = self._conn.execute(
                "UPDATE url SET lease_expires_at = ? "
                "WHERE crawl_id = ? AND state = 1 AND lease_owner = ?",
                (now + ttl_s, self.crawl_id, owner),
            )
            self._conn.execute("UPDATE worker SET heartbeat_at = ? WHERE token = ?", (now, owner))
        return cur.rowcount

    def complete(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """Commit many fetched rows in one transaction; False marks a rejected stale one."""
        accepted: list[bool] = []
        try:
            with atomic(self._conn):
                self._look_up_known(outcomes)
                for outcome in outcomes:
                    accepted.append(self._complete_one(owner, outcome, now))
                urls, pages = worker_counts.tally(outcomes, accepted)
                if urls:
                    self._conn.execute(
                        "UPDATE worker SET urls_done = urls_done + ?, "
                        "pages_done = pages_done + ? WHERE token = ?",
                        (urls, pages, owner),
                    )
        except BaseException:
            self._forget_uncommitted()
            raise
        links.merge_due(self._conn)
        return accepted

    def release(self, owner: str) -> int:
        """Give back every lease this owner holds, untouched (graceful stop)."""
        with atomic(self._conn):
            cur = self._conn.execute(
                "UPDATE url SET state = 0, lease_owner = NULL, lease_expires_at = NULL "
                "WHERE crawl_id = ? AND state = 1 AND lease_owner = ?",
                (self.crawl_id, owner),
            )
            self._conn.execute("DELETE FROM worker WHERE token = ?", (owner,))
        liveness.LIVE_TOKENS.discard(owner)
        return cur.rowcount

    def reclaim(self, now: float, stale_after_s: float) -> int:
        """Return expired leases, and leases of dead workers, to pending."""
        with atomic(self._conn):
            dead = self._dead_workers(now, stale_after_s)
            cur = self._conn.execute(
                "UPDATE url SET state = 0, lease_owner = NULL, lease_expires_at = NULL "
                "WHERE crawl_id = ? AND state = 1 AND lease_expires_at < ?",
                (self.crawl_id, now),
            )
            reclaimed = cur.rowcount
            for token in dead:
                cur = self._conn.execute(
                    "UPDATE url SET state = 0, lease_owner = NULL, lease_expires_at = NULL "
                    "WHERE crawl_id = ? AND state = 1 AND lease_owner = ?",
                    (self.crawl_id, token),
                )
                reclaimed += cur.rowcount
                self._conn.execute("DELETE FROM worker WHERE token = ?", (token,))
        return reclaimed

    def finish_if_quiescent(self, now: float) -> bool:
        """Mark the crawl finished if, in this transaction, no row is pending or leased."""
        with atomic(self._conn):
            if self._has_outstanding():
                return False
            self._conn.execute(
                "UPDATE crawl SET state = 'finished', finished_at = COALESCE(finished_at, ?) "
                "WHERE id = ?",
                (now, self.crawl_id),
            )
        return True

    # -- registration and observation ----------------------------------------

    def register_worker(self, owner: str, now: float) -> None:
        """Record this process so others can tell its leases from a dead one's."""
        with atomic(self._conn):
            self._conn.execute(
                "INSERT OR REPLACE INTO worker "
                "(token, crawl_id, pid, hostname, started_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (owner, self.crawl_id, os.getpid(), socket.gethostname(), now, now),
            )
        liveness.LIVE_TOKENS.add(owner)

    def next_wake_at(self) -> float | None:
        """When something may next become leasable: a due retry or a lease expiry."""
        row = self._conn.execute(
            "SELECT (SELECT MIN(next_attempt_at) FROM url WHERE crawl_id = ?1 AND state = 0), "
            "(SELECT MIN(lease_expires_at) FROM url WHERE crawl_id = ?1 AND state = 1)",
            (self.crawl_id,),
        ).fetchone()
        times = [t for t in row if t is not None]
        return min(times) if times else None

    def counts(self) -> Counts:
        """Frontier counters; a few index scans, so call it seldom."""
        row = self._conn.execute(
            "SELECT "
            "(SELECT count(*) FROM url WHERE crawl_id = ?1 AND state = 0), "
            "(SELECT count(*) FROM url WHERE crawl_id = ?1 AND state = 1), "
            "(SELECT count(*) FROM url WHERE crawl_id = ?1), "
            "(SELECT count(*) FROM url WHERE crawl_id = ?1 AND kind = 3 AND state = 2), "
            "(SELECT count(*) FROM result r JOIN url u ON u.id = r.url_id "
            " WHERE r.class = 'broken' AND u.crawl_id = ?1)",
            (self.crawl_id,),
        ).fetchone()
        pending, leased, total, pages, broken = row
        return Counts(
            pending=pending,
            leased=leased,
            done=total - pending - leased,
            pages=pages,
            broken=broken,
        )

    def checkpoint(self) -> None:
        """Move WAL content into the database without waiting for readers."""
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def wal_bytes(self) -> int:
        """Size of the write-ahead log now."""
        if self._wal_path is None:
            row = self._conn.execute("PRAGMA database_list").fetchone()
            self._wal_path = (row[2] or "") + "-wal"
        try:
            return os.stat(self._wal_path).st_size
        except OSError:
            return 0

    def bound_wal(self, limit_bytes: int) -> bool:
        """Keep the WAL under ``limit_bytes``; False while a reader's snapshot prevents it.

        A reader holding an old snapshot stops a checkpoint from resetting the
        log, so the WAL grows with every commit. Past the limit this truncates
        the log when it can, waiting for readers at most briefly; the caller
        stops committing while this returns False, which keeps the file bounded.
        """
        if self.wal_bytes() <= limit_bytes:
            return True
        self._conn.execute("PRAGMA busy_timeout = 50")
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            self._conn.execute(f"PRAGMA busy_timeout = {WRITER_BUSY_TIMEOUT_MS}")
        return self.wal_bytes() <= limit_bytes

    def previous_crawl(self) -> int | None:
        """The crawl this one re-crawls (read once), None for a full crawl."""
        if self._previous_crawl is None:
            previous = recrawl.previous_crawl_id(self._conn, self.crawl_id)
            if previous is not None:
                # ``previous_pages`` reads its links by source from link_open
                # (link_fresh has no index): move those still appended there.
                links.merge_due(self._conn, force=True)
            self._previous_crawl = (previous,)
        return self._previous_crawl[0]

    def previous_pages(self, urls: Sequence[str]) -> dict[str, PreviousPage]:
        """For a re-crawl: what the crawl it starts from stored for these pages."""
        previous = self.previous_crawl()
        if previous is None or not urls:
            return {}
        return recrawl.previous_pages(self._conn, previous, urls)

    # -- internals ------------------------------------------------------------

    def _complete_one(self, owner: str, outcome: Outcome, now: float) -> bool:
        leased = outcome.leased
        if outcome.result is None:
            cur = self._conn.execute(
                "UPDATE url SET state = 0, lease_owner = NULL, lease_expires_at = NULL, "
                "attempts = attempts + 1, next_attempt_at = ? "
                "WHERE id = ? AND state = 1 AND lease_owner = ?",
                (outcome.retry_at or now, leased.id, owner),
            )
            return cur.rowcount == 1
        # A row upgraded from check to page while we held it goes back to pending.
        settles = leased.kind == UrlKind.PAGE and outcome.result.result_class == ResultClass.OK
        cur = self._conn.execute(
            "UPDATE url SET state = CASE WHEN kind = ?1 THEN 2 ELSE 0 END, "
            "settled = (kind = ?1 AND ?2), "
            "lease_owner = NULL, lease_expires_at = NULL, attempts = attempts + 1 "
            "WHERE id = ?3 AND state = 1 AND lease_owner = ?4",
            (int(leased.kind), settles, leased.id, owner),
        )
        if cur.rowcount != 1:
            return False
        if settles and (known := self._seen.get(leased.url)) is not None:
            self._seen[leased.url] = (known[0], known[1], 1)
        edges: list[tuple[int, int, str, str, int | None]] = []
        settled_edges: list[tuple[int, int, str, int | None]] = []
        redirect_id = None
        if outcome.redirect_to is not None:
            redirect = self._upsert(
                outcome.redirect_to, depth=leased.depth, hop=leased.hop + 1, now=now
            )
            if redirect is not None:
                redirect_id = redirect[0]
                edges.append((redirect_id, leased.id, "", "redirect", None))
        for child in outcome.children:
            target = self._upsert(child, depth=leased.depth + 1, hop=0, now=now)
            if target is None:
                continue
            if target[2] and not child.fragment:
                settled_edges.append((leased.id, target[0], child.element, _packed(child)))
            else:
                edges.append((target[0], leased.id, child.fragment, child.element, _packed(child)))
        if outcome.anchors is not None:
            self._conn.executemany(
                "INSERT OR IGNORE INTO anchor (url_id, name) VALUES (?, ?)",
                [(leased.id, ""), *((leased.id, name) for name in outcome.anchors)],
            )
        if outcome.render_issues:  # a page rendered again keeps only its latest issues
            self._conn.execute("DELETE FROM render_issue WHERE url_id = ?", (leased.id,))
            self._conn.executemany(
                "INSERT INTO render_issue (url_id, seq, kind, message, target) "
                "VALUES (?, ?, ?, ?, ?)",
                [(leased.id, i, *issue) for i, issue in enumerate(outcome.render_issues)],
            )
        if edges:
            links.record(self._conn, edges)
        if settled_edges:
            self._conn.executemany(
                "INSERT OR IGNORE INTO link_settled (source_id, target_id, element, at) "
                "VALUES (?, ?, ?, ?)",
                settled_edges,
            )
        result = outcome.result
        self._conn.execute(
            _RESULT,
            (
                leased.id,
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
            ),
        )
        if settles and (result.etag or result.last_modified):
            recrawl.save_validators(self._conn, leased.id, result.etag, result.last_modified)
        return True

    def _upsert(self, item: Discovered, *, depth: int, hop: int, now: float) -> Known | None:
        """Insert or find a URL row; return (id, kind, settled), or None past ``max_urls``."""
        cached = self._seen.get(item.url)
        if cached is not None and cached[1] >= item.kind:
            self._seen.move_to_end(item.url)
            return cached
        if self._max_urls is not None and self._count_urls() >= self._max_urls:
            existing = self._existing_id(item.url)
            return None if existing is None else (existing, int(item.kind), 0)
        host_id = self._host_id(item.host) if item.host else None
        state = UrlState.DONE if item.kind == UrlKind.SKIP else UrlState.PENDING
        row = self._conn.execute(
            _INSERT,
            (self.crawl_id, item.url, host_id, int(item.kind), depth, hop, int(state)),
        ).fetchone()
        if row is not None:
            url_id, kind, settled = row
            self._bump_count()
            if item.kind == UrlKind.CHECK and self._max_cache_age_s is not None:
                self._reuse_earlier_result(url_id, item.url, now)
            if item.kind == UrlKind.SKIP:
                self._conn.execute(
                    _RESULT,
                    (
                        url_id,
                        str(item.result),
                        None,
                        None,
                        item.reason,
                        None,
                        None,
                        None,
                        None,
                        now,
                        None,
                    ),
                )
        else:
            if item.kind > UrlKind.CHECK:
                row = self._conn.execute(
                    _UPGRADE, (int(item.kind), depth, self.crawl_id, item.url)
                ).fetchone()
            if row is None:
                row = self._conn.execute(
                    "SELECT id, kind, settled FROM url WHERE crawl_id = ? AND url = ?",
                    (self.crawl_id, item.url),
                ).fetchone()
            url_id, kind, settled = row
        return self._remember(item.url, url_id, kind, settled)

    def _look_up_known(self, outcomes: Sequence[Outcome]) -> None:
        """Find the ids of a batch's links the cache misses, a few statements for all.

        Most links on a page are already in the frontier (found by an earlier
        page); one ``IN`` probe per few hundred of them is far cheaper than an
        INSERT attempt and a SELECT for each.
        """
        wanted: set[str] = set()
        for outcome in outcomes:
            found = list(outcome.children)
            if outcome.redirect_to is not None:
                found.append(outcome.redirect_to)
            for item in found:
                cached = self._seen.get(item.url)
                if cached is None or cached[1] < item.kind:
                    wanted.add(item.url)
        keys = list(wanted)
        for start in range(0, len(keys), LOOKUP_CHUNK):
            chunk = keys[start : start + LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            for url, url_id, kind, settled in self._conn.execute(
                f"SELECT url, id, kind, settled FROM url WHERE crawl_id = ? AND url IN ({marks})",
                (self.crawl_id, *chunk),
            ):
                self._remember(url, url_id, kind, settled)

    def _reuse_earlier_result(self, url_id: int, url: str, now: float) -> None:
        """``--max-cache-age``: a fine result from an earlier crawl completes the row."""
        assert self._max_cache_age_s is not None
        if self._earlier_crawls is None:
            self._earlier_crawls = [
                row[0]
                for row in self._conn.execute(
                    "SELECT id FROM crawl WHERE id <> ? ORDER BY id DESC LIMIT 20",
                    (self.crawl_id,),
                )
            ]
        if not self._earlier_crawls:
            return
        marks = ",".join("?" * len(self._earlier_crawls))
        row = self._conn.execute(
            f"SELECT r.status, r.content_type, r.bytes, r.elapsed_ms, r.checked_at "
            f"FROM url p JOIN result r ON r.url_id = p.id "
            f"WHERE p.crawl_id IN ({marks}) AND p.url = ? AND r.class = 'ok' "
            f"AND r.checked_at >= ? ORDER BY r.checked_at DESC LIMIT 1",
            (*self._earlier_crawls, url, now - self._max_cache_age_s),
        ).fetchone()
        if row is None:
            return
        self._conn.execute("UPDATE url SET state = 2 WHERE id = ?", (url_id,))
        self._conn.execute(_RESULT, (url_id, "ok", row[0], None, None, None, *row[1:], None))

    def _forget_uncommitted(self) -> None:
        """After a rollback the caches may name rows and hosts that do not exist."""
        self._seen.clear()
        self._host_ids.clear()
        self._host_names.clear()
        self._url_count = None

    def _remember(self, url: str, url_id: int, kind: int, settled: int) -> Known:
        known = self._seen[url] = (url_id, kind, settled)
        self._seen.move_to_end(url)
        if len(self._seen) > self._seen_cap:
            self._seen.popitem(last=False)
        return known

    def _existing_id(self, url: str) -> int | None:
        row = self._conn.execute(
            "SELECT id FROM url WHERE crawl_id = ? AND url = ?", (self.crawl_id, url)
        ).fetchone()
        return None if row is None else int(row[0])

    def _count_urls(self) -> int:
        if self._url_count is None:
            self._url_count = self._conn.execute(
                "SELECT count(*) FROM url WHERE crawl_id = ?", (self.crawl_id,)
            ).fetchone()[0]
        return self._url_count

    def _bump_count(self) -> None:
        if self._url_count is not None:
            self._url_count += 1

    def _host_id(self, name: str) -> int:
        host_id = self._host_ids.get(name)
        if host_id is not None:
            return host_id
        self._conn.execute("INSERT OR IGNORE INTO host (name) VALUES (?)", (name,))
        host_id = self._conn.execute("SELECT id FROM host WHERE name = ?", (name,)).fetchone()[0]
        self._host_ids[name] = host_id
        if len(self._host_ids) > HOST_CACHE_SIZE:
            self._host_ids.popitem(last=False)
        return int(host_id)

    def _host_name(self, host_id: int | None) -> str:
        if host_id is None:
            return ""
        name = self._host_names.get(host_id)
        if name is None:
            name = self._conn.execute("SELECT name FROM host WHERE id = ?", (host_id,)).fetchone()[
                0
            ]
            if len(self._host_names) >= HOST_CACHE_SIZE:
                self._host_names.clear()
            self._host_names[host_id] = name
        return name

    def _has_outstanding(self) -> bool:
        row = self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM url WHERE crawl_id = ?1 AND state = 0) "
            "OR EXISTS (SELECT 1 FROM url WHERE crawl_id = ?1 AND state = 1)",
            (self.crawl_id,),
        ).fetchone()
        return bool(row[0])

    def _dead_workers(self, now: float, stale_after_s: float) -> list[str]:
        rows = self._conn.execute(
            "SELECT token, pid, hostname, heartbeat_at FROM worker WHERE crawl_id = ?",
            (self.crawl_id,),
        ).fetchall()
        return liveness.dead_workers(rows, now, stale_after_s)
