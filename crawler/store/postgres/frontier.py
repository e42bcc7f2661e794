"""``PostgresFrontier``: the frontier contract on PostgreSQL, for many workers at once.

The engine may call only the ``FrontierStore`` methods, each one transaction,
with the meaning ``crawler.store.contract`` states (and tests/store/ tests on
both backends); the statements are PostgreSQL's own:

- ``lease`` claims due pending rows with ``SELECT … FOR UPDATE SKIP LOCKED``
  in one ``UPDATE``, so concurrent workers never wait for nor share a row; it
  walks the ``url_pending`` index in the contract's order (migration 0007);
- ``complete`` marks the whole batch (only rows this owner still holds),
  records children, links, anchors and results, in one transaction of a few
  array statements; open links are appended, and moved into their
  target-keyed table in batches in the background (``links``);
- ``finish_if_quiescent`` marks the crawl finished only if one statement's
  snapshot shows no pending and no leased row. A worker mid-lease holds
  leased rows until the commit that also inserts their children, so every
  snapshot shows outstanding work until there is none. It tells the
  workers waiting in ``wait_for_finish`` with a ``NOTIFY`` (``finish_watch``);
- ``reclaim`` returns expired leases and those of dead workers (stale
  heartbeat, or a pid gone on this host); their late completions are rejected.

All SQL runs on the store's own loop (``loop.BackgroundLoop``), whatever loop
the caller is on. Per-host politeness is shared by every worker: ``host_gate``
hands the engine a ``SharedHostGate`` over this store's host rows.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from crawler.models import (
    Cookie,
    Counts,
    CrawlRecord,
    Discovered,
    LeaseAsk,
    LeasedUrl,
    LeaseGrant,
    Outcome,
    PreviousPage,
    UrlKind,
)
from crawler.politeness import Gate, Limits
from crawler.store import liveness, worker_counts
from crawler.store.postgres import complete as completion
from crawler.store.postgres import cookies, crawls, finish_watch, gate, links, recrawl, schema
from crawler.store.postgres.discover import Recorder
from crawler.store.postgres.host_gate import SharedHostGate
from crawler.store.postgres.loop import BackgroundLoop
from crawler.store.postgres.vacuum import QueueVacuum

T = TypeVar("T")
HOST_NAME_CACHE_SIZE = 20_000


_LEASE = """
WITH picked AS (
    SELECT id FROM url
    WHERE crawl_id = $1 AND state = 0 AND next_attempt_at <= $2
    ORDER BY depth - (kind < 3)::integer, kind, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE url u SET state = 1, lease_owner = $4, lease_expires_at = $5
FROM picked WHERE u.id = picked.id
RETURNING u.id, u.url, u.host_id, u.kind, u.depth, u.hop, u.attempts
"""

# The lease must walk url_pending in its order (the contract's lease order:
# checks with the level above, then kind, then id) and stop after LIMIT rows.
# With stale statistics (no autoanalyze yet, or autovacuum off) the planner may
# instead read every pending row and sort them: 10x slower at 100k pending
# rows. Sorting is never the right plan for this statement.
LEASE_PLAN = "SET LOCAL enable_sort = off"

_TO_PENDING = "SET state = 0, lease_owner = NULL, lease_expires_at = NULL"


class PostgresFrontier:
    """Frontier, visited set and quiescence of one crawl on PostgreSQL (module docstring)."""

    def __init__(
        self,
        dsn: str,
        crawl_id: int,
        *,
        max_urls: int | None = None,
        max_cache_age_s: float | None = None,
        runner: BackgroundLoop | None = None,
        pool: Any = None,
    ) -> None:
        self.dsn = dsn
        self.crawl_id = crawl_id
        self._loop = runner if runner is not None else BackgroundLoop()
        self._pool = pool
        self._recorder = Recorder(crawl_id, max_urls=max_urls, max_cache_age_s=max_cache_age_s)
        self._host_names: dict[int, str] = {}
        self._vacuum = QueueVacuum(dsn)
        self._links = links.LinkMerger(pool)
        self._finish_watch = finish_watch.FinishWatch(dsn, crawl_id)
        self._closed = False
        self._previous_crawl: tuple[int | None] | None = None  # read once: (id,)

    @classmethod
    def connect(cls, dsn: str, crawl_id: int, **options: Any) -> PostgresFrontier:
        """Open a pool on ``dsn`` (migrating the schema) for crawl ``crawl_id``."""
        runner = BackgroundLoop()
        try:
            pool = runner.run(schema.create_pool(dsn))
        except BaseException:
            runner.close()
            raise
        return cls(dsn, crawl_id, runner=runner, pool=pool, **options)

    async def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return await self._loop.call(coro)

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the store's loop from synchronous code (tests, the runner)."""
        return self._loop.run(coro)

    async def _maintained(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` (on the store's loop), then see whether the queue tables need a vacuum."""
        try:
            return await coro
        finally:
            self._vacuum.poll()
            self._links.poll()

    async def _tx(self, body: Any) -> Any:
        return await schema.in_transaction(self._pool, body, on_retry=self._recorder.forget)

    # -- the contract -------------------------------------------------------

    async def enqueue(self, seeds: Sequence[Discovered], now: float) -> int:
        """Add seeds at depth 0; return how many were new."""

        async def body(conn: Any) -> int:
            return await completion.enqueue(conn, self._recorder, seeds, now)

        return int(await self._call(self._tx(body)))

    async def lease(self, owner: str, limit: int, ttl_s: float, now: float) -> list[LeasedUrl]:
        """Lease up to ``limit`` due pending rows in the contract's lease order."""
        return await self._call(self._lease(owner, limit, ttl_s, now))

    async def lease_more(self, owner: str, ask: LeaseAsk, now: float) -> LeaseGrant:
        """The lease, the cookies stored meanwhile and a re-crawl's pages: one trip to our loop."""
        return await self._call(self._lease_more(owner, ask, now))

    async def _lease_more(self, owner: str, ask: LeaseAsk, now: float) -> LeaseGrant:
        found: list[Cookie] | None = None

        async def read_cookies(conn: Any, leased: list[Any]) -> None:
            nonlocal found
            if leased and ask.cookies_since is not None:
                found = await cookies.get_cookies(conn, self.crawl_id, ask.cookies_since)

        rows = await self._lease(owner, ask.limit, ask.ttl_s, now, then=read_cookies)
        pages = [row.url for row in rows if row.kind == UrlKind.PAGE]
        previous = await self._previous_pages(pages, with_links=False) if pages else {}
        return LeaseGrant(rows=rows, cookies=found, previous=previous)

    async def _lease(
        self,
        owner: str,
        limit: int,
        ttl_s: float,
        now: float,
        then: Callable[[Any, list[Any]], Coroutine[Any, Any, None]] | None = None,
    ) -> list[LeasedUrl]:
        async def body(conn: Any) -> list[Any]:
            await conn.execute(LEASE_PLAN)
            leased = list(await conn.fetch(_LEASE, self.crawl_id, now, limit, owner, now + ttl_s))
            if then is not None:  # on the same connection, in the same transaction
                await then(conn, leased)
            return leased

        rows = await self._tx(body)
        await self._learn_hosts({r[2] for r in rows if r[2] is not None})
        return [
            LeasedUrl(
                id=int(r[0]),
                url=r[1],
                host=self._host_names.get(r[2], "") if r[2] is not None else "",
                kind=UrlKind(r[3]),
                depth=int(r[4]),
                hop=int(r[5]),
                attempts=int(r[6]),
            )
            for r in sorted(rows, key=lambda r: (r[4] - (r[3] < UrlKind.PAGE), r[3], r[0]))
        ]

    async def renew(self, owner: str, ttl_s: float, now: float) -> int:
        """Extend every lease (and host slot) this owner holds; return how many leases."""

        async def body(conn: Any) -> int:
            status = await conn.execute(
                "UPDATE url SET lease_expires_at = $1 "
                "WHERE crawl_id = $2 AND state = 1 AND lease_owner = $3",
                now + ttl_s,
                self.crawl_id,
                owner,
            )
            await conn.execute("UPDATE worker SET heartbeat_at = $1 WHERE token = $2", now, owner)
            await gate.renew_slots(conn, owner, now + ttl_s)
            return _rowcount(status)

        return int(await self._call(self._maintained(self._tx(body))))

    async def complete(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """Commit many fetched rows in one transaction; False marks a rejected stale one."""
        return await self._call(self._complete(owner, outcomes, now))

    async def complete_and_lease(
        self, owner: str, outcomes: Sequence[Outcome], now: float, ask: LeaseAsk
    ) -> tuple[list[bool], LeaseGrant]:
        """The group commit, then the next lease, in one trip to the store's loop."""

        async def both() -> tuple[list[bool], LeaseGrant]:
            accepted = await self._complete(owner, outcomes, now)
            return accepted, await self._lease_more(owner, ask, now)

        return await self._call(both())

    async def _complete(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        async def body(conn: Any) -> list[bool]:
            batch = outcomes
            if any(o.recorded is not None for o in batch):
                await self._previous_crawl_of(conn)  # its links all in link_open
                batch = await recrawl.expanded(conn, batch)
            accepted = await completion.complete(
                conn, self._recorder, owner, batch, now, self._links
            )
            urls, pages = worker_counts.tally(outcomes, accepted)
            if urls:
                await conn.execute(
                    "UPDATE worker SET urls_done = urls_done + $1, pages_done = pages_done + $2 "
                    "WHERE token = $3",
                    urls,
                    pages,
                    owner,
                )
            return accepted

        return await self._maintained(self._tx(body))

    async def release(self, owner: str) -> int:
        """Give back every lease and host slot this owner holds (graceful stop)."""

        async def body(conn: Any) -> int:
            status = await conn.execute(
                f"UPDATE url {_TO_PENDING} WHERE crawl_id = $1 AND state = 1 AND lease_owner = $2",
                self.crawl_id,
                owner,
            )
            await conn.execute("DELETE FROM worker WHERE token = $1", owner)
            await gate.drop_slots(conn, [owner])
            return _rowcount(status)

        released = int(await self._call(self._tx(body)))
        liveness.LIVE_TOKENS.discard(owner)
        return released

    async def reclaim(self, now: float, stale_after_s: float) -> int:
        """Return expired leases, and leases of dead workers, to pending."""

        async def body(conn: Any) -> int:
            workers = await conn.fetch(
                "SELECT token, pid, hostname, heartbeat_at FROM worker WHERE crawl_id = $1",
                self.crawl_id,
            )
            dead = liveness.dead_workers(workers, now, stale_after_s)
            status = await conn.execute(
                f"UPDATE url {_TO_PENDING} "
                "WHERE crawl_id = $1 AND state = 1 AND lease_expires_at < $2",
                self.crawl_id,
                now,
            )
            reclaimed = _rowcount(status)
            if dead:
                status = await conn.execute(
                    f"UPDATE url {_TO_PENDING} "
                    "WHERE crawl_id = $1 AND state = 1 AND lease_owner = ANY($2::text[])",
                    self.crawl_id,
                    dead,
                )
                reclaimed += _rowcount(status)
                await conn.execute("DELETE FROM worker WHERE token = ANY($1::text[])", dead)
                await gate.drop_slots(conn, dead)
            await gate.expire_slots(conn, now)
            return reclaimed

        return int(await self._call(self._tx(body)))

    async def finish_if_quiescent(self, now: float) -> bool:
        """Mark the crawl finished if, in this statement's snapshot, no row is pending or leased."""

        async def body(conn: Any) -> bool:
            outstanding = await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM url WHERE crawl_id = $1 AND state = 0) "
                "OR EXISTS (SELECT 1 FROM url WHERE crawl_id = $1 AND state = 1)",
                self.crawl_id,
            )
            if outstanding:
                return False
            await conn.execute(
                "UPDATE crawl SET state = 'finished', finished_at = COALESCE(finished_at, $1) "
                "WHERE id = $2",
                now,
                self.crawl_id,
            )
            await conn.execute(finish_watch.NOTIFY, str(self.crawl_id))  # sent at commit
            return True

        return bool(await self._call(self._tx(body)))

    async def wait_for_finish(self, timeout_s: float) -> bool:
        """Woken by the finishing worker's NOTIFY (``finish_watch``), not by a poll."""
        return await self._call(self._finish_watch.wait(timeout_s))

    # -- registration and observation ----------------------------------------

    async def register_worker(self, owner: str, now: float) -> None:
        """Record this process so others can tell its leases from a dead one's."""

        async def body(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO worker (token, crawl_id, pid, hostname, started_at, heartbeat_at) "
                "VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (token) DO UPDATE SET "
                "crawl_id = excluded.crawl_id, pid = excluded.pid, "
                "hostname = excluded.hostname, started_at = excluded.started_at, "
                "heartbeat_at = excluded.heartbeat_at",
                owner,
                self.crawl_id,
                os.getpid(),
                socket.gethostname(),
                now,
            )

        await self._call(self._tx(body))
        liveness.LIVE_TOKENS.add(owner)

    async def next_wake_at(self) -> float | None:
        """When something may next become leasable: a due retry or a lease expiry."""
        row = await self._call(
            self._fetchrow(
                "SELECT (SELECT min(next_attempt_at) FROM url WHERE crawl_id = $1 AND state = 0), "
                "(SELECT min(lease_expires_at) FROM url WHERE crawl_id = $1 AND state = 1)",
                self.crawl_id,
            )
        )
        times = [float(t) for t in row if t is not None]
        return min(times) if times else None

    async def counts(self) -> Counts:
        """Frontier counters; one scan of the crawl's rows, so call it seldom."""
        return await self._call(self._with_conn(lambda c: read_counts(c, self.crawl_id)))

    async def is_seeded(self) -> bool:
        return bool(await self._call(self._tx(lambda c: crawls.is_seeded(c, self.crawl_id))))

    async def mark_seeded(self, now: float) -> None:
        await self._call(self._tx(lambda c: crawls.mark_seeded(c, self.crawl_id, now)))

    async def add_elapsed(self, seconds: float) -> None:
        await self._call(self._tx(lambda c: crawls.add_elapsed(c, self.crawl_id, seconds)))

    async def get_robots(self, host: str) -> tuple[int | None, str] | None:
        """(status, body) of the stored robots.txt for ``host``, or None if never fetched."""
        row = await self._call(
            self._fetchrow(
                "SELECT r.status, r.body FROM robots r JOIN host h ON h.id = r.host_id "
                "WHERE r.crawl_id = $1 AND h.name = $2",
                self.crawl_id,
                host,
            )
        )
        return None if row is None else (row[0], row[1])

    async def put_robots(self, host: str, status: int | None, body: str, now: float) -> None:
        """Store ``host``'s robots.txt for this crawl."""

        async def write(conn: Any) -> None:
            await conn.execute("INSERT INTO host (name) VALUES ($1) ON CONFLICT DO NOTHING", host)
            await conn.execute(
                "INSERT INTO robots (crawl_id, host_id, status, body, fetched_at) "
                "SELECT $1, id, $2, $3, $4 FROM host WHERE name = $5 "
                "ON CONFLICT (crawl_id, host_id) DO UPDATE SET status = excluded.status, "
                "body = excluded.body, fetched_at = excluded.fetched_at",
                self.crawl_id,
                status,
                body,
                now,
                host,
            )

        await self._call(self._tx(write))

    async def put_cookies(self, changed: Sequence[Cookie], now: float) -> None:
        """Store cookies set or deleted since the last call (``crawler.net.cookies``)."""
        await self._call(self._tx(lambda c: cookies.put_cookies(c, self.crawl_id, changed, now)))

    async def get_cookies(self, since: float | None = None) -> list[Cookie]:
        """The crawl's cookies stored at or after ``since`` (all when None)."""
        return await self._call(self._tx(lambda c: cookies.get_cookies(c, self.crawl_id, since)))

    async def previous_pages(
        self, urls: Sequence[str], *, with_links: bool = True
    ) -> dict[str, PreviousPage]:
        """For a re-crawl: what the crawl it starts from stored for these pages."""
        return await self._call(self._previous_pages(urls, with_links=with_links))

    async def _previous_pages(
        self, urls: Sequence[str], *, with_links: bool = True
    ) -> dict[str, PreviousPage]:
        if not urls or (self._previous_crawl is not None and self._previous_crawl[0] is None):
            return {}  # not a re-crawl: no connection taken

        async def read(conn: Any) -> dict[str, PreviousPage]:
            previous = await self._previous_crawl_of(conn)
            if previous is None or not urls:
                return {}
            return await recrawl.previous_pages(conn, previous, urls, with_links=with_links)

        return await self._with_conn(read)

    async def _previous_crawl_of(self, conn: Any) -> int | None:
        """The crawl this one re-crawls (read once), None for a full crawl."""
        if self._previous_crawl is None:
            previous_id = await recrawl.previous_crawl_id(conn, self.crawl_id)
            if previous_id is not None:
                # The previous crawl's links are read by source from
                # link_open (link_fresh has no index): move the rest there.
                await links.merge(conn, wait=True)
            self._previous_crawl = (previous_id,)
        return self._previous_crawl[0]

    async def head_unreliable_hosts(self) -> list[str]:
        """Hosts where a GET overruled HEAD in this crawl."""
        return await self._call(self._tx(lambda c: cookies.head_unreliable_hosts(c, self.crawl_id)))

    # -- shared per-host politeness (host_gate.SharedHostGate) -----------------

    def host_gate(self, owner: str, limits: Limits, ttl_s: float, wake: Callable[[], None]) -> Gate:
        """A gate whose slots are rows shared by every worker of this crawl."""
        return SharedHostGate(self, owner, limits, ttl_s=ttl_s, wake=wake)

    def stopping(self) -> None:
        """Nothing is held back here: PostgreSQL's WAL does not wait for our readers."""

    async def acquire_hosts(
        self, owner: str, wants: dict[str, gate.Want], ttl_s: float, now: float
    ) -> dict[str, gate.Grant]:
        """Claim request slots on many hosts at once; see ``gate.acquire``."""
        return await self._call(self._tx(lambda c: gate.acquire(c, owner, wants, ttl_s, now)))

    async def release_hosts(self, owner: str, counts: dict[str, int], now: float) -> None:
        """Give back request slots taken with ``acquire_hosts``."""
        await self._call(self._tx(lambda c: gate.release(c, owner, counts, now)))

    async def pause_host(self, host: str, until: float) -> None:
        """No request to ``host`` from any worker before ``until`` (unix time)."""
        await self._call(self._tx(lambda c: gate.pause(c, host, until)))

    # -- crawl record, lifecycle --------------------------------------------------

    async def record(self) -> CrawlRecord:
        """This crawl's row."""
        return await self._call(self._tx(lambda c: crawls.get(c, self.crawl_id)))

    def close(self) -> None:
        """Close the pool and stop the store's loop."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._vacuum.close())
            self._loop.run(self._links.close())
            self._loop.run(self._finish_watch.close())
            if self._pool is not None:
                self._loop.run(self._pool.close())
        finally:
            self._loop.close()

    # -- internals ------------------------------------------------------------

    async def _with_conn(self, body: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        async with self._pool.acquire() as conn:
            return await body(conn)

    async def _fetchrow(self, sql: str, *args: Any) -> Any:
        async with self._pool.acquire() as conn:
            return await conn.fetchrow(sql, *args)

    async def _learn_hosts(self, host_ids: set[int]) -> None:
        missing = [h for h in host_ids if h not in self._host_names]
        if not missing:
            return
        if len(self._host_names) + len(missing) > HOST_NAME_CACHE_SIZE:
            self._host_names.clear()
        async with self._pool.acquire() as conn:
            for host_id, name in await conn.fetch(
                "SELECT id, name FROM host WHERE id = ANY($1::bigint[])", missing
            ):
                self._host_names[int(host_id)] = name


async def read_counts(conn: Any, crawl_id: int) -> Counts:
    """A crawl's frontier counters on ``conn`` (the store's, or a reader such as the service's)."""
    row = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE u.state = 0), count(*) FILTER (WHERE u.state = 1), "
        "count(*), count(*) FILTER (WHERE u.kind = 3 AND u.state = 2), "
        "count(*) FILTER (WHERE r.class = 'broken') "
        "FROM url u LEFT JOIN result r ON r.url_id = u.id WHERE u.crawl_id = $1",
        crawl_id,
    )
    pending, leased, total, pages, broken = (int(v) for v in row)
    return Counts(
        pending=pending, leased=leased, done=total - pending - leased, pages=pages, broken=broken
    )


def _rowcount(status: str) -> int:
    """The row count of a command tag such as ``UPDATE 3``."""
    return int(status.rsplit(" ", 1)[1])
