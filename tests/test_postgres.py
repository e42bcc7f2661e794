"""The PostgreSQL backend: the frontier contract, shared politeness, migrations.

A port of the key tests of ``test_frontier.py`` (same names, same expectations)
against ``PostgresFrontier``, plus what only many workers can show: leases
that are never shared, concurrent completions inserting the same URLs, and
host slots that hold across owners. Every test gets a fresh database
(``pgkit.pg_url``). End-to-end crawls through the CLI are in
``test_postgres_crawl.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest

from crawler.errors import ForeignDatabaseError
from crawler.models import Discovered, LeasedUrl, Outcome, Result, ResultClass, UrlKind, UrlState
from crawler.store import migrate
from crawler.store.postgres import crawls as pg_crawls
from crawler.store.postgres import schema
from crawler.store.postgres.frontier import PostgresFrontier
from crawler.store.postgres.gate import Want
from crawler.store.postgres.host_gate import SharedHostGate

from kit.pgkit import pg_url  # noqa: F401 - fixture

T0 = 1_000_000.0
TTL = 30.0
OK = Result(ResultClass.OK, status=200)
BROKEN = Result(ResultClass.BROKEN, status=404, error_kind="http_status", error="HTTP 404")


# -- helpers -------------------------------------------------------------------


class PG:
    """A migrated test database: a connection for looking, frontiers for working."""

    def __init__(self, url: str, conn: Any) -> None:
        self.url = url
        self.conn = conn
        self.stores: list[PostgresFrontier] = []

    async def frontier(
        self, config: dict[str, Any] | None = None, crawl_id: int | None = None, **options: Any
    ) -> PostgresFrontier:
        if crawl_id is None:
            crawl_id = await pg_crawls.create(self.conn, ["http://a.test/"], config or {}, T0)
        store = await asyncio.to_thread(PostgresFrontier.connect, self.url, crawl_id, **options)
        self.stores.append(store)
        return store

    async def rows(self, crawl_id: int | None = None) -> dict[str, Row]:
        sql = (
            "SELECT u.url, u.id, u.kind, u.state, u.depth, u.hop, u.attempts, u.next_attempt_at, "
            "u.lease_owner, u.lease_expires_at, h.name FROM url u "
            "LEFT JOIN host h ON h.id = u.host_id"
        )
        if crawl_id is None:
            found = await self.conn.fetch(sql)
        else:
            found = await self.conn.fetch(sql + " WHERE u.crawl_id = $1", crawl_id)
        return {r[0]: Row(*r[1:]) for r in found}

    async def links(self) -> set[tuple[str, str, str, str]]:
        return {
            tuple(r)
            for r in await self.conn.fetch(
                "SELECT s.url, t.url, l.element, l.fragment FROM link l "
                "JOIN url s ON s.id = l.source_id JOIN url t ON t.id = l.target_id"
            )
        }

    async def results(self) -> dict[str, tuple[Any, ...]]:
        return {
            r[0]: tuple(r[1:])
            for r in await self.conn.fetch(
                "SELECT u.url, r.class, r.status, r.error, t.url FROM result r "
                "JOIN url u ON u.id = r.url_id LEFT JOIN url t ON t.id = r.redirect_to_id"
            )
        }

    async def crawl_state(self, crawl_id: int) -> tuple[str, float | None]:
        row = await self.conn.fetchrow(
            "SELECT state, finished_at FROM crawl WHERE id = $1", crawl_id
        )
        return row[0], row[1]

    async def view(self, name: str, crawl_id: int) -> list[dict[str, Any]]:
        return [
            dict(r)
            for r in await self.conn.fetch(f"SELECT * FROM {name} WHERE crawl_id = $1", crawl_id)
        ]


@dataclass(frozen=True)
class Row:
    id: int
    kind: int
    state: int
    depth: int
    hop: int
    attempts: int
    next_attempt_at: float
    lease_owner: str | None
    lease_expires_at: float | None
    host: str | None


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[PG]:  # noqa: F811 - the fixture
    conn = await asyncpg.connect(pg_url)
    await schema.apply_migrations(conn)
    db = PG(pg_url, conn)
    try:
        yield db
    finally:
        await conn.close()
        for store in db.stores:
            await asyncio.to_thread(store.close)


def disc(
    url: str,
    kind: UrlKind = UrlKind.PAGE,
    *,
    element: str = "a",
    fragment: str = "",
    result: ResultClass | None = None,
    reason: str | None = None,
) -> Discovered:
    host = url.split("/")[2] if url.startswith("http") else None
    return Discovered(
        url=url,
        host=host,
        kind=kind,
        element=element,
        fragment=fragment,
        result=result,
        reason=reason,
    )


def u(path: str) -> str:
    return f"http://a.test/{path}"


def outcome(
    leased: LeasedUrl,
    result: Result | None = OK,
    children: Iterable[Discovered] = (),
    redirect_to: Discovered | None = None,
    retry_at: float | None = None,
    anchors: frozenset[str] | None = None,
) -> Outcome:
    return Outcome(
        leased=leased,
        result=result,
        retry_at=retry_at,
        children=list(children),
        redirect_to=redirect_to,
        anchors=anchors,
    )


@dataclass
class Plan:
    """What each URL answers when ``drain`` fetches it (default 200 OK, no links)."""

    results: dict[str, Result] = field(default_factory=dict)
    children: dict[str, list[Discovered]] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)


async def drain(f: PostgresFrontier, plan: Plan, owner: str = "w1", now: float = T0) -> None:
    """Lease and complete until nothing is leasable: a whole crawl."""
    for _ in range(100):
        got = await f.lease(owner, 1000, TTL, now)
        if not got:
            return
        outs = []
        for leased in got:
            target = plan.redirects.get(leased.url)
            if target is not None:
                res = Result(ResultClass.REDIRECTED, status=301)
                outs.append(outcome(leased, res, redirect_to=disc(target, leased.kind)))
            else:
                res = plan.results.get(leased.url, OK)
                outs.append(outcome(leased, res, children=plan.children.get(leased.url, ())))
        assert all(await f.complete(owner, outs, now))
    raise AssertionError("drain did not converge")


# -- dedup -----------------------------------------------------------------------


async def test_enqueue_same_key_twice_gives_one_row(pg: PG) -> None:
    f = await pg.frontier()
    assert await f.enqueue([disc(u("")), disc(u(""))], T0) == 1
    assert await f.enqueue([disc(u(""))], T0) == 0
    again = await pg.frontier(crawl_id=f.crawl_id)  # empty caches: the UNIQUE key decides
    assert await again.enqueue([disc(u("")), disc(u("x"))], T0) == 1
    rows = await pg.rows()
    assert sorted(rows) == [u(""), u("x")]
    assert all(r.depth == 0 and r.state == UrlState.PENDING for r in rows.values())


async def test_same_url_in_two_crawls_is_two_rows(pg: PG) -> None:
    first, second = await pg.frontier(), await pg.frontier()
    assert await first.enqueue([disc(u(""))], T0) == 1
    assert await second.enqueue([disc(u(""))], T0) == 1
    assert len(await pg.rows(first.crawl_id)) == 1
    assert len(await pg.rows(second.crawl_id)) == 1


async def test_child_found_by_two_pages_in_one_batch_is_one_url_two_links(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p1")), disc(u("p2"))], T0)
    p1, p2 = await f.lease("w1", 10, TTL, T0)
    child = u("shared")
    accepted = await f.complete(
        "w1",
        [
            outcome(p1, children=[disc(child), disc(u("p2"))]),
            outcome(p2, children=[disc(child, element="img"), disc(child, fragment="top")]),
        ],
        T0,
    )
    assert accepted == [True, True]
    table = await pg.rows()
    assert sorted(table) == [u("p1"), u("p2"), child]
    assert table[child].depth == 1
    assert table[child].state == UrlState.PENDING
    assert table[u("p2")].depth == 0
    assert await pg.links() == {
        (u("p1"), child, "a", ""),
        (u("p1"), u("p2"), "a", ""),
        (u("p2"), child, "img", ""),
        (u("p2"), child, "a", "top"),
    }


async def test_child_dedup_survives_a_tiny_seen_cache(pg: PG) -> None:
    f = await pg.frontier()
    f._recorder._seen_cap = 1
    await f.enqueue([disc(u("p"))], T0)
    (page,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u(f"c{i % 4}")) for i in range(12)]
    assert await f.complete("w1", [outcome(page, children=kids)], T0) == [True]
    assert sorted(await pg.rows()) == sorted({u("p")} | {k.url for k in kids})
    assert len(await pg.links()) == 4


# -- leases ----------------------------------------------------------------------


async def test_lease_takes_shallowest_then_oldest_up_to_limit(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("a"))], T0)
    (a,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("c1")), disc(u("c2")), disc(u("c3"))]
    await f.complete("w1", [outcome(a, children=kids)], T0)
    await f.enqueue([disc(u("b"))], T0)
    first = await f.lease("w1", 2, TTL, T0)
    assert {x.url: x.depth for x in first} == {u("b"): 0, u("c1"): 1}
    assert [x.url for x in await f.lease("w1", 1, TTL, T0)] == [u("c2")]
    assert [x.url for x in await f.lease("w1", 5, TTL, T0)] == [u("c3")]
    assert await f.lease("w1", 5, TTL, T0) == []


async def test_lease_fills_in_the_leased_row(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc("http://b.test:8080/x", UrlKind.CHECK)], T0)
    (x,) = await f.lease("w1", 10, TTL, T0)
    assert (x.url, x.host, x.kind, x.depth, x.hop, x.attempts) == (
        "http://b.test:8080/x",
        "b.test:8080",
        UrlKind.CHECK,
        0,
        0,
        0,
    )
    row = (await pg.rows())[x.url]
    assert (row.state, row.lease_owner, row.lease_expires_at) == (UrlState.LEASED, "w1", T0 + TTL)


async def test_a_lease_is_not_handed_out_twice(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(str(i))) for i in range(5)], T0)
    mine = await f.lease("x", 3, TTL, T0)
    theirs = await f.lease("y", 10, TTL, T0)
    assert (len(mine), len(theirs)) == (3, 2)
    assert {m.id for m in mine}.isdisjoint({t.id for t in theirs})
    assert await f.lease("y", 10, TTL, T0) == []
    assert await f.lease("y", 10, TTL, T0 + TTL * 10) == []  # expired, not reclaimed
    owners = sorted(r.lease_owner or "" for r in (await pg.rows()).values())
    assert owners == ["x", "x", "x", "y", "y"]


async def test_concurrent_leases_from_many_workers_never_overlap(pg: PG) -> None:
    seed = await pg.frontier()
    await seed.enqueue([disc(u(str(i))) for i in range(600)], T0)
    workers = [await pg.frontier(crawl_id=seed.crawl_id) for _ in range(4)]

    async def take(f: PostgresFrontier, owner: str) -> list[int]:
        got: list[int] = []
        while batch := await f.lease(owner, 7, TTL, T0):
            got += [x.id for x in batch]
        return got

    taken = await asyncio.gather(*(take(f, f"w{i}") for i, f in enumerate(workers)))
    every = [i for ids in taken for i in ids]
    assert len(every) == len(set(every)) == 600


async def test_renew_extends_only_this_owners_leases(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    await f.lease("x", 1, TTL, T0)
    await f.lease("y", 1, TTL, T0)
    assert await f.renew("x", TTL, T0 + 20) == 1
    assert await f.reclaim(T0 + TTL + 1, stale_after_s=3600) == 1
    table = await pg.rows()
    assert (table[u("a")].lease_owner, table[u("a")].lease_expires_at) == ("x", T0 + 20 + TTL)
    assert table[u("b")].state == UrlState.PENDING


async def test_release_returns_leases_untouched(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    await f.lease("x", 1, TTL, T0)
    await f.lease("y", 1, TTL, T0)
    assert await f.release("x") == 1
    table = await pg.rows()
    a = table[u("a")]
    assert (a.state, a.lease_owner, a.attempts) == (UrlState.PENDING, None, 0)
    assert table[u("b")].lease_owner == "y"


# -- completion ------------------------------------------------------------------


async def test_complete_marks_done_with_children_and_result(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(""))], T0)
    (root,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("page")), disc("http://elsewhere.test/x", UrlKind.CHECK, element="img")]
    assert await f.complete("w1", [outcome(root, children=kids)], T0 + 1) == [True]
    table = await pg.rows()
    assert (table[u("")].state, table[u("")].lease_owner, table[u("")].attempts) == (
        UrlState.DONE,
        None,
        1,
    )
    assert table["http://elsewhere.test/x"].kind == UrlKind.CHECK
    assert table["http://elsewhere.test/x"].host == "elsewhere.test"
    assert await pg.results() == {u(""): ("ok", 200, None, None)}
    assert await pg.conn.fetchval("SELECT checked_at FROM result") == T0 + 1


async def test_complete_by_wrong_owner_is_rejected_and_writes_nothing(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(""))], T0)
    (root,) = await f.lease("x", 10, TTL, T0)
    before = await pg.rows()
    stale = [
        outcome(root, children=[disc(u("child"))], redirect_to=disc(u("moved"))),
        outcome(root, result=None, retry_at=T0 + 5),
    ]
    assert await f.complete("y", stale, T0) == [False, False]
    assert await pg.rows() == before
    assert await pg.links() == set()
    assert await pg.results() == {}
    assert await f.complete("x", [outcome(root)], T0) == [True]


async def test_complete_after_lease_reclaimed_by_another_owner_is_rejected(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a_x, b_x = await f.lease("x", 10, TTL, T0)
    later = T0 + TTL + 1
    assert await f.reclaim(later, stale_after_s=3600) == 2
    a_y, b_y = await f.lease("y", 10, TTL, later)
    assert (a_y.id, b_y.id) == (a_x.id, b_x.id)
    before = await pg.rows()
    accepted = await f.complete(
        "x",
        [outcome(a_x, children=[disc(u("from-x"))]), outcome(b_x, result=None, retry_at=later)],
        later,
    )
    assert accepted == [False, False]
    assert await pg.rows() == before
    assert await pg.links() == set()
    assert await pg.results() == {}
    accepted = await f.complete(
        "y", [outcome(a_y), outcome(a_y, children=[disc(u("late"))])], later
    )
    assert accepted == [True, False]
    table = await pg.rows()
    assert u("late") not in table
    assert table[u("a")].state == UrlState.DONE


async def test_expired_lease_not_yet_reclaimed_still_completes(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("a"))], T0)
    (a,) = await f.lease("x", 10, TTL, T0)
    assert await f.complete("x", [outcome(a)], T0 + TTL * 3) == [True]
    assert (await pg.rows())[u("a")].state == UrlState.DONE


async def test_retry_puts_row_back_pending_until_due(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a, b = await f.lease("w1", 10, TTL, T0)
    due = T0 + 60
    outs = [outcome(a, None, retry_at=due), outcome(b, None)]
    assert await f.complete("w1", outs, T0 + 1) == [True, True]
    table = await pg.rows()
    ra = table[u("a")]
    assert (ra.state, ra.attempts, ra.next_attempt_at, ra.lease_owner) == (
        UrlState.PENDING,
        1,
        due,
        None,
    )
    assert table[u("b")].next_attempt_at == T0 + 1
    assert await pg.results() == {}
    assert [x.url for x in await f.lease("w1", 10, TTL, T0 + 2)] == [u("b")]
    assert await f.lease("w1", 10, TTL, due - 0.001) == []
    assert await f.next_wake_at() is not None
    (again,) = await f.lease("w1", 10, TTL, due)
    assert (again.url, again.attempts) == (u("a"), 1)


async def test_concurrent_completions_inserting_the_same_urls(pg: PG) -> None:
    """Workers finding the same children at once: one row each, every link, no error."""
    seed = await pg.frontier()
    await seed.enqueue([disc(u(f"p{i}")) for i in range(40)], T0)
    workers = [await pg.frontier(crawl_id=seed.crawl_id) for _ in range(4)]
    shared = [disc(u(f"c{i}")) for i in range(300)]

    async def work(f: PostgresFrontier, owner: str) -> None:
        while batch := await f.lease(owner, 3, TTL, T0):
            outs = [outcome(x, children=_children(x, shared)) for x in batch]
            assert all(await f.complete(owner, outs, T0))

    await asyncio.gather(*(work(f, f"w{i}") for i, f in enumerate(workers)))
    table = await pg.rows()
    assert len(table) == 340
    assert all(r.state == UrlState.DONE for r in table.values())
    assert len(await pg.links()) == 40 * 300


def _children(row: LeasedUrl, shared: list[Discovered]) -> list[Discovered]:
    """Seeds link to every shared URL, half of them in reverse order."""
    if row.depth:
        return []
    return shared[::-1] if row.id % 2 else shared


# -- quiescence ------------------------------------------------------------------


async def test_finish_if_quiescent(pg: PG) -> None:
    f = await pg.frontier()
    other = await pg.frontier()
    await other.enqueue([disc(u("other-crawl"))], T0)
    await f.enqueue([disc(u("a"))], T0)
    assert await f.finish_if_quiescent(T0) is False
    (a,) = await f.lease("w1", 10, TTL, T0)
    assert await f.finish_if_quiescent(T0) is False
    assert await f.finish_if_quiescent(T0 + TTL * 5) is False
    assert await pg.crawl_state(f.crawl_id) == ("running", None)
    assert await f.complete("w1", [outcome(a, None, retry_at=T0 + 500)], T0) == [True]
    assert await f.finish_if_quiescent(T0 + 1) is False
    (a,) = await f.lease("w1", 10, TTL, T0 + 500)
    assert await f.complete("w1", [outcome(a, children=[disc(u("b"))])], T0 + 500) == [True]
    assert await f.finish_if_quiescent(T0 + 501) is False
    await drain(f, Plan(), now=T0 + 600)
    assert await f.finish_if_quiescent(T0 + 700) is True
    assert await pg.crawl_state(f.crawl_id) == ("finished", T0 + 700)
    assert await f.finish_if_quiescent(T0 + 800) is True
    assert await pg.crawl_state(f.crawl_id) == ("finished", T0 + 700)
    assert await pg.crawl_state(other.crawl_id) == ("running", None)


async def test_quiescence_is_never_seen_while_another_worker_completes(pg: PG) -> None:
    """A chain crawled by one worker while another asks "finished?" in a tight loop."""
    f = await pg.frontier()
    watcher = await pg.frontier(crawl_id=f.crawl_id)
    await f.enqueue([disc(u("0"))], T0)

    async def crawl() -> None:
        for i in range(60):
            (row,) = await f.lease("w1", 10, TTL, T0)
            kids = [disc(u(str(i + 1)))] if i < 59 else []
            assert await f.complete("w1", [outcome(row, children=kids)], T0) == [True]

    async def watch() -> None:
        while not await watcher.finish_if_quiescent(T0):
            pass
        # Seen finished: the whole chain must be there and done, nothing to come.
        states = [r.state for r in (await pg.rows()).values()]
        assert states == [UrlState.DONE] * 60

    await asyncio.gather(crawl(), watch())
    assert await watcher.finish_if_quiescent(T0) is True


# -- reclaim ---------------------------------------------------------------------


async def test_reclaim_returns_only_expired_leases(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(str(i))) for i in range(3)], T0)
    await f.lease("x", 2, TTL, T0)
    (late,) = await f.lease("y", 1, TTL, T0 + 20)
    assert await f.reclaim(T0 + TTL - 0.1, stale_after_s=3600) == 0
    assert await f.reclaim(T0 + 40, stale_after_s=3600) == 2
    table = await pg.rows()
    assert [url for url, r in table.items() if r.state == UrlState.LEASED] == [late.url]
    pending = [r for r in table.values() if r.state == UrlState.PENDING]
    assert all(r.lease_owner is None and r.lease_expires_at is None for r in pending)
    assert all(r.attempts == 0 for r in pending)
    assert await f.reclaim(T0 + 40, stale_after_s=3600) == 0


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def _add_worker(pg: PG, crawl_id: int, token: str, pid: int, heartbeat_at: float) -> None:
    await pg.conn.execute(
        "INSERT INTO worker (token, crawl_id, pid, hostname, started_at, heartbeat_at) "
        "VALUES ($1, $2, $3, $4, $5, $5)",
        token,
        crawl_id,
        pid,
        socket.gethostname(),
        heartbeat_at,
    )


async def test_reclaim_returns_leases_of_dead_workers(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u(str(i))) for i in range(4)], T0)
    await _add_worker(pg, f.crawl_id, "dead", _dead_pid(), T0)
    await _add_worker(pg, f.crawl_id, "alive", os.getppid(), T0)
    await _add_worker(pg, f.crawl_id, "silent", os.getppid(), T0 - 1000)
    await f.register_worker("me", T0)
    try:
        dead = await f.lease("dead", 1, 3600, T0)
        alive = await f.lease("alive", 1, 3600, T0)
        silent = await f.lease("silent", 1, 3600, T0)
        mine = await f.lease("me", 1, 3600, T0)
        assert await f.reclaim(T0 + 1, stale_after_s=100) == 2
        table = await pg.rows()
        assert table[dead[0].url].state == UrlState.PENDING
        assert table[silent[0].url].state == UrlState.PENDING
        assert table[alive[0].url].lease_owner == "alive"
        assert table[mine[0].url].lease_owner == "me"
        workers = {r[0] for r in await pg.conn.fetch("SELECT token FROM worker")}
        assert workers == {"alive", "me"}
    finally:
        await f.release("me")


async def test_worker_row_with_our_pid_but_unknown_token_is_dead(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("a"))], T0)
    await _add_worker(pg, f.crawl_id, "earlier-life", os.getpid(), T0)
    await f.lease("earlier-life", 1, 3600, T0)
    assert await f.reclaim(T0, stale_after_s=3600) == 1
    assert (await pg.rows())[u("a")].state == UrlState.PENDING


# -- kinds -----------------------------------------------------------------------


async def _with_check_child(pg: PG, url: str) -> PostgresFrontier:
    f = await pg.frontier()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    assert await f.complete("w1", [outcome(p, children=[disc(url, UrlKind.CHECK)])], T0) == [True]
    assert (await pg.rows())[url].kind == UrlKind.CHECK
    return f


async def test_check_found_again_as_page_becomes_page(pg: PG) -> None:
    f = await _with_check_child(pg, u("x"))
    await f.enqueue([disc(u("q"))], T0)
    (q,) = await f.lease("w1", 1, TTL, T0)
    outs = [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])]
    assert await f.complete("w1", outs, T0) == [True]
    row = (await pg.rows())[u("x")]
    assert (row.kind, row.state, row.depth) == (UrlKind.PAGE, UrlState.PENDING, 1)
    assert len(await pg.rows()) == 3
    (x,) = await f.lease("w1", 10, TTL, T0)
    assert x.kind == UrlKind.PAGE


async def test_upgrade_takes_the_smaller_depth(pg: PG) -> None:
    f = await _with_check_child(pg, u("x"))
    await f.enqueue([disc(u("x"), UrlKind.PAGE)], T0)
    row = (await pg.rows())[u("x")]
    assert (row.kind, row.depth) == (UrlKind.PAGE, 0)


async def test_upgrade_works_without_the_seen_cache(pg: PG) -> None:
    f = await _with_check_child(pg, u("x"))
    resumed = await pg.frontier(crawl_id=f.crawl_id)
    await resumed.enqueue([disc(u("q"))], T0)
    (q,) = await resumed.lease("w1", 1, TTL, T0)
    await resumed.complete("w1", [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])], T0)
    assert (await pg.rows())[u("x")].kind == UrlKind.PAGE


async def test_kinds_only_ever_grow_check_anchors_page(pg: PG) -> None:
    f = await _with_check_child(pg, u("x"))
    seen = []
    for kind in (UrlKind.ANCHORS, UrlKind.CHECK, UrlKind.PAGE, UrlKind.ANCHORS, UrlKind.CHECK):
        await f.enqueue([disc(u("x"), kind)], T0)
        seen.append(UrlKind((await pg.rows())[u("x")].kind))
    assert seen == [UrlKind.ANCHORS, UrlKind.ANCHORS, UrlKind.PAGE, UrlKind.PAGE, UrlKind.PAGE]
    assert len(await pg.rows()) == 2


async def test_kinds_found_in_one_batch_fold_like_one_at_a_time(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("x"), UrlKind.CHECK), disc(u("x"), UrlKind.ANCHORS), disc(u("x"), UrlKind.CHECK)]
    assert await f.complete("w1", [outcome(p, children=kids)], T0) == [True]
    row = (await pg.rows())[u("x")]
    assert (row.kind, row.depth, row.state) == (UrlKind.ANCHORS, 1, UrlState.PENDING)


async def test_page_found_again_as_check_stays_page(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p")), disc(u("x"))], T0)
    p, x = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(x)], T0)
    await f.complete("w1", [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])], T0)
    row = (await pg.rows())[u("x")]
    assert (row.kind, row.state) == (UrlKind.PAGE, UrlState.DONE)


async def test_check_done_then_found_as_page_goes_back_to_pending(pg: PG) -> None:
    f = await _with_check_child(pg, u("x"))
    (x,) = await f.lease("w1", 10, TTL, T0)
    assert await f.complete("w1", [outcome(x)], T0) == [True]
    assert await f.finish_if_quiescent(T0) is True
    await f.enqueue([disc(u("x"), UrlKind.PAGE)], T0 + 1)
    row = (await pg.rows())[u("x")]
    assert (row.kind, row.state) == (UrlKind.PAGE, UrlState.PENDING)
    (again,) = await f.lease("w1", 10, TTL, T0 + 1)
    assert (again.url, again.kind) == (u("x"), UrlKind.PAGE)
    outs = [outcome(again, children=[disc(u("deeper"))])]
    assert await f.complete("w1", outs, T0 + 1) == [True]
    assert (u("x"), u("deeper"), "a", "") in await pg.links()


async def test_check_upgraded_while_leased_returns_to_pending_on_completion(pg: PG) -> None:
    f = await _with_check_child(pg, u("x"))
    (x,) = await f.lease("x-holder", 10, TTL, T0)
    await f.enqueue([disc(u("q"))], T0)
    (q,) = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])], T0)
    row = (await pg.rows())[u("x")]
    assert (row.kind, row.state, row.lease_owner) == (UrlKind.PAGE, UrlState.LEASED, "x-holder")
    assert await f.complete("x-holder", [outcome(x)], T0 + 1) == [True]
    row = (await pg.rows())[u("x")]
    assert (row.kind, row.state, row.lease_owner) == (UrlKind.PAGE, UrlState.PENDING, None)
    assert await f.finish_if_quiescent(T0 + 1) is False


# -- skip rows, max_urls, redirects ------------------------------------------------------


async def test_skip_children_are_stored_done_with_their_result(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    mail = disc("mailto:a@b.test", UrlKind.SKIP, result=ResultClass.SKIPPED, reason="scheme mailto")
    excluded = disc(
        u("private"), UrlKind.SKIP, result=ResultClass.EXCLUDED, reason="matches --exclude"
    )
    assert await f.complete("w1", [outcome(p, children=[mail, excluded, mail])], T0 + 2) == [True]
    table = await pg.rows()
    for url in (mail.url, excluded.url):
        assert (table[url].kind, table[url].state) == (UrlKind.SKIP, UrlState.DONE)
    assert table[mail.url].host is None
    got = await pg.results()
    assert got[mail.url] == ("skipped", None, "scheme mailto", None)
    assert got[excluded.url] == ("excluded", None, "matches --exclude", None)
    assert await f.finish_if_quiescent(T0 + 2) is True
    await f.enqueue([disc(excluded.url, UrlKind.PAGE)], T0 + 3)
    row = (await pg.rows())[excluded.url]
    assert (row.kind, row.state) == (UrlKind.SKIP, UrlState.DONE)


async def test_max_urls_stops_new_urls_but_links_existing_ones(pg: PG) -> None:
    f = await pg.frontier(max_urls=3)
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("a")), disc(u("b")), disc(u("c")), disc(u("p"))]
    assert await f.complete("w1", [outcome(p, children=kids)], T0) == [True]
    assert sorted(await pg.rows()) == [u("a"), u("b"), u("p")]
    assert await pg.links() == {(u("p"), x, "a", "") for x in (u("a"), u("b"), u("p"))}
    a = next(x for x in await f.lease("w1", 10, TTL, T0) if x.url == u("a"))
    outs = [outcome(a, children=[disc(u("b")), disc(u("d"))])]
    assert await f.complete("w1", outs, T0) == [True]
    assert len(await pg.rows()) == 3
    assert await f.enqueue([disc(u("seed2"))], T0) == 0
    capped = await pg.frontier(crawl_id=f.crawl_id, max_urls=3)
    assert await capped.enqueue([disc(u("seed3"))], T0) == 0
    roomier = await pg.frontier(crawl_id=f.crawl_id, max_urls=4)
    assert await roomier.enqueue([disc(u("seed3"))], T0) == 1


async def test_kind_upgrade_does_not_count_against_max_urls(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p")), disc(u("q"))], T0)
    (p,) = await f.lease("w1", 1, TTL, T0)
    await f.complete("w1", [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])], T0)
    resumed = await pg.frontier(crawl_id=f.crawl_id, max_urls=4)
    (q,) = await resumed.lease("w1", 1, TTL, T0)
    children = [disc(u("x"), UrlKind.PAGE), disc(u("y"))]
    assert await resumed.complete("w1", [outcome(q, children=children)], T0) == [True]
    table = await pg.rows()
    assert table[u("x")].kind == UrlKind.PAGE
    assert sorted(table) == [u("p"), u("q"), u("x"), u("y")]


async def test_redirect_creates_target_one_hop_further(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(p, children=[disc(u("old"))])], T0)
    (old,) = await f.lease("w1", 10, TTL, T0)
    moved = Result(ResultClass.REDIRECTED, status=301)
    outs = [outcome(old, moved, redirect_to=disc(u("new")))]
    assert await f.complete("w1", outs, T0) == [True]
    table = await pg.rows()
    assert (table[u("new")].depth, table[u("new")].hop) == (1, 1)
    assert (u("old"), u("new"), "redirect", "") in await pg.links()
    assert (await pg.results())[u("old")] == ("redirected", 301, None, u("new"))


async def test_max_cache_age_reuses_an_earlier_crawls_ok_result(pg: PG) -> None:
    first = await pg.frontier()
    await first.enqueue([disc(u("p"))], T0)
    (p,) = await first.lease("w1", 10, TTL, T0)
    kids = [disc(u("fine"), UrlKind.CHECK), disc(u("bad"), UrlKind.CHECK)]
    await first.complete("w1", [outcome(p, children=kids)], T0)
    await drain(first, Plan(results={u("bad"): BROKEN}))
    second = await pg.frontier(max_cache_age_s=3600)
    await second.enqueue([disc(u("p"))], T0 + 10)
    (p2,) = await second.lease("w1", 10, TTL, T0 + 10)
    await second.complete("w1", [outcome(p2, children=kids)], T0 + 10)
    table = await pg.rows(second.crawl_id)
    assert table[u("fine")].state == UrlState.DONE  # reused: not requested again
    assert table[u("bad")].state == UrlState.PENDING  # broken results are never reused


# -- report views ----------------------------------------------------------------


async def test_broken_child_with_two_sources(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p1")), disc(u("p2"))], T0)
    dead = u("dead")
    plan = Plan(
        results={dead: BROKEN},
        children={
            u("p1"): [disc(dead, UrlKind.CHECK), disc(u("fine"), UrlKind.CHECK)],
            u("p2"): [disc(dead, UrlKind.CHECK, element="img", fragment="f")],
        },
    )
    await drain(f, plan)
    got = {
        (r["url"], r["status"], r["error"], r["source"], r["element"], r["fragment"])
        for r in await pg.view("broken_links", f.crawl_id)
    }
    assert got == {
        (dead, 404, "HTTP 404", u("p1"), "a", ""),
        (dead, 404, "HTTP 404", u("p2"), "img", "f"),
    }


async def test_redirect_chain_to_a_broken_url(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p"))], T0)
    a, b, c = u("a"), u("b"), u("c")
    plan = Plan(
        results={c: BROKEN}, children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: c}
    )
    await drain(f, plan)
    res = {r["url"]: r for r in await pg.view("resolved", f.crawl_id)}
    assert res[a]["class"] == "broken"
    assert c in res[a]["error"]
    assert (res[a]["final_url"], res[a]["redirects"], res[a]["status"]) == (c, 2, 404)
    broken = [(r["url"], r["source"]) for r in await pg.view("broken_links", f.crawl_id)]
    assert broken == [(a, u("p"))]
    redirects = {
        r["url"]: (r["redirect_to"], r["final_url"], r["hops"], r["is_loop"])
        for r in await pg.view("redirects", f.crawl_id)
    }
    assert redirects == {a: (b, c, 2, False), b: (c, c, 1, False)}


async def test_redirect_loop_is_broken(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p"))], T0)
    a, b = u("a"), u("b")
    plan = Plan(children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: a})
    await drain(f, plan)
    res = {r["url"]: r for r in await pg.view("resolved", f.crawl_id)}
    for url in (a, b):
        assert (res[url]["class"], res[url]["error"]) == ("broken", "redirect loop")
    broken = [
        (r["url"], r["source"], r["error"]) for r in await pg.view("broken_links", f.crawl_id)
    ]
    assert broken == [(a, u("p"), "redirect loop")]


@pytest.mark.parametrize(
    ("config", "expected_class"),
    [({"max_redirects": 2}, "broken"), ({"max_redirects": 3}, "redirected"), ({}, "redirected")],
)
async def test_redirect_chain_longer_than_max_redirects(
    pg: PG, config: dict[str, Any], expected_class: str
) -> None:
    f = await pg.frontier(config)
    await f.enqueue([disc(u("p"))], T0)
    a, b, c, d = (u(x) for x in "abcd")
    plan = Plan(children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: c, c: d})
    await drain(f, plan)
    res = {r["url"]: r for r in await pg.view("resolved", f.crawl_id)}
    assert (res[a]["redirects"], res[a]["final_url"], res[a]["class"]) == (3, d, expected_class)
    broken = [(r["url"], r["error"]) for r in await pg.view("broken_links", f.crawl_id)]
    assert broken == ([(a, "too many redirects (3)")] if expected_class == "broken" else [])


async def test_missing_fragment_is_a_broken_link(pg: PG) -> None:
    f = await pg.frontier()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    kids = [
        disc(u("t"), UrlKind.ANCHORS, fragment="here"),
        disc(u("t"), UrlKind.ANCHORS, fragment="gone"),
    ]
    await f.complete("w1", [outcome(p, children=kids)], T0)
    (t,) = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(t, anchors=frozenset({"here"}))], T0)
    rows = await pg.view("broken_fragments", f.crawl_id)
    assert [(r["url"], r["source"]) for r in rows] == [(u("t") + "#gone", u("p"))]


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


async def test_shared_gates_of_two_workers_never_exceed_the_host_limit(pg: PG) -> None:
    f = await pg.frontier()
    woken = asyncio.Event()
    gates = [
        SharedHostGate(f, owner, lambda host: (3, 0.0), ttl_s=TTL, wake=woken.set)
        for owner in ("a", "b")
    ]
    held = [0, 0]

    async def take(i: int, rounds: int) -> None:
        for _ in range(rounds):
            if gates[i].try_acquire("h.test"):
                held[i] += 1
                assert sum(held) <= 3
            await asyncio.sleep(0.005)

    await asyncio.gather(take(0, 40), take(1, 40))
    assert sum(held) == 3
    for _ in range(held[0]):
        gates[0].release("h.test")
    held[0] = 0
    await take(1, 30)
    assert held[1] == 2  # a still counts as wanting the host: b gets its fair share
    await gates[0].aclose()
    await f.release("a")  # a worker that stops gives its place up
    await take(1, 30)
    assert held[1] == 3
    for i, gate in enumerate(gates):
        for _ in range(held[i]):
            gate.release("h.test")
        await gate.aclose()
    assert await pg.conn.fetchval("SELECT COALESCE(sum(in_flight), 0) FROM host_slot") == 0


# -- schema ----------------------------------------------------------------------


async def test_migrations_are_recorded_and_idempotent(pg: PG) -> None:
    versions = [r[0] for r in await pg.conn.fetch("SELECT version FROM _migrations ORDER BY 1")]
    assert versions == [v for v, _, _ in migrate.available("postgresql")]
    assert await schema.apply_migrations(pg.conn) == migrate.latest_version("postgresql")
    views = {
        r[0]
        for r in await pg.conn.fetch(
            "SELECT table_name FROM information_schema.views WHERE table_schema = 'public'"
        )
    }
    assert {"url_result", "resolved", "broken_links", "redirects", "broken_fragments"} <= views


async def test_a_newer_schema_is_refused(pg: PG) -> None:
    await pg.conn.execute("INSERT INTO _migrations VALUES (999, '0999_future', 0)")
    with pytest.raises(ForeignDatabaseError, match="newer crawler"):
        await schema.apply_migrations(pg.conn)


async def test_a_foreign_database_is_refused(pg_url: str) -> None:  # noqa: F811 - the fixture
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("CREATE TABLE url (id int)")
        with pytest.raises(ForeignDatabaseError, match="not a crawler database"):
            await schema.apply_migrations(conn)
    finally:
        await conn.close()


async def test_workers_starting_together_migrate_once(pg_url: str) -> None:  # noqa: F811
    conns = [await asyncpg.connect(pg_url) for _ in range(4)]
    try:
        latest = migrate.latest_version("postgresql")
        assert await asyncio.gather(*(schema.apply_migrations(c) for c in conns)) == [latest] * 4
    finally:
        for conn in conns:
            await conn.close()
