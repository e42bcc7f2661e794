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
    UrlKind,
    UrlState,
)
from crawler.store import liveness, url_cache, worker_counts
from crawler.store.sqlite import bulk, completion, links, recorded, recrawl
from crawler.store.sqlite.db import WRITER_BUSY_TIMEOUT_MS, atomic

# URLs the writer remembers (crawler.store.url_cache): a crawl of up to this many
# URLs needs no probe of the table at all (``_cache_is_whole``).
DEFAULT_SEEN_CACHE_SIZE = 120_000
HOST_CACHE_SIZE = 20_000
# A merge of open links due with fewer URLs than this left to lease waits (merge_links_due):
# about a second of leases, against a merge's third of a second per 200,000 links.
MERGE_WAITS_BELOW_PENDING = 2_000


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

# The rows to lease, read as one JSON row (every row a cursor steps takes the
# GIL back: ``bulk``; ``UPDATE ... RETURNING`` steps once a row), then leased by id.
_LEASABLE = """
SELECT id, url, host_id, kind, depth, hop, attempts FROM url
WHERE crawl_id = ? AND state = 0 AND next_attempt_at <= ?
ORDER BY depth - (kind < 3), kind, id
LIMIT ?
"""
_LEASE = """
UPDATE url SET state = 1, lease_owner = ?2, lease_expires_at = ?3
WHERE id IN (SELECT value FROM json_each(?1))
"""


# What the writer remembers of a URL: its id, kind and settledness packed into
# one int (``url_cache.pack``). "Settled" means a page crawled with an OK
# result: never fetched again, never reported, so links to it go to the
# append-friendly link_settled table.
Known = int


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
        self._seen = url_cache.UrlCache(seen_cache_size)
        # The table's max(id) as of which the cache holds every URL of this
        # crawl (``_cache_is_whole``); None when it may not.
        self._whole_through: int | None = None
        self._whole_tried = False
        self._host_ids: OrderedDict[str, int] = OrderedDict()
        self._host_names: dict[int, str] = {}
        self._url_count: int | None = None
        self._max_cache_age_s = max_cache_age_s
        self._wal_path: str | None = None
        self._earlier_crawls: list[int] | None = None
        self._previous_crawl: tuple[int | None] | None = None  # read once: (id,)
        self._recorded = recorded.RecordedLinks(
            conn, crawl_id, max_cache_age_s=max_cache_age_s, earlier_crawls=self._earlier
        )

    # -- the contract -------------------------------------------------------

    def enqueue(self, seeds: Iterable[Discovered], now: float) -> int:
        """Add seeds at depth 0; return how many were new."""
        before = self._count_urls()
        try:
            with atomic(self._conn):
                self.add_seeds(seeds, now)
                if self._holds_whole_crawl():  # the seeds are in the cache too
                    self._whole_through = self._max_id()
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
            rows = bulk.select(self._conn, _LEASABLE, (self.crawl_id, now, limit), 7)
            if rows:
                ids = bulk.encode([row[0] for row in rows])
                self._conn.execute(_LEASE, (ids, owner, now + ttl_s))
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

    def complete(
        self, owner: str, outcomes: Sequence[Outcome], now: float, *, merge_links: bool = True
    ) -> list[bool]:
        """Commit many fetched rows in one transaction; False marks a rejected stale one.

        Then the open links are merged if due, unless the caller does it later
        (``merge_links=False``: see ``merge_links_due``).
        """
        if any(o.recorded is not None for o in outcomes):
            self.previous_crawl()  # its links all in link_open, where the copy reads them
        try:
            accepted = self._complete_once(owner, outcomes, now)
        except BaseException as exc:
            if not isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise
            # A new row that collides: the cache took itself for the whole
            # crawl when it was not (``_cache_is_whole``). Once more, probing.
            accepted = self._complete_once(owner, outcomes, now)
        if merge_links:
            links.merge_due(self._conn)
        return accepted

    def _complete_once(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """``complete``'s transaction; after a rollback the caches are forgotten."""
        try:
            with atomic(self._conn):
                accepted = completion.take_leases(self._conn, owner, outcomes, now)
                pairs = zip(outcomes, accepted, strict=True)
                done = [o for o, ok in pairs if ok and o.result is not None]
                if done:
                    self._record_done(done, now)
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
        return accepted

    def merge_links_due(self, *, dry: bool) -> int:
        """Merge the open links if due; rows moved.

        A merge holds the writer, and with it the next lease: when the frontier
        ran dry (``dry``: the engine waits for its next rows) or few URLs are
        left to lease, the crawl would stall for it, and may well end before
        it needs the merge at all (readers read ``link_fresh`` too). It is then
        held back until twice the batch has been appended, which bounds
        ``link_fresh`` all the same.
        """
        held, batch = links.fresh_rows(self._conn), links.batch_rows(self._conn)
        if held <= 0 or held < batch:
            return 0  # most commits: nothing more is read
        if held < 2 * batch and (dry or self._pending_below(MERGE_WAITS_BELOW_PENDING)):
            return 0
        return links.merge(self._conn)

    def _pending_below(self, limit: int) -> bool:
        """Fewer than ``limit`` URLs wait to be leased (at most ``limit`` index entries read)."""
        (pending,) = self._conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM url WHERE crawl_id = ? AND state = 0 LIMIT ?)",
            (self.crawl_id, limit),
        ).fetchone()
        return bool(pending < limit)

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

    def previous_pages(
        self, urls: Sequence[str], *, with_links: bool = True
    ) -> dict[str, PreviousPage]:
        """For a re-crawl: what the crawl it starts from stored for these pages."""
        previous = self.previous_crawl()
        if previous is None or not urls:
            return {}
        return recrawl.previous_pages(self._conn, previous, urls, with_links=with_links)

    # -- internals ------------------------------------------------------------

    def _record_done(self, done: Sequence[Outcome], now: float) -> None:
        """Children, redirect targets, links, results of a batch's accepted completions.

        The per-link work is a cache lookup and a tuple: new URLs get their ids
        here (``_NewUrls``) and every table is written once for the batch.
        """
        copies = [o for o in done if o.recorded is not None]
        if copies and self._max_urls is not None:  # counted URL by URL: in Python
            done, copies = recorded.expanded(self._conn, done), []
        seen = self._seen
        for outcome in done:
            if outcome.settles:
                seen.settle(outcome.leased.url)
        new = _NewUrls(self._conn, None if self._cache_is_whole() else self._absent_from(done))
        if self._max_urls is not None:
            self._count_urls()  # exact now, kept exact by _bump_count
        rows = completion.Rows()
        settled_append = rows.settled.append
        open_rows = rows.open
        seen_get = seen.get
        for outcome in done:
            leased = outcome.leased
            source = leased.id
            redirect_id = None
            if outcome.redirect_to is not None:
                redirect = self._find(outcome.redirect_to, leased.depth, leased.hop + 1, now, new)
                if redirect is not None:
                    redirect_id = url_cache.row_id(redirect)
                    open_rows.setdefault((redirect_id, source, ""), ("redirect", None))
            depth = leased.depth + 1
            for child in outcome.children:
                url, _, kind, element, fragment, _, _, line, column = child
                target = seen_get(url)
                if target is None or (target >> 1 & 3) < kind:  # url_cache.kind_of, inline
                    target = self._find(child, depth, 0, now, new)
                    if target is None:
                        continue
                # positions.packed, inline: this runs once per link
                if line is None or column is None:
                    at = None
                elif column < 1024:
                    at = line << 10 | column
                else:
                    at = -(line << 32 | column)
                target_id = target >> 3  # url_cache.row_id, inline
                if target & 1 and not fragment:
                    settled_append((source, target_id, element, at))
                else:
                    open_rows.setdefault((target_id, source, fragment), (element, at))
            rows.add_outcome(outcome, redirect_id, now)
            if outcome.render_issues:  # a page rendered again keeps only its latest issues
                self._conn.execute("DELETE FROM render_issue WHERE url_id = ?", (source,))
                self._conn.executemany(
                    "INSERT INTO render_issue (url_id, seq, kind, message, target) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [(source, i, *issue) for i, issue in enumerate(outcome.render_issues)],
                )
        new.flush()
        rows.write(self._conn)
        if copies:  # rows the cache does not hold: it is no longer the whole crawl
            self._recorded.copy(copies, now)
            self._whole_through = None
            self._url_count = None
        elif self._holds_whole_crawl():
            self._whole_through = self._max_id()

    def _find(
        self, item: Discovered, depth: int, hop: int, now: float, new: _NewUrls
    ) -> Known | None:
        """A found URL's row, made if new; None past ``max_urls`` (``_upsert``'s meaning).

        A URL the batch's probe found absent, of a plain kind, is given its id
        here and inserted with the batch's others; anything else (an upgrade,
        a skipped URL, the ``max_urls`` bound, a cache miss) goes through
        ``_upsert`` after the batch's new rows are written. A new URL the
        cache leaves out (``UrlCache.put_new``) is remembered for the batch.
        """
        cached = self._seen.get(item.url)
        if cached is None:
            cached = new.recent.get(item.url)
        if cached is not None and url_cache.kind_of(cached) >= item.kind:
            return cached
        # While the cache is whole (``new.absent`` None) every miss is a new URL.
        absent = new.absent
        is_new = self._holds_whole_crawl() if absent is None else item.url in absent
        if (
            cached is None
            and is_new
            and item.kind != UrlKind.SKIP
            and (item.kind != UrlKind.CHECK or self._max_cache_age_s is None)
            and (self._max_urls is None or self._count_urls() < self._max_urls)
        ):
            if new.absent is not None:
                new.absent.discard(item.url)
            host_id = self._host_id(item.host) if item.host else None
            url_id = new.add(self.crawl_id, item.url, host_id, int(item.kind), depth, hop)
            self._bump_count()
            entry = url_cache.pack(url_id, int(item.kind), 0)
            if not self._seen.put_new(item.url, entry):
                new.recent[item.url] = entry
            return entry
        new.flush()
        known = self._upsert(item, depth=depth, hop=hop, now=now)
        new.next_id = None  # _upsert may have inserted a row
        return known

    def _upsert(self, item: Discovered, *, depth: int, hop: int, now: float) -> Known | None:
        """Insert or find a URL row; its entry (``url_cache.pack``), or None past ``max_urls``."""
        cached = self._seen.get(item.url)
        if cached is not None and url_cache.kind_of(cached) >= item.kind:
            return cached
        if self._max_urls is not None and self._count_urls() >= self._max_urls:
            existing = self._existing_id(item.url)
            return None if existing is None else url_cache.pack(existing, int(item.kind), 0)
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
                    completion.RESULT,
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

    def _cache_is_whole(self) -> bool:
        """Whether the cache holds every URL of this crawl: then a miss is a new URL.

        True while this writer made or loaded every row of the crawl and the
        cache never dropped one (the crawl is under half its size): a
        10,000-page crawl's links then need no probe at all. The table's
        ``max(id)`` tells whether another process added rows since this
        writer's last commit; the crawl's rows are loaded once, at the first
        batch, if they fit. Should another crawl's newest rows be deleted and
        their ids given again to this crawl's rows, ``max(id)`` may come back
        to the same value: the batch's new rows then collide, and ``complete``
        runs it once more, probing.
        """
        if self._holds_whole_crawl():
            if self._max_id() == self._whole_through:
                return True
            self._whole_through = None  # another writer added rows: probe from now on
        if self._whole_tried:
            return False
        self._whole_tried = True
        top = self._max_id()
        limit = self._seen.capacity // 2
        # Counted first: a resumed crawl past the limit reads no rows into memory.
        (count,) = self._conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM url WHERE crawl_id = ? LIMIT ?)",
            (self.crawl_id, limit + 1),
        ).fetchone()
        if count > limit:
            return False
        for url, url_id, kind, settled in self._conn.execute(
            "SELECT url, id, kind, settled FROM url WHERE crawl_id = ?", (self.crawl_id,)
        ):
            self._remember(url, url_id, kind, settled)
        self._whole_through = top
        return True

    def _max_id(self) -> int:
        (top,) = self._conn.execute("SELECT max(id) FROM url").fetchone()
        return int(top or 0)

    def _absent_from(self, done: Sequence[Outcome]) -> set[str]:
        """Look up the batch's links the cache misses, a few statements for all; return the absent.

        Most links on a page are already in the frontier (found by an earlier
        page); one probe for all of them is far cheaper than an INSERT attempt
        and a SELECT for each. The URLs it does not find are new:
        nothing else writes the table while this transaction holds the lock.
        """
        found = {child.url for outcome in done for child in outcome.children}
        found.update(o.redirect_to.url for o in done if o.redirect_to is not None)
        seen = self._seen
        keys = [url for url in found if url not in seen]
        absent = set(keys)
        if not keys:
            return absent
        probe = (self.crawl_id, bulk.encode(keys))
        for url, url_id, kind, settled in bulk.select(self._conn, _PROBE, probe, 4):
            self._remember(url, url_id, kind, settled)
            absent.discard(url)
        return absent

    def _earlier(self) -> list[int]:
        """The crawls whose fine results ``--max-cache-age`` may reuse (read once)."""
        if self._earlier_crawls is None:
            self._earlier_crawls = [
                row[0]
                for row in self._conn.execute(
                    "SELECT id FROM crawl WHERE id <> ? ORDER BY id DESC LIMIT 20",
                    (self.crawl_id,),
                )
            ]
        return self._earlier_crawls

    def _reuse_earlier_result(self, url_id: int, url: str, now: float) -> None:
        """``--max-cache-age``: a fine result from an earlier crawl completes the row."""
        assert self._max_cache_age_s is not None
        earlier = self._earlier()
        if not earlier:
            return
        marks = ",".join("?" * len(earlier))
        row = self._conn.execute(
            f"SELECT r.status, r.content_type, r.bytes, r.elapsed_ms, r.checked_at "
            f"FROM url p JOIN result r ON r.url_id = p.id "
            f"WHERE p.crawl_id IN ({marks}) AND p.url = ? AND r.class = 'ok' "
            f"AND r.checked_at >= ? ORDER BY r.checked_at DESC LIMIT 1",
            (*earlier, url, now - self._max_cache_age_s),
        ).fetchone()
        if row is None:
            return
        self._conn.execute("UPDATE url SET state = 2 WHERE id = ?", (url_id,))
        self._conn.execute(
            completion.RESULT, (url_id, "ok", row[0], None, None, None, *row[1:], None)
        )

    def _forget_uncommitted(self) -> None:
        """After a rollback the caches may name rows and hosts that do not exist."""
        self._seen.clear()
        self._host_ids.clear()
        self._host_names.clear()
        self._url_count = None
        self._whole_through = None
        self._recorded.forget()

    def _remember(self, url: str, url_id: int, kind: int, settled: int) -> Known:
        known = url_cache.pack(url_id, kind, settled)
        self._seen.put(url, known)
        return known

    def _holds_whole_crawl(self) -> bool:
        """The cache held every URL of the crawl at ``_whole_through``: it has dropped none.

        Any lookup may drop entries (a hit moves to the young generation), so
        this asks the cache, not the last ``_remember``.
        """
        if self._seen.dropped:
            self._whole_through = None
        return self._whole_through is not None

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


_INSERT_NEW = "INSERT INTO url (id, crawl_id, url, host_id, kind, depth, hop)"

# Which of these URLs (?2, a JSON array) the crawl has (read by ``bulk.select``);
# CROSS JOIN: the array drives (else SQLite may walk the crawl's rows instead).
_PROBE = """
SELECT u.url, u.id, u.kind, u.settled
FROM json_each(?2) k CROSS JOIN url u ON u.crawl_id = ?1 AND u.url = k.value
"""


class _NewUrls:
    """A batch's new URL rows: ids given here, rows inserted by one statement (``bulk``).

    The writer holds the write lock for the whole transaction, so the next
    row's id is SQLite's own choice, ``max(id) + 1``: read once, counted on.
    """

    def __init__(self, conn: sqlite3.Connection, absent: set[str] | None) -> None:
        self._conn = conn
        # The batch's URLs not in the table when it began; None when the
        # writer's cache holds the whole crawl (every miss is new).
        self.absent = absent
        # New URLs of the batch the cache was not given (``Frontier._find``).
        self.recent: dict[str, int] = {}
        self.next_id: int | None = None
        self._rows: list[tuple[int, int, str, int | None, int, int, int]] = []

    def add(
        self, crawl_id: int, url: str, host_id: int | None, kind: int, depth: int, hop: int
    ) -> int:
        if self.next_id is None:
            (last,) = self._conn.execute("SELECT max(id) FROM url").fetchone()
            self.next_id = (last or 0) + 1
        url_id = self.next_id
        self.next_id += 1
        self._rows.append((url_id, crawl_id, url, host_id, kind, depth, hop))
        return url_id

    def flush(self) -> None:
        """Insert the rows given ids so far (before anything reads or writes ``url``)."""
        if self._rows:
            bulk.insert(self._conn, _INSERT_NEW, self._rows)
            self._rows.clear()
