"""What only the PostgreSQL backend has: SKIP LOCKED leases on an index, shared host
slots, advisory locks, deadlock retries, striped counters, numbered migrations.

The meaning of every store call is tested once for both backends
(``test_contract_*.py``); these are the mechanisms behind it on PostgreSQL,
where many workers share one crawl.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest
from contractkit import BROKEN, MOVED, OK, T0, TTL, Plan, disc, drain, outcome, u

from crawler.config import CrawlSettings
from crawler.errors import ForeignDatabaseError
from crawler.models import UrlKind
from crawler.report.model import COUNT_NAMES
from crawler.store import migrate
from crawler.store import open as store_open
from crawler.store.postgres import arrays, finish_watch, schema, vacuum
from crawler.store.postgres import complete as pg_complete
from crawler.store.postgres import gate as pg_gate
from crawler.store.postgres import links as pg_links
from crawler.store.postgres import report as pg_report
from crawler.store.postgres.frontier import _LEASE, LEASE_PLAN, PostgresFrontier
from crawler.store.postgres.gate import Want
from crawler.store.postgres.host_gate import SharedHostGate

from kit.sitekit import wait_until

LATEST = migrate.latest_version(schema.DIALECT)


class PG:
    """A migrated test database: a connection for looking, stores for working."""

    def __init__(self, url: str, conn: Any) -> None:
        self.url = url
        self.conn = conn
        self.stores: list[PostgresFrontier] = []

    async def frontier(self, crawl_id: int | None = None, **options: Any) -> PostgresFrontier:
        if crawl_id is None:
            settings = CrawlSettings(**options)
            store = await asyncio.to_thread(store_open.create_crawl, self.url, [], settings)
        else:
            store = await asyncio.to_thread(PostgresFrontier.connect, self.url, crawl_id, **options)
        assert isinstance(store, PostgresFrontier)
        self.stores.append(store)
        return store


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[PG]:
    conn = await asyncpg.connect(pg_url)
    await schema.apply_migrations(conn)
    db = PG(pg_url, conn)
    try:
        yield db
    finally:
        await conn.close()
        for store in db.stores:
            await asyncio.to_thread(store.close)


# -- the lease: SKIP LOCKED on an index walked in order ----------------------------


async def test_the_lease_walks_its_index_in_order_without_sorting(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(f"p{i}")) for i in range(3000)], T0)
    await f.enqueue([disc(u(f"i{i}.png"), UrlKind.CHECK) for i in range(3000)], T0)
    await pg.conn.execute("ANALYZE url")
    async with pg.conn.transaction():
        await pg.conn.execute(LEASE_PLAN)
        plan = "\n".join(
            r[0]
            for r in await pg.conn.fetch("EXPLAIN " + _LEASE, f.crawl_id, T0, 256, "w1", T0 + TTL)
        )
    assert "url_pending" in plan
    assert "Sort" not in plan
    assert "LockRows" in plan  # FOR UPDATE SKIP LOCKED


async def test_a_completion_does_not_find_its_rows_by_their_owner(pg: PG) -> None:
    # Statistics taken before the lease count no leased row: given the lease check
    # as an index condition, the planner could walk url_leased by owner, and in the
    # crawl's prepared statements it then unnested the batch once per leased row
    # (a nested loop with a join filter: bench/RESULTS-postgres.md, session 25).
    f = await pg.frontier()
    await f.enqueue([disc(u(f"p{i}")) for i in range(3000)], T0)
    await pg.conn.execute("ANALYZE url")
    leased = await f.lease("w1", 500, TTL, T0)
    ids = [x.id for x in leased[:200]]
    args = [arrays.numbers(ids), arrays.numbers([3] * 200), arrays.numbers([True] * 200), "w1"]
    plan = "\n".join(r[0] for r in await pg.conn.fetch("EXPLAIN " + pg_complete._DONE, *args))
    assert "Index Cond: (lease_owner" not in plan, plan


async def test_a_batch_lease_skips_rows_another_transaction_holds(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(str(i))) for i in range(4)], T0)
    async with pg.conn.transaction():
        held = await pg.conn.fetchval(
            "SELECT url FROM url ORDER BY id LIMIT 1 FOR UPDATE"
        )  # another worker mid-lease
        got = await f.lease("w1", 10, TTL, T0)  # does not wait for it
        assert held not in {x.url for x in got}
        assert len(got) == 3


# -- advisory locks: --max-urls and migrations -------------------------------------------


async def test_max_urls_holds_for_workers_inserting_at_once(pg: PG) -> None:
    seed = await pg.frontier(max_urls=50)
    workers = [await pg.frontier(crawl_id=seed.crawl_id, max_urls=50) for _ in range(4)]
    await asyncio.gather(
        *(w.enqueue([disc(u(f"w{i}-{j}")) for j in range(40)], T0) for i, w in enumerate(workers))
    )
    assert await pg.conn.fetchval("SELECT count(*) FROM url") == 50


# -- deadlock retry --------------------------------------------------------------------


async def test_a_transaction_aborted_for_a_deadlock_runs_again(pg: PG) -> None:
    pool = await schema.create_pool(pg.url)
    calls, forgotten = [], []

    async def body(conn: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise asyncpg.DeadlockDetectedError("deadlock detected")
        return int(await conn.fetchval("SELECT 7"))

    try:
        assert await schema.in_transaction(pool, body, on_retry=lambda: forgotten.append(1)) == 7
    finally:
        await pool.close()
    assert (len(calls), len(forgotten)) == (2, 1)


# -- counters striped per server process ---------------------------------------------------


async def test_striped_counters_agree_with_a_scan_after_workers_complete_at_once(pg: PG) -> None:
    seed = await pg.frontier()
    await seed.enqueue([disc(u(f"p{i}")) for i in range(60)], T0)
    workers = [await pg.frontier(crawl_id=seed.crawl_id) for _ in range(3)]

    async def work(f: PostgresFrontier, owner: str) -> None:
        while batch := await f.lease(owner, 4, TTL, T0):
            outs = [
                outcome(
                    x,
                    BROKEN if x.id % 5 == 0 else OK,
                    children=[disc(u(f"img{x.id % 7}"), UrlKind.CHECK, element="img")],
                )
                for x in batch
            ]
            assert all(await f.complete(owner, outs, T0))

    await asyncio.gather(*(work(f, f"w{i}") for i, f in enumerate(workers)))
    kept = await pg_report.summary(pg.conn, seed.crawl_id)
    row = await pg.conn.fetchrow(pg_report._SUMMARY_BY_SCAN, seed.crawl_id)
    scanned = dict(zip(COUNT_NAMES, row, strict=True))
    assert (kept.ok, kept.broken, kept.pages, kept.pending) == (
        scanned["ok"],
        scanned["broken"],
        scanned["page"],
        scanned["pending"],
    )
    assert kept.pages > 0
    assert kept.broken > 0
    stripes = await pg.conn.fetchval("SELECT count(DISTINCT stripe) FROM crawl_count")
    assert stripes >= 2  # several server processes counted, each on rows of its own
    totals = "SELECT sum(n) AS n FROM crawl_count GROUP BY crawl_id, name"
    assert await pg.conn.fetchval(f"SELECT count(*) FROM ({totals}) t WHERE n < 0") == 0


# -- shared politeness ------------------------------------------------------------


async def test_host_slots_hold_across_owners(pg: PG) -> None:
    f = await pg.frontier()
    want = {"h.test": Want(10, 4, 0.0)}
    a = await f.acquire_hosts("a", want, TTL, T0)
    b = await f.acquire_hosts("b", want, TTL, T0)
    assert (a["h.test"].granted, b["h.test"].granted) == (4, 0)
    await f.release_hosts("a", {"h.test": 3}, T0)
    b = await f.acquire_hosts("b", want, TTL, T0)
    assert b["h.test"].granted == 2  # its fair share of 4 between two workers
    a = await f.acquire_hosts("a", want, TTL, T0)
    assert a["h.test"].granted == 1  # a holds 1: one more is its share
    used = await pg.conn.fetchval("SELECT sum(in_flight) FROM host_slot")
    assert used == 4


async def test_host_interval_is_shared(pg: PG) -> None:
    f = await pg.frontier()
    want = {"h.test": Want(5, 5, 2.0)}
    assert (await f.acquire_hosts("a", want, TTL, T0))["h.test"].granted == 1
    grant = (await f.acquire_hosts("b", want, TTL, T0 + 1))["h.test"]
    assert (grant.granted, grant.not_before) == (0, T0 + 2)
    assert (await f.acquire_hosts("b", want, TTL, T0 + 2))["h.test"].granted == 1


async def test_a_paused_host_grants_nothing_to_anyone(pg: PG) -> None:
    f = await pg.frontier()
    await f.pause_host("h.test", T0 + 30)
    want = {"h.test": Want(2, 2, 0.0)}
    assert (await f.acquire_hosts("a", want, TTL, T0))["h.test"].granted == 0
    assert (await f.acquire_hosts("a", want, TTL, T0 + 30))["h.test"].granted == 2


async def test_slots_of_a_dead_worker_expire(pg: PG) -> None:
    f = await pg.frontier()
    want = {"h.test": Want(4, 4, 0.0)}
    assert (await f.acquire_hosts("dead", want, TTL, T0))["h.test"].granted == 4
    assert (await f.acquire_hosts("b", want, TTL, T0 + 1))["h.test"].granted == 0
    assert (await f.acquire_hosts("b", want, TTL, T0 + TTL + 1))["h.test"].granted == 4


async def test_release_drops_the_owners_slots(pg: PG) -> None:
    f = await pg.frontier()
    await f.register_worker("a", T0)
    await f.acquire_hosts("a", {"h.test": Want(4, 4, 0.0)}, TTL, T0)
    await f.release("a")
    assert await pg.conn.fetchval("SELECT count(*) FROM host_slot") == 0


async def test_shared_gates_of_two_workers_never_exceed_the_host_limit(
    pg: PG, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a's "waiting" mark must outlive the rounds below however slow the machine:
    # its expiry is wall time (2 s), and a loaded CI runner took longer than that.
    monkeypatch.setattr(pg_gate, "WAITING_TTL_S", 3600.0)
    f = await pg.frontier()
    woken = asyncio.Event()
    gates = [
        SharedHostGate(f, owner, lambda host: (3, 0.0), ttl_s=TTL, wake=woken.set)
        for owner in ("a", "b")
    ]
    held = [0, 0]

    def grab(i: int) -> None:
        if gates[i].try_acquire("h.test"):
            held[i] += 1
            assert sum(held) <= 3

    async def take(i: int, until: Callable[[], bool]) -> None:
        # Grants come from a background refresh: wait for them, bounded.
        await wait_until(lambda: grab(i) or until(), 30, 0.005, f"{held} held")

    def full() -> bool:
        return sum(held) == 3

    await asyncio.gather(take(0, full), take(1, full))
    for _ in range(held[0]):
        gates[0].release("h.test")
    held[0] = 0
    await take(1, lambda: held[1] == 2)
    for _ in range(30):  # and no more than that comes
        grab(1)
        await asyncio.sleep(0.005)
    assert held[1] == 2  # a still counts as wanting the host: b gets its fair share
    await gates[0].aclose()
    await f.release("a")  # a worker that stops gives its place up
    await take(1, lambda: held[1] == 3)
    for i, gate in enumerate(gates):
        for _ in range(held[i]):
            gate.release("h.test")
        await gate.aclose()
    assert await pg.conn.fetchval("SELECT COALESCE(sum(in_flight), 0) FROM host_slot") == 0


# -- schema ----------------------------------------------------------------------


async def test_migrations_are_recorded_and_idempotent(pg: PG) -> None:
    versions = [r[0] for r in await pg.conn.fetch("SELECT version FROM _migrations ORDER BY 1")]
    assert versions == [version for version, _, _ in migrate.available(schema.DIALECT)]
    assert await schema.apply_migrations(pg.conn) == LATEST
    views = {
        r[0]
        for r in await pg.conn.fetch(
            "SELECT table_name FROM information_schema.views WHERE table_schema = 'public'"
        )
    }
    assert {"url_result", "resolved", "broken_links", "redirects", "broken_fragments"} <= views


async def test_the_bytewise_url_key_keeps_every_view_and_a_users_own(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0022 changes a column that views read: they are made again as they were."""
    views_sql = (
        "SELECT table_name, view_definition FROM information_schema.views "
        "WHERE table_schema = 'public' ORDER BY 1"
    )
    reader = f"crawler_test_reader_{uuid.uuid4().hex[:12]}"
    kept_sql = (
        "SELECT c.relname::text, c.reloptions, obj_description(c.oid, 'pg_class'), "
        f"has_table_privilege('{reader}', c.oid, 'SELECT') "
        "FROM pg_class c WHERE c.relkind = 'v' AND c.relnamespace = 'public'::regnamespace "
        "ORDER BY 1"
    )
    every = migrate.available(schema.DIALECT)
    conn = await asyncpg.connect(pg_url)
    try:
        monkeypatch.setattr(migrate, "available", lambda _dialect: [m for m in every if m[0] < 22])
        assert await schema.apply_migrations(conn) == 21
        await conn.execute(
            "INSERT INTO crawl (id, seeds, config, started_at) VALUES (1, '[]', '{}', 0)"
        )
        await conn.execute(
            "INSERT INTO url (crawl_id, url, kind, depth) VALUES "
            "(1, 'http://h.test/b', 3, 0), (1, 'http://h.test/B', 3, 0), "
            "(1, 'http://h.test/a', 3, 1)"
        )
        await conn.execute(
            "CREATE VIEW my_pages WITH (security_barrier) AS SELECT url, depth FROM url_result"
        )
        await conn.execute("CREATE VIEW my_top AS SELECT url FROM my_pages WHERE depth = 0")
        await conn.execute(f"CREATE ROLE {reader}")
        await conn.execute(f"GRANT SELECT ON broken_links, my_top TO {reader}")
        await conn.execute("COMMENT ON VIEW my_top IS 'the seeds; ours'")
        before = await conn.fetch(views_sql)
        kept_before = [tuple(r) for r in await conn.fetch(kept_sql)]
        # Through 0024 (0022-0024 rebuild the tables views read); 0025 changes a view.
        kept_through = 24
        monkeypatch.setattr(
            migrate, "available", lambda _dialect: [m for m in every if m[0] <= kept_through]
        )
        assert await schema.apply_migrations(conn) == kept_through
        assert await conn.fetch(views_sql) == before
        assert [tuple(r) for r in await conn.fetch(kept_sql)] == kept_before
        monkeypatch.setattr(migrate, "available", lambda _dialect: every)
        assert await schema.apply_migrations(conn) == LATEST
        assert [tuple(r) for r in await conn.fetch(kept_sql)] == kept_before  # 0025 keeps them
        assert ("my_pages", ["security_barrier=true"], None, False) in kept_before
        assert ("my_top", None, "the seeds; ours", True) in kept_before
        assert ("broken_links", None, None, True) in kept_before
        collation = "SELECT collation_name FROM information_schema.columns "
        collation += "WHERE table_name = 'url' AND column_name = 'url'"
        assert await conn.fetchval(collation) == "C"
        # Byte order: upper case before lower case, whatever the database's locale.
        assert [r[0] for r in await conn.fetch("SELECT url FROM my_top ORDER BY url")] == [
            "http://h.test/B",
            "http://h.test/b",
        ]
        await conn.execute("SET enable_seqscan = off")
        plan = await conn.fetch(
            "EXPLAIN SELECT id FROM url WHERE crawl_id = 1 AND url = ANY($1::text[])",
            ["http://h.test/a"],
        )
        assert "url_crawl_id_url_key" in "\n".join(r[0] for r in plan)
    finally:
        with contextlib.suppress(asyncpg.PostgresError):
            await conn.execute(f"DROP OWNED BY {reader}")
            await conn.execute(f"DROP ROLE {reader}")
        await conn.close()


async def test_a_newer_schema_is_refused(pg: PG) -> None:
    await pg.conn.execute("INSERT INTO _migrations VALUES (999, '0999_future', 0)")
    with pytest.raises(ForeignDatabaseError, match="newer crawler"):
        await schema.apply_migrations(pg.conn)


async def test_a_foreign_database_is_refused(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("CREATE TABLE url (id int)")
        with pytest.raises(ForeignDatabaseError, match="not a crawler database"):
            await schema.apply_migrations(conn)
    finally:
        await conn.close()


async def test_workers_starting_together_migrate_once(pg_url: str) -> None:
    conns = [await asyncpg.connect(pg_url) for _ in range(4)]
    try:
        assert await asyncio.gather(*(schema.apply_migrations(c) for c in conns)) == [LATEST] * 4
    finally:
        for conn in conns:
            await conn.close()


# -- vacuum when the server's autovacuum is off -------------------------------------------


@pytest.mark.parametrize(
    ("rows", "broken_every", "upkeep", "table", "count"),
    [
        # The queue table: each row rewritten twice (leased, done), ~6,000 dead tuples.
        pytest.param(3000, 0, "vacuums", "url", "vacuum_count", id="url-vacuumed"),
        # What a report reads: 600 results, none analyzed (past autovacuum's 50 + 10%).
        pytest.param(600, 100, "analyzes", "result", "analyze_count", id="result-analyzed"),
    ],
)
async def test_the_store_keeps_its_tables_up_when_autovacuum_is_off(
    pg: PG,
    monkeypatch: pytest.MonkeyPatch,
    rows: int,
    broken_every: int,
    upkeep: str,
    table: str,
    count: str,
) -> None:
    monkeypatch.setattr(vacuum, "CHECK_EVERY_S", 0.0)
    autovacuum_on = await pg.conn.fetchval("SELECT current_setting('autovacuum')::bool")
    f = await pg.frontier()
    await f.enqueue([disc(u(str(i))) for i in range(rows)], T0)
    while batch := await f.lease("w1", 500, TTL, T0):
        outs = [
            outcome(x, BROKEN if broken_every and x.id % broken_every == 7 else OK) for x in batch
        ]
        assert all(await f.complete("w1", outs, T0))
    if autovacuum_on:  # the server's workers do it; the store leaves it to them
        await f.renew("w1", TTL, T0)
        assert getattr(f._vacuum, upkeep) == 0
        return

    async def kept() -> bool:
        await f.renew("w1", TTL, T0)  # each call may start a check in the background
        # By this store (counted once its statement returned), seen by the server.
        # Not n_dead_tup after it: other processes' counts arrive later.
        await pg.conn.execute("SELECT pg_stat_clear_snapshot()")
        seen = await pg.conn.fetchval(
            f"SELECT {count} FROM pg_stat_user_tables WHERE relname = $1", table
        )
        return getattr(f._vacuum, upkeep) > 0 and int(seen) > 0

    await wait_until(kept, timeout=60, interval=0.2, message=f"{table}: no {upkeep} by the store")


async def test_a_report_analyzes_its_tables_when_they_have_no_statistics(
    pg: PG, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database whose crawl never analyzed ``result``: autovacuum off on the
    # table, the store's own upkeep never due. Without statistics the report's
    # plan read every open link (bench/RESULTS-postgres.md, session 10).
    monkeypatch.setattr(vacuum, "CHECK_EVERY_S", float("inf"))
    monkeypatch.setattr(vacuum, "UNANALYZED_MIN_BYTES", 1)  # any table with rows
    for table in vacuum.ANALYZED:
        await pg.conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    f = await pg.frontier()
    await f.enqueue([disc(u(str(i))) for i in range(300)], T0)
    while batch := await f.lease("w1", 100, TTL, T0):
        outs = [outcome(x, BROKEN if x.id % 50 == 7 else OK) for x in batch]
        assert all(await f.complete("w1", outs, T0))
    stats = "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1"
    assert await pg.conn.fetchval(stats, "result") == 0

    report = await pg_report.load(pg.conn, f.crawl_id)

    assert len(report.broken) == 6
    assert await pg.conn.fetchval(stats, "result") > 0
    assert "result" not in await vacuum.analyze_unanalyzed(pg.conn)  # once, not every report


# -- the end of a crawl reads indexes, not every URL -----------------------------------------


async def test_reading_the_summary_and_broken_links_scans_no_table(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(f"p{i}")) for i in range(4000)], T0)
    while batch := await f.lease("w1", 500, TTL, T0):
        outs = []
        for x in batch:
            if x.url.endswith("000"):  # a few redirects, a few broken links
                outs.append(outcome(x, MOVED, redirect_to=disc(u(f"r{x.id}"), UrlKind.CHECK)))
            else:
                kids = [disc(u(f"img{x.id % 50}.png"), UrlKind.CHECK, element="img")]
                broken = x.kind == UrlKind.PAGE and x.id % 400 == 7
                outs.append(outcome(x, BROKEN if broken else OK, children=kids))
        assert all(await f.complete("w1", outs, T0))
    statements = [
        "SELECT name, sum(n) FROM crawl_count WHERE crawl_id = $1 GROUP BY name",
        pg_report._OUTSTANDING,
        pg_report._REDIRECT_BROKEN,
        pg_report._EDGES.format(at=pg_report._AT),  # with the links' positions
    ]
    total = await pg.conn.fetchval("SELECT count(*) FROM url WHERE crawl_id = $1", f.crawl_id)
    # The links not merged yet (link_fresh, no index) are read once, hashed
    # against the broken URLs: joined to url only where they match.
    assert await pg.conn.fetchval("SELECT count(*) FROM link_fresh") > 0
    await pg.conn.execute("ANALYZE")
    await _assert_reads_indexes(pg, f.crawl_id, statements, total, hash_joins=True)
    # Merged: every table is reached through an index.
    assert await pg_links.merge(pg.conn) > 0
    await pg.conn.execute("ANALYZE")
    await _assert_reads_indexes(pg, f.crawl_id, statements, total, hash_joins=False)


async def test_the_broken_urls_probe_the_runs_of_links_in_id_order(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(""))], T0)
    (root,) = await f.lease("w1", 1, TTL, T0)
    pages = [disc(u(f"p{i}")) for i in range(40)]
    assert all(await f.complete("w1", [outcome(root, OK, children=pages)], T0))
    assert await pg_links.merge(pg.conn) > 0
    missing = {u(f"p{i}"): [disc(u(f"gone{i % 7}"), UrlKind.CHECK)] for i in range(40)}
    await drain(f, Plan(results={u(f"gone{i}"): BROKEN for i in range(7)}, children=missing))
    assert await pg_links.merge(pg.conn) > 0
    await pg.conn.execute("ANALYZE")
    sql = pg_report._EDGES.format(at=pg_report._AT)
    async with pg.conn.transaction():
        await pg_report._set(pg.conn, pg_report._EDGE_SETTINGS)
        plan = "\n".join(r[0] for r in await pg.conn.fetch("EXPLAIN " + sql, f.crawl_id))
        rows = await pg.conn.fetch(sql, f.crawl_id)
    # Deduplicated by a sort, the broken URLs reach the runs' indexes in id
    # order: a hash would hand them over in any order.
    assert "HashAggregate" not in plan, plan
    assert "Index Scan using link_open_run_" in plan, plan
    assert len({r[0] for r in rows}) == 7  # the broken URLs
    assert len(rows) == 40  # one row per source page


async def _assert_reads_indexes(
    pg: PG, crawl_id: int, statements: list[str], total: int, *, hash_joins: bool
) -> None:
    # At this size scans, hashes and merges of whole tables are the cheaper
    # plans; what must hold is that none is needed: with them priced out (as a
    # million rows price them), every table is reached through an index and
    # the rows read are the broken links' and the redirects', not the crawl's.
    async with pg.conn.transaction():
        for setting in ("enable_seqscan", "enable_mergejoin", "enable_hashjoin"):
            if setting != "enable_hashjoin" or not hash_joins:
                await pg.conn.execute(f"SET LOCAL {setting} = off")
        for sql in statements:
            plan = await pg.conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, crawl_id)
            read = _rows_read(json.loads(plan)[0]["Plan"], {"url", "result", "link_open"})
            assert read < total / 10, (sql, read, total)
            text = "\n".join(r[0] for r in await pg.conn.fetch("EXPLAIN " + sql, crawl_id))
            for table in ("url ", "result ", "link_open", "link_settled "):  # link_open's runs too
                assert f"Seq Scan on {table}" not in text, (sql, text)


def _rows_read(node: dict[str, Any], tables: set[str]) -> int:
    """Rows a plan read from ``tables``: returned or filtered out, times loops."""
    read = 0
    name = str(node.get("Relation Name", ""))
    if name in tables or (name.startswith("link_open_run_") and "link_open" in tables):
        rows = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        read += rows * node.get("Actual Loops", 1)
    for child in node.get("Plans", []):
        read += _rows_read(child, tables)
    return read


# -- open links appended, then merged in the background ---------------------------------


async def test_completions_merge_open_links_in_the_background_once_a_batch_is_due(
    pg: PG, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def always(conn: Any) -> bool:
        return True

    monkeypatch.setattr(pg_links, "CHECK_EVERY_ROWS", 2)
    monkeypatch.setattr(pg_links, "due", always)
    f = await pg.frontier()
    await f.enqueue([disc(u(""))], T0)
    children = {u(""): [disc(u(f"p{i}")) for i in range(6)]}
    children |= {u(f"p{i}"): [disc(u(f"q{i}")), disc(u(f"q{i + 1}"))] for i in range(6)}
    await drain(f, Plan(children=children))

    async def merged() -> bool:
        return f._links.merges > 0 and await pg.conn.fetchval("SELECT count(*) FROM link_open") > 0

    await wait_until(merged, timeout=30, interval=0.1, message="open links were never merged")
    links = await pg.conn.fetchval(
        "SELECT count(*) FROM (SELECT target_id, source_id, fragment FROM link_open "
        "UNION SELECT target_id, source_id, fragment FROM link_fresh) l"
    )
    assert links == 6 + 12  # every link once, merged or not


async def test_a_merge_waits_for_the_one_under_way_and_none_is_lost(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(""))], T0)
    await drain(f, Plan(children={u(""): [disc(u(f"p{i}")) for i in range(5)]}))
    other = await asyncpg.connect(pg.url)
    try:
        async with other.transaction():
            await other.execute("SELECT pg_advisory_xact_lock($1)", pg_links._MERGE_LOCK)
            assert await pg_links.merge(pg.conn) is None  # another merge holds the lock
        assert await pg_links.merge(pg.conn, wait=True) == 5
    finally:
        await other.close()
    assert await pg.conn.fetchval("SELECT count(*) FROM link_fresh") == 0


async def test_finishing_a_crawl_notifies_its_idle_workers(pg: PG) -> None:
    """The finishing transaction sends NOTIFY with the crawl's id (``finish_watch``)."""
    f = await pg.frontier()
    await f.enqueue([disc(u("a"))], T0)
    heard: list[str] = []
    listener = await asyncpg.connect(pg.url)
    try:
        await listener.add_listener(
            finish_watch.CHANNEL, lambda _c, _p, _ch, payload: heard.append(payload)
        )
        (a,) = await f.lease("w1", 10, TTL, T0)
        assert await f.finish_if_quiescent(T0) is False
        assert await f.complete("w1", [outcome(a)], T0) == [True]
        assert await f.finish_if_quiescent(T0) is True
        await wait_until(lambda: bool(heard), message="the finish notification")
        assert heard == [str(f.crawl_id)]  # none while work was outstanding
    finally:
        await listener.close()


_RUNS = pg_links._RUNS


async def test_each_merge_is_a_run_of_its_own_indexed_by_target_and_source(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(""))], T0)
    (root,) = await f.lease("w1", 1, TTL, T0)
    kids = [disc(u(f"p{i}")) for i in range(4)]
    assert all(await f.complete("w1", [outcome(root, OK, children=kids)], T0))
    assert await pg_links.merge(pg.conn) == 4
    # The pages link on to one another (and one twice, with a fragment): a second run.
    part = disc(u("q"), fragment="part")
    again = {u(f"p{i}"): [disc(u(f"p{(i + 1) % 4}")), part] for i in range(4)}
    await drain(f, Plan(children=again))
    assert await pg_links.merge(pg.conn) > 0
    assert await pg_links.merge(pg.conn) == 0  # nothing left: no empty run made

    runs = [r[0] for r in await pg.conn.fetch(_RUNS)]
    assert runs[0] == "link_open_run_0"
    assert len(runs) == 3
    for run in runs[1:]:
        indexes = await pg.conn.fetch("SELECT indexdef FROM pg_indexes WHERE tablename = $1", run)
        columns = sorted(r[0].split(" USING btree ")[1] for r in indexes)
        packed = " WITH (fillfactor='100')"  # never inserted into: no room left for it
        assert columns == [
            f"(source_id){packed}",
            f"(target_id){packed}",
            f"(target_id){packed} WHERE (fragment <> ''::text)",
        ]
        assert await pg.conn.fetchval("SELECT count(*) FROM pg_stats WHERE tablename = $1", run)
    # Every link once, in link_open; readers of the partitioned table find them by key.
    assert await pg.conn.fetchval("SELECT count(*) FROM link_fresh") == 0
    keys = "SELECT target_id, source_id, fragment FROM link_open"
    assert await pg.conn.fetchval(f"SELECT count(*) FROM ({keys}) k") == await pg.conn.fetchval(
        f"SELECT count(*) FROM (SELECT DISTINCT * FROM ({keys}) k) d"
    )
    target = await pg.conn.fetchval("SELECT id FROM url WHERE url LIKE '%/q'")
    async with pg.conn.transaction():
        await pg.conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in await pg.conn.fetch(
                "EXPLAIN SELECT source_id FROM link_open WHERE target_id = $1", target
            )
        )
    assert "Seq Scan" not in plan, plan
    assert runs[2] in plan, plan
    sources = await pg.conn.fetch(
        "SELECT fragment FROM link_open WHERE target_id = $1 ORDER BY source_id", target
    )
    assert [r[0] for r in sources] == ["part"] * 4


async def test_runs_emptied_by_a_delete_are_dropped_and_the_rest_kept(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(""))], T0)
    await drain(f, Plan(children={u(""): [disc(u(f"p{i}")) for i in range(3)]}))
    assert await pg_links.merge(pg.conn) == 3
    run = (await pg.conn.fetch(_RUNS))[-1][0]
    assert await pg_links.drop_empty_runs(pg.conn) == ["link_open_run_0"]  # made empty by 0023
    assert run in [r[0] for r in await pg.conn.fetch(_RUNS)]  # it has rows: kept
    await pg.conn.execute("DELETE FROM link_open WHERE source_id IN (SELECT id FROM url)")
    assert run in await pg_links.drop_empty_runs(pg.conn)
    assert run not in [r[0] for r in await pg.conn.fetch(_RUNS)]
    assert await pg_links.merge(pg.conn) == 0


async def test_open_links_merged_before_runs_are_kept_as_run_0(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0023 makes link_open partitioned: the links in it stay, readable as before."""
    every = migrate.available(schema.DIALECT)
    conn = await asyncpg.connect(pg_url)
    try:
        monkeypatch.setattr(migrate, "available", lambda _dialect: [m for m in every if m[0] < 23])
        assert await schema.apply_migrations(conn) == 22
        await conn.execute(
            "INSERT INTO crawl (id, seeds, config, started_at) VALUES (1, '[]', '{}', 0)"
        )
        await conn.execute(
            "INSERT INTO url (id, crawl_id, url, kind, depth) VALUES "
            "(1, 1, 'http://h.test/', 3, 0), (2, 1, 'http://h.test/gone', 1, 1)"
        )
        await conn.execute(
            "INSERT INTO link_open (target_id, source_id, fragment, element, line, col) "
            "VALUES (2, 1, '', 'a', 3, 4), (2, 1, 'x', 'a', 5, 6)"
        )
        await conn.execute("CREATE VIEW my_links AS SELECT source_id, line FROM link")
        monkeypatch.setattr(migrate, "available", lambda _dialect: every)
        assert await schema.apply_migrations(conn) == LATEST

        assert [r[0] for r in await conn.fetch(_RUNS)] == ["link_open_run_0"]
        assert await conn.fetchval("SELECT array_agg(run) FROM link_open") == [0, 0]
        rows = await conn.fetch("SELECT source_id, line FROM my_links ORDER BY line")
        assert [tuple(r) for r in rows] == [(1, 3), (1, 5)]
        await conn.execute(
            "INSERT INTO link_fresh (target_id, source_id, fragment, element, line, col) "
            "VALUES (2, 1, '', 'img', 7, 8)"
        )
        assert await pg_links.merge(conn) == 1
        rows = await conn.fetch("SELECT run, line FROM link_open ORDER BY line")
        assert [tuple(r) for r in rows] == [(0, 3), (0, 5), (1, 7)]
    finally:
        await conn.close()


async def test_a_transaction_reading_links_while_a_run_is_attached_reads_each_once(
    pg: PG,
) -> None:
    """Each statement of a READ COMMITTED transaction sees what is committed when it
    starts, but the runs of link_open its first statement saw: a merge committing
    in between must wait, or the moved links would be in neither table."""
    await pg.conn.execute(
        "INSERT INTO link_fresh (target_id, source_id, element) "
        "SELECT i, 1, 'a' FROM generate_series(1, 20) i"
    )
    count = (
        "SELECT count(*) FROM (SELECT source_id FROM link_open "
        "UNION ALL SELECT source_id FROM link_fresh) l"
    )
    reader = await asyncpg.connect(pg.url)
    merger = await asyncpg.connect(pg.url)
    try:
        async with reader.transaction():
            assert await reader.fetchval(count) == 20
            merge = asyncio.ensure_future(pg_links.merge(merger))

            async def waiting_or_done() -> bool:
                if merge.done():
                    return True
                event = await pg.conn.fetchval(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1",
                    merger.get_server_pid(),
                )
                return bool(event == "Lock")

            await wait_until(waiting_or_done, timeout=30, interval=0.01, message="no merge")
            assert await reader.fetchval(count) == 20
        assert await merge == 20
        assert await reader.fetchval(count) == 20
    finally:
        await merger.close()
        await reader.close()
