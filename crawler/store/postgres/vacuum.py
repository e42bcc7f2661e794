"""Vacuuming the queue tables ourselves when the server's autovacuum is off.

Every lease and completion rewrites ``url`` rows, and every request rewrites
a ``host_gate`` row: dead tuples pile up at the head of the lease's index and
each lease walks past them (claim times measured rising from 2-3 ms to 180 ms
at 24k dead rows). Migration 0001 tunes autovacuum for ``url``, but table
options do nothing when the server runs with ``autovacuum = off``, which is
how the issue's 100,000-page runs reached 490,000 dead tuples with no vacuum
of ``url`` at all (this machine's PostgreSQL has it off in
``conf.d/90-ci.conf``).

So, when autovacuum is off, each store checks the tables' dead tuples every
``CHECK_EVERY_S`` (from ``renew`` and ``complete``, in the background) and
vacuums a table past the thresholds its migration gives autovacuum. One
worker at a time does it (an advisory lock), on a connection of its own, so
leases and completions never wait for it. With autovacuum on this does
nothing: the server's own workers and the tables' options do the job.

It analyzes the tables a report reads too (``ANALYZED``), as autovacuum's
analyze would: with no statistics for ``result`` the planner took the few
broken rows of its partial index for half the table, and read every open
link of the crawl to join them (``bench/RESULTS-postgres.md``, session 10).
A report analyzes them first when they hold data but no statistics at all
(``analyze_unanalyzed``): a database written with autovacuum off by a version
that did not analyze them, or whose crawl never ran long enough to.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
import structlog

log = structlog.get_logger(__name__)

CHECK_EVERY_S = 2.0
# Not more often than this per table, whoever vacuumed it last (autovacuum
# visits a database at most once per naptime, a minute by default); statistics
# are refreshed at most once per ANALYZE_EVERY_S. A vacuum of ``url`` at 20,000
# rows every 4 s cost the 10,000-page benchmark a fifth of its pages/s.
MIN_INTERVAL_S = 10.0
ANALYZE_EVERY_S = 60.0
_VACUUM_LOCK = 0x43524C56  # "CRLV": one vacuum at a time on the database
# table -> (threshold, scale factor): vacuum past threshold + scale x live
# tuples, as the autovacuum options of migrations 0001, 0004, 0006 and 0017 say.
THRESHOLDS: dict[str, tuple[int, float]] = {
    "url": (2000, 0.02),
    "host_gate": (500, 0.0),
    "host_slot": (500, 0.0),
    "crawl_count": (1000, 0.0),
    "link_fresh": (10000, 0.0),  # emptied by each merge of open links (migration 0017)
}
# table -> (threshold, scale factor): analyze past threshold + scale x live tuples
# changed since the last analyze, autovacuum's defaults. The report's plans start
# from a few rows of these (the broken results) only when the planner knows they
# are few. The runs of ``link_open`` are analyzed as each is made (``links.merge``):
# they never change after but for deletes.
ANALYZED: dict[str, tuple[int, float]] = {
    "result": (50, 0.1),
}
# A table smaller than this is read whole faster than it is analyzed.
UNANALYZED_MIN_BYTES = 8 * 1024 * 1024
# pg_stats, not pg_stat_user_tables: the statistics themselves, which survive a
# server crash that resets the counters (and a role reads only its own rows).
_UNANALYZED = """
SELECT c.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relname = ANY($1::text[])
  AND pg_relation_size(c.oid) >= $2
  AND NOT EXISTS (SELECT 1 FROM pg_stats s
                  WHERE s.schemaname = n.nspname AND s.tablename = c.relname)
"""
_DEAD = """
SELECT relname, n_dead_tup, n_live_tup, n_mod_since_analyze,
       COALESCE(GREATEST(last_vacuum, last_autovacuum) < now() - make_interval(secs => $2), true),
       COALESCE(GREATEST(last_analyze, last_autoanalyze) < now() - make_interval(secs => $3), true)
FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname = ANY($1::text[])
"""


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _bound(limits: tuple[int, float], live: int) -> float:
    threshold, scale = limits
    return threshold + scale * live


async def analyze_unanalyzed(conn: Any) -> list[str]:
    """Analyze the report's tables that have data and no statistics; the tables analyzed.

    Outside a read-only transaction. A server that cannot (a standby, a
    read-only session) or a role that may not (ANALYZE then only warns) leaves
    the report to the planner's defaults, slower, not wrong.
    """
    rows = await conn.fetch(_UNANALYZED, list(ANALYZED), UNANALYZED_MIN_BYTES)
    bare = {row[0] for row in rows}
    analyzed = []
    for name in (name for name in ANALYZED if name in bare):  # our names in the statement
        try:
            await _upkeep(conn, f"ANALYZE {name}")
        except asyncpg.PostgresError as exc:
            log.warning("analyze_failed", table=name, error=str(exc))
            continue
        analyzed.append(name)
    return analyzed


async def _upkeep(conn: Any, statement: str) -> None:
    """Run a VACUUM or ANALYZE statement, logged with its duration."""
    started = time.monotonic()
    await conn.execute(statement)
    log.info("table_upkept", statement=statement, seconds=_since(started))


class QueueVacuum:
    """Vacuums a store's queue tables when autovacuum is off; idle otherwise."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self._checked_at = 0.0
        self._needed: bool | None = None  # None: autovacuum not asked yet
        self.vacuums = 0  # tables vacuumed by this store (tests, diagnostics)
        self.analyzes = 0  # tables only analyzed (ANALYZED)

    def poll(self) -> None:
        """Start a check in the background if one is due; call on the store's loop."""
        if self._needed is False or (self._task is not None and not self._task.done()):
            return
        now = time.monotonic()
        if now - self._checked_at < CHECK_EVERY_S:
            return
        self._checked_at = now
        self._task = asyncio.get_running_loop().create_task(self._check())

    async def run_now(self) -> list[str]:
        """Check and vacuum at once (tests, benchmarks): the tables vacuumed or analyzed."""
        return await self._vacuum_due()

    async def _check(self) -> None:
        try:
            await self._vacuum_due()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("vacuum_failed", error=str(exc))
            await self._drop_connection()

    async def _vacuum_due(self) -> list[str]:
        conn = await self._connection()
        if self._needed is None:
            self._needed = not await conn.fetchval("SELECT current_setting('autovacuum')::bool")
            if self._needed:
                log.warning(
                    "autovacuum_off",
                    hint="the server's autovacuum is off; the crawler vacuums its queue tables",
                )
        if not self._needed:
            return []
        tables = [*THRESHOLDS, *ANALYZED]
        rows = await conn.fetch(_DEAD, tables, MIN_INTERVAL_S, ANALYZE_EVERY_S)
        due: dict[str, str] = {}  # names from THRESHOLDS and ANALYZED, not from input
        for name, dead, live, changed, rested, stale in rows:
            if name in THRESHOLDS and rested and dead > _bound(THRESHOLDS[name], live):
                due[name] = f"VACUUM (ANALYZE) {name}" if stale else f"VACUUM {name}"
            elif name in ANALYZED and stale and changed > _bound(ANALYZED[name], live):
                due[name] = f"ANALYZE {name}"
        if not due or not await conn.fetchval("SELECT pg_try_advisory_lock($1)", _VACUUM_LOCK):
            return []
        try:
            for name, statement in due.items():
                await _upkeep(conn, statement)
                if name in THRESHOLDS:
                    self.vacuums += 1
                else:
                    self.analyzes += 1
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _VACUUM_LOCK)
        return list(due)

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn)
        return self._conn

    async def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None

    async def close(self) -> None:
        """Stop a running vacuum and close the connection."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
