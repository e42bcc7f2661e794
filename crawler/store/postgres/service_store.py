"""The service's storage on PostgreSQL: the ``service_crawl`` index and its crawls' rows.

``PostgresServiceStore`` is the ``crawler.store.service.ServiceStore`` of
``crawler serve --db postgresql://…``. Its crawls are rows of the normal crawl
tables: a ``service_crawl`` id is drawn from the crawl table's sequence and
the crawl row, created when the crawl first starts, takes the same id
(migrations/postgresql/0008_service.sql).

``PostgresCrawlQueue`` is the other side, for ``crawler work --service``
processes: which of the service's crawls they may join (running, seeded, not
finished), fewest live workers first, and whether the one they work on is
still running or was paused, cancelled or deleted from the API.

Both run on the caller's event loop with a small pool of their own.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from crawler.config import DEFAULT_LEASE_TTL_S
from crawler.errors import UsageError
from crawler.report.diff import CrawlDiff
from crawler.report.model import ReportData
from crawler.store import crawl_stats as stats
from crawler.store import liveness
from crawler.store.crawl_stats import CrawlStats
from crawler.store.postgres import diff as pg_diff
from crawler.store.postgres import links, schema
from crawler.store.postgres import report as pg_report
from crawler.store.postgres.frontier import read_counts
from crawler.store.postgres.vacuum import _VACUUM_LOCK as VACUUM_LOCK
from crawler.store.service import CrawlTarget, Definition, Delivery, Entry, Snapshot, WorkerRow
from crawler.store.service_rows import (
    DELIVERY_COLUMNS,
    DELIVERY_INSERT_COLUMNS,
    delivery_from_row,
    delivery_insert_values,
    delivery_update_values,
    entry_from_row,
)

POOL_SIZE = 4
DELETE_BATCH = 2000  # URLs (with their results, links, anchors) per delete transaction
_COLUMNS = (
    "id, state, seeds::text, settings::text, created_at, queued_at, started_at, finished_at, "
    "error, definition_id"
)
_DEFINITION_COLUMNS = "id, spec::text, created_at, updated_at, next_run_at"
_HOST_TOTALS = """
SELECT host,
       count(*),
       count(*) FILTER (WHERE status >= 500
                          OR (error_kind IS NOT NULL AND error_kind <> 'http_status'))
FROM url_result
WHERE crawl_id = $1 AND host IS NOT NULL AND class IN ('ok', 'redirected', 'broken')
GROUP BY host
"""
# A crawl's rows, children first. Hosts are shared by every crawl and stay.
_DELETE_CRAWL = (
    "DELETE FROM link_open WHERE target_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM link_open WHERE source_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM link_fresh WHERE source_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM link_settled WHERE source_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM link_settled WHERE target_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM link_settled_page WHERE source_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM anchor WHERE url_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM render_issue WHERE url_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM page_validator WHERE url_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "UPDATE result SET redirect_to_id = NULL "
    "WHERE redirect_to_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM result WHERE url_id IN (SELECT id FROM url WHERE crawl_id = $1)",
    "DELETE FROM host_slot WHERE owner IN (SELECT token FROM worker WHERE crawl_id = $1)",
    "DELETE FROM worker WHERE crawl_id = $1",
    "DELETE FROM robots WHERE crawl_id = $1",
    "DELETE FROM cookie WHERE crawl_id = $1",
    "DELETE FROM url WHERE crawl_id = $1",
    "DELETE FROM crawl_count WHERE crawl_id = $1",
    "DELETE FROM crawl WHERE id = $1",
)
# The batched delete (``PostgresServiceStore.delete``): first the redirect
# hops of a batch of results are cut (a result may point at a URL of a later
# batch), then each batch of URLs goes with its rows, each in a transaction of
# its own, so locks are held briefly and a running crawl is never held up.
_NEXT_URLS = "SELECT id FROM url WHERE crawl_id = $1 AND id > $2 ORDER BY id LIMIT $3"
_CUT_REDIRECTS = (
    "UPDATE result SET redirect_to_id = NULL "
    "WHERE url_id = ANY($1::bigint[]) AND redirect_to_id IS NOT NULL"
)
_DELETE_URL_BATCH = (
    "DELETE FROM link_open WHERE target_id = ANY($1::bigint[])",
    "DELETE FROM link_open WHERE source_id = ANY($1::bigint[])",
    "DELETE FROM link_settled WHERE source_id = ANY($1::bigint[])",
    "DELETE FROM link_settled WHERE target_id = ANY($1::bigint[])",
    "DELETE FROM link_settled_page WHERE source_id = ANY($1::bigint[])",
    "DELETE FROM anchor WHERE url_id = ANY($1::bigint[])",
    "DELETE FROM render_issue WHERE url_id = ANY($1::bigint[])",
    "DELETE FROM page_validator WHERE url_id = ANY($1::bigint[])",
    "DELETE FROM result WHERE url_id = ANY($1::bigint[])",
    "DELETE FROM url WHERE id = ANY($1::bigint[])",
)
# Tables a deleted crawl leaves dead rows in: vacuumed after a delete when the
# server's autovacuum is off, so the next runs' rows reuse the space.
_RECLAIMED_TABLES = (
    "url",
    "result",
    "link_open",
    "link_fresh",
    "link_settled",
    "link_settled_page",
    "anchor",
    "cookie",
    "robots",
)
# Running crawls a worker may join, the least staffed first, then the oldest.
_JOINABLE = """
SELECT s.id
FROM service_crawl s JOIN crawl c ON c.id = s.id
WHERE s.state = 'running' AND s.seeded_at IS NOT NULL AND c.state = 'running'
ORDER BY (SELECT count(*) FROM worker w WHERE w.crawl_id = s.id), s.queued_at, s.id
"""


class PostgresServiceStore:
    """The service's index and crawls in one PostgreSQL database (module docstring)."""

    def __init__(self, dsn: str, pool: Any) -> None:
        self.dsn = dsn
        self._pool = pool

    @classmethod
    async def open(cls, dsn: str) -> PostgresServiceStore:
        return cls(dsn, await schema.create_pool(dsn, max_size=POOL_SIZE))

    def describe(self) -> str:
        return schema.redact(self.dsn)

    async def close(self) -> None:
        await self._pool.close()

    async def _tx(self, body: Any) -> Any:
        return await schema.in_transaction(self._pool, body)

    # -- the index ---------------------------------------------------------------

    async def entries(self) -> list[Entry]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(f"SELECT {_COLUMNS} FROM service_crawl ORDER BY id")
        return [entry_from_row(row) for row in rows]

    async def insert(
        self,
        seeds: list[str],
        settings: dict[str, Any],
        now: float,
        definition_id: int | None = None,
    ) -> Entry:
        async def body(conn: Any) -> int:
            return int(
                await conn.fetchval(
                    "INSERT INTO service_crawl "
                    "(state, seeds, settings, created_at, queued_at, definition_id) "
                    "VALUES ('queued', $1::jsonb, $2::jsonb, $3, $3, $4) RETURNING id",
                    json.dumps(seeds),
                    json.dumps(settings, sort_keys=True),
                    now,
                    definition_id,
                )
            )

        crawl_id = await self._tx(body)
        return Entry(crawl_id, "queued", seeds, settings, now, now, definition_id=definition_id)

    # -- definitions and deliveries ------------------------------------------------------

    async def definitions(self) -> list[Definition]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                f"SELECT {_DEFINITION_COLUMNS} FROM service_definition ORDER BY id"
            )
        return [
            Definition(
                int(r[0]),
                json.loads(r[1]),
                float(r[2]),
                float(r[3]),
                None if r[4] is None else float(r[4]),
            )
            for r in rows
        ]

    async def insert_definition(
        self, spec: dict[str, Any], now: float, next_run_at: float | None
    ) -> Definition:
        async def body(conn: Any) -> int:
            return int(
                await conn.fetchval(
                    "INSERT INTO service_definition (spec, created_at, updated_at, next_run_at) "
                    "VALUES ($1::jsonb, $2, $2, $3) RETURNING id",
                    json.dumps(spec, sort_keys=True),
                    now,
                    next_run_at,
                )
            )

        return Definition(await self._tx(body), spec, now, now, next_run_at)

    async def update_definition(self, definition: Definition) -> None:
        values = (
            json.dumps(definition.spec, sort_keys=True),
            definition.updated_at,
            definition.next_run_at,
            definition.id,
        )

        async def body(conn: Any) -> None:
            await conn.execute(
                "UPDATE service_definition SET spec = $1::jsonb, updated_at = $2, "
                "next_run_at = $3 WHERE id = $4",
                *values,
            )

        await self._tx(body)

    async def delete_definition(self, definition_id: int) -> None:
        async def body(conn: Any) -> None:
            await conn.execute(
                "DELETE FROM service_delivery WHERE definition_id = $1", definition_id
            )
            await conn.execute("DELETE FROM service_definition WHERE id = $1", definition_id)

        await self._tx(body)

    async def deliveries(self) -> list[Delivery]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(f"SELECT {DELIVERY_COLUMNS} FROM service_delivery ORDER BY id")
        return [delivery_from_row(r) for r in rows]

    async def insert_delivery(self, delivery: Delivery) -> Delivery:
        async def body(conn: Any) -> int:
            return await _insert_delivery(conn, delivery)

        return dataclasses.replace(delivery, id=await self._tx(body))

    async def update_delivery(self, delivery: Delivery) -> None:
        values = delivery_update_values(delivery)

        async def body(conn: Any) -> None:
            await conn.execute(
                "UPDATE service_delivery SET state = $1, attempts = $2, next_attempt_at = $3, "
                "last_status = $4, last_error = $5, finished_at = $6 WHERE id = $7",
                *values,
            )

        await self._tx(body)

    async def update(self, entry: Entry) -> None:
        async def body(conn: Any) -> None:
            await _update_entry(conn, entry)

        await self._tx(body)

    async def finish(self, entry: Entry, delivery: Delivery | None) -> Delivery | None:
        """The entry's new state and the run's delivery, in one transaction."""

        async def body(conn: Any) -> int | None:
            await _update_entry(conn, entry)
            return None if delivery is None else await _insert_delivery(conn, delivery)

        delivery_id = await self._tx(body)
        if delivery is None or delivery_id is None:
            return None
        return dataclasses.replace(delivery, id=delivery_id)

    async def mark_seeded(self, crawl_id: int, now: float) -> None:
        """Workers may join: the frontier holds the seeds and the sitemap pages."""

        async def body(conn: Any) -> None:
            await conn.execute(
                "UPDATE service_crawl SET seeded_at = COALESCE(seeded_at, $1) WHERE id = $2",
                now,
                crawl_id,
            )

        await self._tx(body)

    async def delete(self, crawl_id: int) -> None:
        """The crawl's rows in batches of ``DELETE_BATCH`` URLs, each batch a short
        transaction of its own (no table lock, no long one a running crawl waits
        on); then the crawl's remaining rows and its entry, in one. Open links
        not merged yet are merged first, so the batches find them by key; the
        runs of open links the delete emptied are dropped after it."""
        async with self._pool.acquire() as conn:
            await links.merge(conn, wait=True)
        await self._each_url_batch(crawl_id, (_CUT_REDIRECTS,))
        await self._each_url_batch(crawl_id, _DELETE_URL_BATCH, moving=False)

        async def body(conn: Any) -> None:
            await _delete_crawl_rows(conn, crawl_id)
            await conn.execute("DELETE FROM service_delivery WHERE crawl_id = $1", crawl_id)
            await conn.execute("DELETE FROM service_crawl WHERE id = $1", crawl_id)

        await self._tx(body)
        async with self._pool.acquire() as conn:
            await links.drop_empty_runs(conn)
        await self._reclaim()

    async def _reclaim(self) -> None:
        """VACUUM the tables a delete left dead rows in, when autovacuum will not:
        plain VACUUM takes no lock that reads or writes wait for, and one vacuum
        runs at a time on the database (the frontier's own vacuum takes the same
        advisory lock, ``vacuum``)."""
        async with self._pool.acquire() as conn:
            if await conn.fetchval("SHOW autovacuum") == "on":
                return
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", VACUUM_LOCK):
                return
            try:
                for table in _RECLAIMED_TABLES:
                    await conn.execute(f"VACUUM {table}")
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", VACUUM_LOCK)

    async def _each_url_batch(
        self, crawl_id: int, statements: tuple[str, ...], *, moving: bool = True
    ) -> None:
        """Run ``statements`` on every batch of the crawl's URL ids, a transaction each.
        ``moving``: the rows stay, so the next batch starts after the last id."""
        after = 0
        while True:

            async def body(conn: Any, start: int = after) -> int:
                rows = await conn.fetch(_NEXT_URLS, crawl_id, start, DELETE_BATCH)
                ids = [int(row[0]) for row in rows]
                for statement in statements if ids else ():
                    await conn.execute(statement, ids)
                return ids[-1] if ids else 0

            last = await self._tx(body)
            if not last:
                return
            if moving:
                after = last

    async def ping(self) -> None:
        async with self._pool.acquire() as conn:
            await conn.fetchval("SELECT count(*) FROM service_crawl WHERE state = 'running'")

    # -- one crawl's rows --------------------------------------------------------------

    def target(self, crawl_id: int) -> CrawlTarget:
        return CrawlTarget(self.dsn, crawl_id)

    async def prepare(self, crawl_id: int) -> int | None:
        """Resume a crawl with a frontier (counting dead workers' leases); else clear
        what a kill left and start afresh (None)."""

        async def body(conn: Any) -> int | None:
            recorded = await conn.fetchval("SELECT state FROM crawl WHERE id = $1", crawl_id)
            if recorded is None:
                return None
            if not await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM url WHERE crawl_id = $1)", crawl_id
            ):
                await _delete_crawl_rows(conn, crawl_id)  # killed before its seeds were enqueued
                return None
            return await _dead_leases(conn, crawl_id)

        result = await self._tx(body)
        return None if result is None else int(result)

    async def snapshot(self, crawl_id: int) -> Snapshot | None:
        async with self._pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
            row = await conn.fetchrow("SELECT state, elapsed_s FROM crawl WHERE id = $1", crawl_id)
            if row is None:
                return None
            counts = await read_counts(conn, crawl_id)
            # The report's pages and broken (as reads.snapshot on SQLite): one definition.
            summary = await pg_report.summary(conn, crawl_id)
        counts = dataclasses.replace(counts, pages=summary.pages, broken=summary.broken)
        return Snapshot(counts, float(row[1]), row[0] == "finished")

    async def host_totals(self, crawl_id: int) -> dict[str, tuple[int, int]]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(_HOST_TOTALS, crawl_id)
        return {host: (int(total), int(errors)) for host, total, errors in rows}

    async def crawl_stats(self, crawl_id: int) -> CrawlStats | None:
        async with self._pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
            if await conn.fetchval("SELECT 1 FROM crawl WHERE id = $1", crawl_id) is None:
                return None
            hosts = await conn.fetch(stats.HOST_STATS_SQL.format(p="$1"), crawl_id)
            excluded = await conn.fetch(stats.EXCLUSIONS_SQL.format(p="$1"), crawl_id)
            refused = await conn.fetch(stats.REFUSED_SQL.format(p="$1"), crawl_id)
        return CrawlStats(
            stats.host_stats(hosts),
            stats.exclusions(excluded),
            [(r[0], r[1]) for r in refused],
        )

    async def workers(self, crawl_id: int) -> list[WorkerRow]:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT token, pid, hostname, started_at, heartbeat_at, urls_done, pages_done "
                "FROM worker WHERE crawl_id = $1 ORDER BY started_at, token",
                crawl_id,
            )
        return [
            WorkerRow(r[0], int(r[1]), r[2], float(r[3]), float(r[4]), int(r[5]), int(r[6]))
            for r in rows
        ]

    async def load_report(self, crawl_id: int, fmt: str) -> ReportData | None:
        async with self._pool.acquire() as conn:
            if await conn.fetchval("SELECT id FROM crawl WHERE id = $1", crawl_id) is None:
                return None
            try:
                return await pg_report.load(conn, crawl_id, fmt)
            except UsageError:  # deleted meanwhile
                return None

    async def load_diff(self, from_crawl: int, to_crawl: int) -> CrawlDiff | None:
        """The two crawls compared in one snapshot; None while either has no crawl row."""
        async with self._pool.acquire() as conn:
            try:
                return await pg_diff.load(conn, from_crawl, to_crawl)
            except UsageError:  # not recorded yet, or deleted meanwhile
                return None


class PostgresCrawlQueue:
    """The service's crawls as ``crawler work --service`` sees them (module docstring)."""

    def __init__(self, dsn: str, pool: Any) -> None:
        self.dsn = dsn
        self._pool = pool

    @classmethod
    async def open(cls, dsn: str) -> PostgresCrawlQueue:
        return cls(dsn, await schema.create_pool(dsn, max_size=1))

    async def joinable(self) -> list[int]:
        """Ids of the crawls to join, best first."""
        async with self._pool.acquire() as conn:
            return [int(r[0]) for r in await conn.fetch(_JOINABLE)]

    async def state(self, crawl_id: int) -> str | None:
        """The state the service records for the crawl; None once it is deleted."""
        async with self._pool.acquire() as conn:
            state = await conn.fetchval("SELECT state FROM service_crawl WHERE id = $1", crawl_id)
        return None if state is None else str(state)

    async def close(self) -> None:
        await self._pool.close()


async def _dead_leases(conn: Any, crawl_id: int) -> int:
    """Leases held by owners with no worker row, or whose worker is dead (``liveness``)."""
    held = await conn.fetch(
        "SELECT lease_owner, count(*) FROM url WHERE crawl_id = $1 AND state = 1 "
        "GROUP BY lease_owner",
        crawl_id,
    )
    workers = await conn.fetch(
        "SELECT token, pid, hostname, heartbeat_at FROM worker WHERE crawl_id = $1", crawl_id
    )
    ttl = await conn.fetchval(
        "SELECT COALESCE((config->>'lease_ttl_s')::double precision, $2) FROM crawl WHERE id = $1",
        crawl_id,
        DEFAULT_LEASE_TTL_S,
    )
    live = {row[0] for row in workers} - set(
        liveness.dead_workers(workers, time.time(), 2 * float(ttl))
    )
    return sum(int(count) for owner, count in held if owner not in live)


async def _update_entry(conn: Any, entry: Entry) -> None:
    await conn.execute(
        "UPDATE service_crawl SET state = $1, queued_at = $2, started_at = $3, "
        "finished_at = $4, error = $5 WHERE id = $6",
        entry.state,
        entry.queued_at,
        entry.started_at,
        entry.finished_at,
        entry.error,
        entry.id,
    )


async def _insert_delivery(conn: Any, delivery: Delivery) -> int:
    return int(
        await conn.fetchval(
            f"INSERT INTO service_delivery ({DELIVERY_INSERT_COLUMNS}) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
            *delivery_insert_values(delivery),
        )
    )


async def _delete_crawl_rows(conn: Any, crawl_id: int) -> None:
    for statement in _DELETE_CRAWL:
        await conn.execute(statement, crawl_id)
