"""What only the SQLite backend has: one writer thread, the busy lock, checkpoints, the WAL bound.

The meaning of every store call is tested once for both backends
(``test_contract_*.py``); these are the mechanisms behind it on SQLite.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from contractkit import BROKEN, T0, TTL, Plan, disc, drain, outcome, u
from hypothesis import example, given, settings
from hypothesis import strategies as st

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.errors import StoreError
from crawler.models import ResultClass, UrlKind
from crawler.report.model import Summary
from crawler.store import open as store_open
from crawler.store.sqlite import bulk, crawls, db, links, results
from crawler.store.sqlite import frontier as frontier_module
from crawler.store.sqlite import store as sqlite_store
from crawler.store.sqlite.frontier import Frontier

from kit.sitekit import Page, wait_until

LIMIT = 256 * 1024
# The check runs before each group commit, so one commit may pass the limit.
SLACK = 4 * 1024 * 1024


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    c = db.open_database(tmp_path / "crawl.db")
    yield c  # type: ignore[misc]
    c.close()


def new_frontier(conn: sqlite3.Connection) -> Frontier:
    return Frontier(conn, crawls.create(conn, [], {}, T0))


# -- the one writer thread ---------------------------------------------------------


@pytest.mark.patches_compiled
async def test_every_call_runs_on_the_one_writer_thread(tmp_path: Path) -> None:
    store = store_open.create_crawl(tmp_path / "c.db", [], CrawlSettings())
    assert isinstance(store, sqlite_store.AsyncFrontier)
    seen: set[str] = set()
    original = store.sync.lease

    def spy(*args: object) -> object:
        seen.add(threading.current_thread().name)
        return original(*args)  # type: ignore[arg-type]

    store.sync.lease = spy  # type: ignore[method-assign]
    try:
        await store.enqueue([disc(u(str(i))) for i in range(20)], T0)
        await asyncio.gather(*(store.lease(f"w{i}", 2, TTL, T0) for i in range(10)))
    finally:
        store.close()
    assert len(seen) == 1
    assert next(iter(seen)).startswith("crawler-writer")


# -- the busy lock ---------------------------------------------------------------------


def test_a_writer_waits_for_the_lock_another_connection_holds(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    writer = db.open_database(path)
    f = new_frontier(writer)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # holds the write lock
    done = threading.Event()

    def enqueue() -> None:
        f.enqueue([disc(u("a"))], T0)
        done.set()

    thread = threading.Thread(target=enqueue)
    thread.start()
    try:
        assert not done.wait(0.3)  # waiting for the lock, not failing
        other.execute("COMMIT")
        assert done.wait(30)
    finally:
        thread.join(30)
        other.close()
        writer.close()
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT url FROM url").fetchall() == [(u("a"),)]
    reader.close()


# -- checkpoints and the WAL bound --------------------------------------------------------


def test_a_checkpoint_lets_the_wal_start_over(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u(str(i))) for i in range(2000)], T0)
    assert f.wal_bytes() > 0
    assert f.bound_wal(0) is True  # truncated: no reader holds it back
    assert f.wal_bytes() == 0


def test_the_wal_bound_fails_while_a_reader_holds_a_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    conn = db.open_database(path)
    f = new_frontier(conn)
    f.enqueue([disc(u("first"))], T0)
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM url").fetchone()  # the snapshot is now held
        f.enqueue([disc(u(str(i))) for i in range(2000)], T0)
        assert f.bound_wal(0) is False
        reader.execute("COMMIT")
        assert f.bound_wal(0) is True
    finally:
        reader.close()
        conn.close()


def _site(pages: int) -> dict[str, Page]:
    site = {"/": Page(links=[f"/p{i}" for i in range(pages)])}
    for i in range(pages):
        site[f"/p{i}"] = Page(
            links=[f"/p{(i * 7 + j) % pages}" for j in range(1, 6)] + [f"/missing{i}"]
        )
    return site


async def test_wal_bounded_while_a_reader_holds_a_snapshot(
    site_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "WAL_LIMIT_BYTES", LIMIT)
    monkeypatch.setattr(sqlite_store, "WAL_CHECK_EVERY_S", 0.0)
    server = await site_server(_site(1500))
    db_path = tmp_path / "c.db"
    job = runner.start(db_path, [server.url("/")], CrawlSettings(max_retries=0, robots=False))
    reader = sqlite3.connect(db_path, isolation_level=None)
    wal = Path(f"{db_path}-wal")
    biggest = 0

    def wal_size() -> int:
        nonlocal biggest
        size = wal.stat().st_size if wal.exists() else 0
        biggest = max(biggest, size)
        return size

    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM url").fetchone()  # the snapshot is now held
        task = asyncio.create_task(job.run())
        await wait_until(
            lambda: (
                isinstance(job.frontier, sqlite_store.AsyncFrontier) and job.frontier.wal_stalls > 0
            ),
            timeout=30,
            message="the crawl never waited for the reader",
        )
        for _ in range(20):  # the crawl stays stalled, the WAL stays bounded
            assert wal_size() <= LIMIT + SLACK
            await asyncio.sleep(0.01)
        reader.execute("COMMIT")
        assert await asyncio.wait_for(task, 60)
    finally:
        reader.close()
        job.close()
    assert biggest <= LIMIT + SLACK
    conn = sqlite3.connect(db_path)
    try:
        done = conn.execute("SELECT count(*) FROM url WHERE state = 2").fetchone()[0]
        assert done == 3001  # every page and every missing page: nothing lost
    finally:
        conn.close()


# -- counters kept by triggers ---------------------------------------------------------------


def test_counters_kept_by_triggers_agree_with_a_scan(conn: sqlite3.Connection) -> None:
    """crawl_count (summary's source) against counting every row, through every kind of write."""

    def both(crawl_id: int) -> tuple[Summary, Summary]:
        kept = results.summary(conn, crawl_id)
        conn.execute("SAVEPOINT scan")
        conn.execute("DROP TABLE crawl_count")  # the summary falls back to a scan
        scanned = results.summary(conn, crawl_id)
        conn.execute("ROLLBACK TO scan")
        conn.execute("RELEASE scan")
        return kept, scanned

    def run(f: Frontier, plan: Plan) -> None:
        asyncio.run(drain(_Async(f), plan))

    f = new_frontier(conn)
    other = new_frontier(conn)  # a second crawl in the same file is counted apart
    other.enqueue([disc(u(""))], T0)
    run(other, Plan())
    f.enqueue([disc(u("")), disc("mailto:x@y.z", UrlKind.SKIP, result=ResultClass.SKIPPED)], T0)
    plan = Plan(
        results={u("gone"): BROKEN},
        children={
            u(""): [disc(u("x"), UrlKind.CHECK, element="img"), disc(u("gone")), disc(u("r"))],
        },
        redirects={u("r"): u("r2")},
    )
    run(f, plan)
    kept, scanned = both(f.crawl_id)
    assert kept == scanned
    plan.results[u("x")] = BROKEN
    f.enqueue([disc(u("x"))], T0)  # found as a page: fetched again, and now broken
    run(f, plan)
    kept, scanned = both(f.crawl_id)
    assert kept == scanned
    assert kept.broken == 2
    assert both(other.crawl_id)[0] == both(other.crawl_id)[1]
    assert conn.execute("SELECT count(*) FROM crawl_count WHERE n < 0").fetchone()[0] == 0
    assert f.lease("w1", 1, TTL, T0) == []


# -- open links appended, then moved in batches --------------------------------------------


def _link_reads(conn: sqlite3.Connection, crawl_id: int) -> tuple[object, ...]:
    return (
        results.broken_links(conn, crawl_id),
        results.broken_edges(conn, crawl_id),
        results.summary(conn, crawl_id),
        set(conn.execute("SELECT * FROM link")),
        set(conn.execute("SELECT * FROM broken_links")),
    )


def test_reports_read_the_same_links_before_during_and_after_a_merge(
    conn: sqlite3.Connection,
) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("")), disc(u("lost"))], T0)  # a broken seed nothing links to
    img = disc(u("i.png"), UrlKind.CHECK, element="img")
    plan = Plan(
        results={u("gone"): BROKEN, u("i.png"): BROKEN, u("lost"): BROKEN},
        children={
            u(""): [disc(u("a")), disc(u("gone"))._replace(line=3, column=7), img, disc(u("b"))],
            u("a"): [disc(u("gone")), disc(u("")), img, disc(u("gone#x"))],
            u("b"): [disc(u("a")), img],
        },
    )
    asyncio.run(drain(_Async(f), plan))
    assert links.fresh_rows(conn) > 0
    assert conn.execute("SELECT count(*) FROM link_open").fetchone()[0] == 0
    before = _link_reads(conn, f.crawl_id)
    assert [b.url for b in before[0]] == [u("gone"), u("i.png"), u("lost")]  # type: ignore[attr-defined]
    assert links.merge(conn) > 0
    assert links.fresh_rows(conn) == 0
    assert conn.execute("SELECT count(*) FROM link_run").fetchone()[0] == 1
    assert _link_reads(conn, f.crawl_id) == before
    # A page completed again appends its links again: the same keys in a second run.
    conn.execute(
        "INSERT INTO link_fresh (target_id, source_id, fragment, element, at) "
        "SELECT target_id, source_id, fragment, element, at FROM link_open"
    )
    assert _link_reads(conn, f.crawl_id) == before
    assert links.merge(conn) > 0
    assert conn.execute("SELECT count(*) FROM link_run").fetchone()[0] == 2
    assert _link_reads(conn, f.crawl_id) == before
    # Positions move with their links (migration 0015's packed `at`).
    where = "SELECT DISTINCT line, col FROM broken_links WHERE url = ? AND source = ?"
    assert conn.execute(where, (u("gone"), u(""))).fetchall() == [(3, 7)]


def test_a_merge_appends_a_run_and_readers_search_each_run_by_target(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Merged into one target-keyed tree, every batch rewrote most of it (migration 0020).
    monkeypatch.setattr(links, "MAX_RUN_ROWS", 3)
    f = new_frontier(conn)
    f.enqueue([disc(u(""))], T0)
    children = {u(""): [disc(u(f"p{i}")) for i in range(5)]}
    asyncio.run(drain(_Async(f), Plan(children=children, results={u("p1"): BROKEN})))
    assert links.merge(conn) == 5
    runs = conn.execute("SELECT id, rows FROM link_run ORDER BY id").fetchall()
    assert [r[1] for r in runs] == [3, 2]  # at most MAX_RUN_ROWS a run, oldest rows first
    keys = conn.execute("SELECT run, target_id FROM link_open").fetchall()
    assert keys == sorted(keys)
    assert max(k[0] for k in keys[:3]) < min(k[0] for k in keys[3:])
    for view in ("broken_links", "blocked_links"):
        plan = " | ".join(
            str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN SELECT * FROM {view}")
        )
        # The links of the URL and the "no source at all" test: one search a run each.
        assert plan.count("SEARCH l USING PRIMARY KEY (run=? AND target_id=?)") == 2, plan
    assert [b.url for b in results.broken_links(conn, f.crawl_id)] == [u("p1")]


def test_completions_merge_once_the_batch_is_full(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(links, "MIN_BATCH_ROWS", 4)
    f = new_frontier(conn)
    f.enqueue([disc(u(""))], T0)
    children = {u(""): [disc(u(f"p{i}")) for i in range(6)]}
    children |= {u(f"p{i}"): [disc(u(f"q{i}")), disc(u(f"q{i + 1}"))] for i in range(6)}
    asyncio.run(drain(_Async(f), Plan(children=children)))
    assert conn.execute("SELECT count(*) FROM link_open").fetchone()[0] >= 4
    assert links.fresh_rows(conn) < 4


def _fresh_links(conn: sqlite3.Connection, rows: int) -> None:
    conn.execute("DELETE FROM link_fresh")
    bulk.insert(
        conn,
        "INSERT INTO link_fresh (target_id, source_id, fragment, element, at)",
        [(1, i + 1, "", "a", None) for i in range(rows)],
    )


def test_a_merge_waits_while_the_frontier_is_dry_or_nearly_empty(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A merge holds the writer and the next lease: at the end of a crawl it stalled
    # the last requests for all of its duration, for rows no reader needed merged.
    monkeypatch.setattr(links, "MIN_BATCH_ROWS", 4)
    f = new_frontier(conn)
    f.enqueue([disc(u(f"p{i}")) for i in range(6)], T0)  # 6 pending; a batch is 6 rows
    monkeypatch.setattr(frontier_module, "MERGE_WAITS_BELOW_PENDING", 3)
    _fresh_links(conn, 7)
    assert f.merge_links_due(dry=True) == 0  # the engine waits for rows: held back
    assert f.merge_links_due(dry=False) == 7  # rows to lease meanwhile: merged
    monkeypatch.setattr(frontier_module, "MERGE_WAITS_BELOW_PENDING", 7)
    _fresh_links(conn, 11)
    assert f.merge_links_due(dry=False) == 0  # few URLs left: the crawl may end first
    _fresh_links(conn, 12)
    assert f.merge_links_due(dry=True) == 12  # held back up to twice the batch, not more
    assert links.fresh_rows(conn) == 0


@pytest.mark.patches_compiled
async def test_the_merge_is_the_writer_s_next_job_and_its_failure_the_next_call_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(links, "MIN_BATCH_ROWS", 2)
    monkeypatch.setattr(frontier_module, "MERGE_WAITS_BELOW_PENDING", 0)
    store = store_open.create_crawl(tmp_path / "c.db", [], CrawlSettings())
    assert isinstance(store, sqlite_store.AsyncFrontier)
    release = threading.Event()
    original = links.merge

    def held(conn: sqlite3.Connection) -> int:
        release.wait(timeout=30)
        return original(conn)

    monkeypatch.setattr(links, "merge", held)
    try:
        await store.enqueue([disc(u(""))], T0)
        (row,) = await store.lease("w1", 1, TTL, T0)
        # Ten links to two URLs: more than a batch (as many rows as the crawl has URLs).
        children = [disc(u(f"p{i}"), fragment=f"f{j}") for i in range(2) for j in range(5)]
        # The commit's caller does not wait for the merge (held until released here).
        await asyncio.wait_for(store.complete("w1", [outcome(row, children=children)], T0), 10)
        release.set()
        await store.counts()  # queued behind the merge
        reader = sqlite3.connect(tmp_path / "c.db")
        assert reader.execute("SELECT count(*) FROM link_fresh").fetchone() == (0,)
        reader.close()

        def fail(conn: sqlite3.Connection) -> int:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(links, "merge", fail)
        leased = await store.lease("w1", 2, TTL, T0)
        await store.complete("w1", [outcome(r, children=children) for r in leased], T0)
        with pytest.raises(StoreError):
            await store.counts()
        assert (await store.counts()).done == 3  # the commit stands; the links stay fresh
    finally:
        release.set()
        store.close()


def test_counting_fresh_links_seeks_instead_of_scanning(conn: sqlite3.Connection) -> None:
    # Every completion asks; a scan here made a 1,000,000-page crawl quadratic.
    plan = conn.execute("EXPLAIN QUERY PLAN " + links.FRESH_ROWS_SQL).fetchall()
    steps = [str(row[-1]) for row in plan]
    assert not [s for s in steps if s.startswith("SCAN link_fresh")], steps
    assert links.fresh_rows(conn) == 0
    f = new_frontier(conn)
    f.enqueue([disc(u(""))], T0)
    asyncio.run(drain(_Async(f), Plan(children={u(""): [disc(u("a")), disc(u("b"))]})))
    assert links.fresh_rows(conn) == conn.execute("SELECT count(*) FROM link_fresh").fetchone()[0]


# -- the group commit's new URLs: ids given by the writer, inserted together ------------


def _linked_site() -> Plan:
    """Pages linking to each other and to shared images, with repeats and an upgrade."""
    img = disc(u("i.png"), UrlKind.CHECK, element="img")
    children = {u(""): [disc(u(f"p{i}")) for i in range(8)] + [img, disc(u("late"), UrlKind.CHECK)]}
    for i in range(8):
        children[u(f"p{i}")] = [
            disc(u(f"p{(i + 1) % 8}")),
            disc(u(f"q{i}")),
            disc(u(f"q{i}")),  # twice on one page: one link
            img,
            disc(u(""), fragment="top"),
            disc(u("late")),  # found as a check, then as a page: upgraded
        ]
    return Plan(results={u("q3"): BROKEN}, children=children, redirects={u("q5"): u("q6")})


def _stored(conn: sqlite3.Connection, crawl_id: int) -> tuple[object, ...]:
    rows = conn.execute(
        "SELECT url, kind, depth, hop, state, settled FROM url WHERE crawl_id = ? ORDER BY url",
        (crawl_id,),
    ).fetchall()
    edges = conn.execute(
        "SELECT t.url, s.url, l.fragment, l.element FROM link l "
        "JOIN url t ON t.id = l.target_id JOIN url s ON s.id = l.source_id "
        "WHERE s.crawl_id = ? ORDER BY 1, 2, 3",
        (crawl_id,),
    ).fetchall()
    return rows, edges, results.summary(conn, crawl_id), results.broken_links(conn, crawl_id)


def test_a_cache_smaller_than_a_batch_stores_the_same_rows(conn: sqlite3.Connection) -> None:
    """Evictions mid-batch: a URL the cache dropped is found again, never inserted twice.

    Every small size: the cache drops entries on a put or on a lookup (a hit
    moving generations), at different links of the batch.
    """
    stored = []
    for size in (50_000, *range(2, 30)):
        crawl_id = crawls.create(conn, [], {}, T0)
        f = Frontier(conn, crawl_id, seen_cache_size=size)
        f.enqueue([disc(u(""))], T0)
        asyncio.run(drain(_Async(f), _linked_site()))
        stored.append(_stored(conn, crawl_id))
    assert all(s == stored[0] for s in stored[1:])
    assert len(stored[0][0]) == 19  # type: ignore[arg-type]


def test_rows_another_writer_added_between_batches_are_found(conn: sqlite3.Connection) -> None:
    """The cache holds the whole crawl until another writer adds rows: then it probes again."""
    f = new_frontier(conn)
    other = Frontier(conn, f.crawl_id)  # another process on the same crawl
    f.enqueue([disc(u(""))], T0)
    (root,) = f.lease("w1", 10, TTL, T0)
    assert f.complete("w1", [outcome(root, children=[disc(u("a"))])], T0) == [True]
    other.enqueue([disc(u("b")), disc(u("c"), UrlKind.CHECK)], T0)
    (a,) = [x for x in f.lease("w1", 10, TTL, T0) if x.url == u("a")]
    children = [disc(u("b")), disc(u("c")), disc(u("d"))]  # c found again, as a page
    assert f.complete("w1", [outcome(a, children=children)], T0) == [True]
    rows = conn.execute(
        "SELECT url, kind FROM url WHERE crawl_id = ? ORDER BY url", (f.crawl_id,)
    ).fetchall()
    assert rows == [(u(""), 3), (u("a"), 3), (u("b"), 3), (u("c"), 3), (u("d"), 3)]
    targets = conn.execute(
        "SELECT t.url FROM link l JOIN url t ON t.id = l.target_id WHERE l.source_id = ? "
        "ORDER BY 1",
        (a.id,),
    ).fetchall()
    assert targets == [(u("b"),), (u("c"),), (u("d"),)]


def test_a_row_given_an_id_another_crawl_had_is_found_all_the_same(
    conn: sqlite3.Connection,
) -> None:
    """Another crawl's newest rows deleted and their ids given again to this crawl's rows
    by another writer: max(id) is back where the cache saw it whole. The batch that
    collides runs again, probing."""
    f = new_frontier(conn)
    f.enqueue([disc(u(""))], T0)
    other_crawl = Frontier(conn, crawls.create(conn, [], {}, T0))
    other_crawl.enqueue([disc(u(f"x{i}")) for i in range(5)], T0)
    (root,) = f.lease("w1", 10, TTL, T0)
    assert f.complete("w1", [outcome(root)], T0) == [True]  # whole, as of x4's id
    conn.execute("DELETE FROM url WHERE crawl_id = ?", (other_crawl.crawl_id,))
    Frontier(conn, f.crawl_id).enqueue([disc(u(f"y{i}")) for i in range(5)], T0)  # x's ids
    y0 = next(row for row in f.lease("w1", 10, TTL, T0) if row.url == u("y0"))
    assert f.complete("w1", [outcome(y0, children=[disc(u("y1"))])], T0) == [True]
    rows = conn.execute(
        "SELECT id FROM url WHERE crawl_id = ? AND url = ?", (f.crawl_id, u("y1"))
    ).fetchall()
    assert len(rows) == 1
    assert (
        conn.execute("SELECT target_id FROM link WHERE source_id = ?", (y0.id,)).fetchall() == rows
    )


def test_a_row_completed_twice_in_one_batch_is_accepted_once(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("")), disc(u("x"))], T0)
    leased = {x.url: x for x in f.lease("w1", 10, TTL, T0)}
    root, x = leased[u("")], leased[u("x")]
    outs = [outcome(root, children=[disc(u("y"))]), outcome(x), outcome(root, BROKEN)]
    assert f.complete("w1", outs, T0) == [True, True, False]
    assert conn.execute("SELECT class FROM result WHERE url_id = ?", (root.id,)).fetchone() == (
        "ok",
    )
    assert f.counts().pending == 1  # y


class _Async:
    """The synchronous ``Frontier`` behind the awaitable calls ``drain`` makes."""

    def __init__(self, f: Frontier) -> None:
        self._f = f

    async def lease(self, owner: str, limit: int, ttl_s: float, now: float) -> object:
        return self._f.lease(owner, limit, ttl_s, now)

    async def complete(self, owner: str, outcomes: object, now: float) -> object:
        return self._f.complete(owner, outcomes, now)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.one_of(st.none(), st.text()),
            st.one_of(st.none(), st.integers(min_value=-(2**53), max_value=2**53)),
        ),
        max_size=30,
    )
)
def test_rows_read_as_one_json_row_are_the_rows_a_cursor_reads(
    rows: list[tuple[int, str | None, int | None]],
) -> None:
    """``bulk.select``: the same values (integers, any text, NULL) in the query's order."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, a INTEGER, b TEXT, c INTEGER)")
    conn.executemany("INSERT INTO t (a, b, c) VALUES (?, ?, ?)", rows)
    query = "SELECT a, b, c FROM t WHERE seq > ? ORDER BY b DESC, seq"
    want = [list(row) for row in conn.execute(query, (0,))]
    assert bulk.select(conn, query, (0,), 3) == want
    assert bulk.select(conn, query, (len(rows),), 3) == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            # NUL too (JSON functions end a text there); no lone surrogate,
            # which executemany cannot bind.
            st.one_of(st.none(), st.text(st.characters(exclude_categories=["Cs"]))),
            st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False, allow_infinity=False)),
        ),
        max_size=30,
    )
)
@example([(1, "a\x00b", 0.5), (2, "\\u0000", True)])
def test_rows_inserted_from_one_json_array_are_the_rows_executemany_inserts(
    rows: list[tuple[int, str | None, bool | float | None]],
) -> None:
    """``bulk.insert``: the same values, of the same types, in the same order."""
    conn = sqlite3.connect(":memory:")
    for table in ("want", "got"):
        conn.execute(f"CREATE TABLE {table} (seq INTEGER PRIMARY KEY, a, b, c)")
    conn.executemany("INSERT INTO want (a, b, c) VALUES (?, ?, ?)", rows)
    bulk.insert(conn, "INSERT INTO got (a, b, c)", rows)
    query = "SELECT seq, a, typeof(a), b, typeof(b), c, typeof(c) FROM {} ORDER BY seq"
    got, want = (conn.execute(query.format(table)).fetchall() for table in ("got", "want"))
    assert got == want


def test_rows_with_a_nul_beside_a_lone_surrogate_keep_their_bytes() -> None:
    """Only the row no statement can bind goes through JSON, which ends a text at NUL."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, a TEXT)")
    rows = [("a\x00b",), ("\ud800",), ("c\x00d",), ("e",), ("f\x00",), ("g\x00h",)]
    bulk.insert(conn, "INSERT INTO t (a)", rows)  # statements of 4 (the surrogate's), 1, 1
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (6,)
    assert conn.execute("SELECT a FROM t WHERE seq <> 2 ORDER BY seq").fetchall() == [
        ("a\x00b",),
        ("c\x00d",),
        ("e",),
        ("f\x00",),
        ("g\x00h",),
    ]


def test_a_row_that_cannot_be_bound_costs_a_few_statements_not_one_a_row() -> None:
    """Its statement is tried again in smaller ones: its neighbours are still bound in bulk."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, a)")
    ran: list[str] = []
    conn.set_trace_callback(ran.append)  # statements stepped: a failed bind never is
    rows: list[tuple[object]] = [(i,) for i in range(334)]
    rows[0] = (2**70,)
    bulk.insert(conn, "INSERT INTO t (a)", rows)
    assert conn.execute("SELECT count(*), sum(a = seq - 1) FROM t").fetchone() == (334, 333)
    # 256 -> 64 -> 16 -> 4 -> the row alone through JSON; three of each size beside it; the rest.
    assert sum(statement.startswith("INSERT") for statement in ran) == 19


# Where the row that cannot be bound is, in statements of 256, 64, 4, 4, 4, 1 and 1 rows.
BAD_AT = [None, 0, 255, 256, 300, 333]


@pytest.mark.parametrize("bad_at", BAD_AT)
@pytest.mark.parametrize("bad", [("caf\udce9", 0), ("x", 2**70)], ids=["surrogate", "big-int"])
def test_a_batch_across_every_statement_size_is_inserted_once_in_order(
    bad_at: int | None, bad: tuple[str, int]
) -> None:
    """334 rows: statements of 256, 64, 4 and 1 rows, an upsert's tail, one row not bindable."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, k INTEGER UNIQUE, a, b)")
    conn.execute("INSERT INTO t (k, a, b) VALUES (5, 'old', 0)")
    rows: list[tuple[int, object, object]] = [
        (i, f"v{i}\x00" if i % 7 else None, i * 0.5 if i % 3 else i % 2 == 0) for i in range(334)
    ]
    if bad_at is not None:
        rows[bad_at] = (bad_at, *bad)
    upsert = "ON CONFLICT (k) DO UPDATE SET a = 'upserted'"
    bulk.insert(conn, "INSERT INTO t (k, a, b)", rows, upsert)
    # (The unbound row's text is not UTF-8 in the file: not read back.)
    read = "SELECT k, iif(k = ?, NULL, a) FROM t ORDER BY seq"
    got = conn.execute(read, (-1 if bad_at is None else bad_at,)).fetchall()
    # Once each, in order (5 kept its earlier row).
    assert [k for k, _ in got] == [5, *(k for k in range(334) if k != 5)]
    text = dict(got)
    assert text[5] == "upserted"
    for k in range(334):
        if k not in (5, bad_at):
            assert text[k] == rows[k][1]  # bound, alone if need be: NULs and all
    booleans = "SELECT b, typeof(b) FROM t WHERE k IN (3, 6) ORDER BY k"
    assert conn.execute(booleans).fetchall() == [(0, "integer"), (1, "integer")]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            # No NUL: SQLite 3.40's json_extract ends a string at \u0000, whichever encoder.
            st.one_of(st.none(), st.text(st.characters(codec="utf-8", exclude_characters="\x00"))),
            st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_rows_inserted_as_one_json_array_are_the_rows_executemany_inserts(
    rows: list[tuple[int, str | None, float | None, bool]],
) -> None:
    """``bulk.insert`` (orjson's text): the values ``executemany`` stores, in order."""
    conn = sqlite3.connect(":memory:")
    for table in ("bulk", "plain"):
        conn.execute(f"CREATE TABLE {table} (seq INTEGER PRIMARY KEY, a, b, c, d)")
    bulk.insert(conn, "INSERT INTO bulk (a, b, c, d)", rows)
    conn.executemany("INSERT INTO plain (a, b, c, d) VALUES (?, ?, ?, ?)", rows)
    read = "SELECT a, b, c, d FROM {} ORDER BY seq"
    assert (
        conn.execute(read.format("bulk")).fetchall()
        == conn.execute(read.format("plain")).fetchall()
    )


def test_values_orjson_refuses_still_go_through_json() -> None:
    """A lone surrogate (text decoded with surrogateescape) and an integer past 64 bits."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (a, b)")
    bulk.insert(conn, "INSERT INTO t (a, b)", [(2**70, "x"), (1, "caf\udce9")])
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)
    assert bulk.encode([1, "a"]) == '[1,"a"]'
