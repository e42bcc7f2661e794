"""Unit tests of the SQLite frontier: dedup, leases, completion, quiescence, views.

Every test runs against a real database file in ``tmp_path``. Time is passed
explicitly (``now``), so lease expiry and retry schedules are exact.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crawler.models import Discovered, LeasedUrl, Outcome, Result, ResultClass, UrlKind, UrlState
from crawler.store.sqlite import crawls
from crawler.store.sqlite.db import open_database
from crawler.store.sqlite.frontier import Frontier

T0 = 1_000_000.0
TTL = 30.0
OK = Result(ResultClass.OK, status=200)


# -- helpers -------------------------------------------------------------------


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = open_database(tmp_path / "crawl.db")
    yield c
    c.close()


def new_frontier(
    conn: sqlite3.Connection, config: dict[str, Any] | None = None, **options: Any
) -> Frontier:
    crawl_id = crawls.create(conn, ["http://a.test/"], config or {}, T0)
    return Frontier(conn, crawl_id, **options)


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


def rows(conn: sqlite3.Connection, crawl_id: int | None = None) -> dict[str, Row]:
    sql = (
        "SELECT u.url, u.id, u.kind, u.state, u.depth, u.hop, u.attempts, u.next_attempt_at, "
        "u.lease_owner, u.lease_expires_at, h.name FROM url u LEFT JOIN host h ON h.id = u.host_id"
    )
    params: tuple[Any, ...] = ()
    if crawl_id is not None:
        sql += " WHERE u.crawl_id = ?"
        params = (crawl_id,)
    return {r[0]: Row(*r[1:]) for r in conn.execute(sql, params)}


def links(conn: sqlite3.Connection) -> set[tuple[str, str, str, str]]:
    """(source url, target url, element, fragment) of every link row."""
    return set(
        conn.execute(
            "SELECT s.url, t.url, l.element, l.fragment FROM link l "
            "JOIN url s ON s.id = l.source_id JOIN url t ON t.id = l.target_id"
        ).fetchall()
    )


def results(conn: sqlite3.Connection) -> dict[str, tuple[Any, ...]]:
    """url -> (class, status, error, redirect target url)."""
    return {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT u.url, r.class, r.status, r.error, t.url FROM result r "
            "JOIN url u ON u.id = r.url_id LEFT JOIN url t ON t.id = r.redirect_to_id"
        )
    }


def crawl_state(conn: sqlite3.Connection, crawl_id: int) -> tuple[str, float | None]:
    return conn.execute("SELECT state, finished_at FROM crawl WHERE id = ?", (crawl_id,)).fetchone()


def outcome(
    leased: LeasedUrl,
    result: Result | None = OK,
    children: Iterable[Discovered] = (),
    redirect_to: Discovered | None = None,
    retry_at: float | None = None,
) -> Outcome:
    return Outcome(
        leased=leased,
        result=result,
        retry_at=retry_at,
        children=list(children),
        redirect_to=redirect_to,
    )


@dataclass
class Plan:
    """What each URL answers when ``drain`` fetches it (default 200 OK, no links)."""

    results: dict[str, Result] = field(default_factory=dict)
    children: dict[str, list[Discovered]] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)


def drain(f: Frontier, plan: Plan, owner: str = "w1", now: float = T0) -> None:
    """Lease and complete until nothing is leasable: a whole crawl, synchronously."""
    for _ in range(100):
        got = f.lease(owner, 1000, TTL, now)
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
        assert all(f.complete(owner, outs, now))
    raise AssertionError("drain did not converge")


# -- dedup -----------------------------------------------------------------------


def test_enqueue_same_key_twice_gives_one_row(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    assert f.enqueue([disc(u("")), disc(u(""))], T0) == 1
    assert f.enqueue([disc(u(""))], T0) == 0
    # A second Frontier on the same crawl has an empty cache: the UNIQUE key decides.
    again = Frontier(conn, f.crawl_id)
    assert again.enqueue([disc(u("")), disc(u("x"))], T0) == 1
    assert sorted(rows(conn)) == [u(""), u("x")]
    assert all(r.depth == 0 and r.state == UrlState.PENDING for r in rows(conn).values())


def test_same_url_in_two_crawls_is_two_rows(conn: sqlite3.Connection) -> None:
    first, second = new_frontier(conn), new_frontier(conn)
    assert first.enqueue([disc(u(""))], T0) == 1
    assert second.enqueue([disc(u(""))], T0) == 1
    assert len(rows(conn, first.crawl_id)) == 1
    assert len(rows(conn, second.crawl_id)) == 1


def test_child_found_by_two_pages_in_one_batch_is_one_url_two_links(
    conn: sqlite3.Connection,
) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p1")), disc(u("p2"))], T0)
    p1, p2 = f.lease("w1", 10, TTL, T0)
    child = u("shared")
    accepted = f.complete(
        "w1",
        [
            outcome(p1, children=[disc(child), disc(u("p2"))]),
            outcome(p2, children=[disc(child, element="img"), disc(child, fragment="top")]),
        ],
        T0,
    )
    assert accepted == [True, True]
    table = rows(conn)
    assert sorted(table) == [u("p1"), u("p2"), child]
    assert table[child].depth == 1
    assert table[child].state == UrlState.PENDING
    assert table[u("p2")].depth == 0  # a seed found again keeps its depth
    assert links(conn) == {
        (u("p1"), child, "a", ""),
        (u("p1"), u("p2"), "a", ""),
        (u("p2"), child, "img", ""),
        (u("p2"), child, "a", "top"),
    }


def test_child_dedup_survives_a_tiny_seen_cache(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn, seen_cache_size=1)
    f.enqueue([disc(u("p"))], T0)
    (page,) = f.lease("w1", 10, TTL, T0)
    kids = [disc(u(f"c{i % 4}")) for i in range(12)]
    assert f.complete("w1", [outcome(page, children=kids)], T0) == [True]
    assert sorted(rows(conn)) == sorted({u("p")} | {k.url for k in kids})
    assert len(links(conn)) == 4


# -- leases ----------------------------------------------------------------------


def test_lease_takes_shallowest_then_oldest_up_to_limit(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a"))], T0)
    (a,) = f.lease("w1", 10, TTL, T0)
    f.complete("w1", [outcome(a, children=[disc(u("c1")), disc(u("c2")), disc(u("c3"))])], T0)
    f.enqueue([disc(u("b"))], T0)  # depth 0, but the newest row
    ids = {url: r.id for url, r in rows(conn).items()}
    assert ids[u("b")] > ids[u("c3")] > ids[u("c2")] > ids[u("c1")]

    first = f.lease("w1", 2, TTL, T0)
    assert {x.url for x in first} == {u("b"), u("c1")}
    assert {x.url: x.depth for x in first} == {u("b"): 0, u("c1"): 1}
    assert [x.url for x in f.lease("w1", 1, TTL, T0)] == [u("c2")]
    assert [x.url for x in f.lease("w1", 5, TTL, T0)] == [u("c3")]
    assert f.lease("w1", 5, TTL, T0) == []


def test_lease_fills_in_the_leased_row(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc("http://b.test:8080/x", UrlKind.CHECK)], T0)
    (x,) = f.lease("w1", 10, TTL, T0)
    assert (x.url, x.host, x.kind, x.depth, x.hop, x.attempts) == (
        "http://b.test:8080/x",
        "b.test:8080",
        UrlKind.CHECK,
        0,
        0,
        0,
    )
    row = rows(conn)[x.url]
    assert row.state == UrlState.LEASED
    assert row.lease_owner == "w1"
    assert row.lease_expires_at == T0 + TTL


def test_a_lease_is_not_handed_out_twice(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u(str(i))) for i in range(5)], T0)
    mine = f.lease("x", 3, TTL, T0)
    theirs = f.lease("y", 10, TTL, T0)
    assert len(mine) == 3
    assert len(theirs) == 2
    assert {m.id for m in mine}.isdisjoint({t.id for t in theirs})
    assert f.lease("y", 10, TTL, T0) == []
    # Expired but not reclaimed: still not leasable by anyone else.
    assert f.lease("y", 10, TTL, T0 + TTL * 10) == []
    owners = {url: r.lease_owner for url, r in rows(conn).items()}
    assert sorted(owners.values()) == ["x", "x", "x", "y", "y"]


def test_renew_extends_only_this_owners_leases(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a")), disc(u("b"))], T0)
    f.lease("x", 1, TTL, T0)
    f.lease("y", 1, TTL, T0)
    assert f.renew("x", TTL, T0 + 20) == 1
    assert f.reclaim(T0 + TTL + 1, stale_after_s=3600) == 1
    table = rows(conn)
    assert table[u("a")].lease_owner == "x"
    assert table[u("a")].lease_expires_at == T0 + 20 + TTL
    assert table[u("b")].state == UrlState.PENDING


def test_release_returns_leases_untouched(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a")), disc(u("b"))], T0)
    f.lease("x", 1, TTL, T0)
    f.lease("y", 1, TTL, T0)
    assert f.release("x") == 1
    table = rows(conn)
    assert (table[u("a")].state, table[u("a")].lease_owner, table[u("a")].attempts) == (
        UrlState.PENDING,
        None,
        0,
    )
    assert table[u("b")].lease_owner == "y"


# -- completion ------------------------------------------------------------------


def test_complete_marks_done_with_children_and_result(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u(""))], T0)
    (root,) = f.lease("w1", 10, TTL, T0)
    kids = [disc(u("page")), disc("http://elsewhere.test/x", UrlKind.CHECK, element="img")]
    assert f.complete("w1", [outcome(root, children=kids)], T0 + 1) == [True]
    table = rows(conn)
    assert table[u("")].state == UrlState.DONE
    assert table[u("")].lease_owner is None
    assert table[u("")].attempts == 1
    assert table["http://elsewhere.test/x"].kind == UrlKind.CHECK
    assert table["http://elsewhere.test/x"].host == "elsewhere.test"
    assert results(conn) == {u(""): ("ok", 200, None, None)}
    assert conn.execute("SELECT checked_at FROM result").fetchone()[0] == T0 + 1


def test_complete_by_wrong_owner_is_rejected_and_writes_nothing(
    conn: sqlite3.Connection,
) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u(""))], T0)
    (root,) = f.lease("x", 10, TTL, T0)
    before = rows(conn)
    stale = [
        outcome(root, children=[disc(u("child"))], redirect_to=disc(u("moved"))),
        outcome(root, result=None, retry_at=T0 + 5),
    ]
    assert f.complete("y", stale, T0) == [False, False]
    assert rows(conn) == before
    assert links(conn) == set()
    assert results(conn) == {}
    assert f.complete("x", [outcome(root)], T0) == [True]


def test_complete_after_lease_reclaimed_by_another_owner_is_rejected(
    conn: sqlite3.Connection,
) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a_x, b_x = f.lease("x", 10, TTL, T0)
    later = T0 + TTL + 1
    assert f.reclaim(later, stale_after_s=3600) == 2
    a_y, b_y = f.lease("y", 10, TTL, later)
    assert (a_y.id, b_y.id) == (a_x.id, b_x.id)
    before = rows(conn)

    accepted = f.complete(
        "x",
        [outcome(a_x, children=[disc(u("from-x"))]), outcome(b_x, result=None, retry_at=later)],
        later,
    )
    assert accepted == [False, False]
    assert rows(conn) == before
    assert links(conn) == set()
    assert results(conn) == {}

    # The new holder's completion goes through, once: a second one is stale.
    accepted = f.complete("y", [outcome(a_y), outcome(a_y, children=[disc(u("late"))])], later)
    assert accepted == [True, False]
    assert u("late") not in rows(conn)
    assert rows(conn)[u("a")].state == UrlState.DONE


def test_expired_lease_not_yet_reclaimed_still_completes(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a"))], T0)
    (a,) = f.lease("x", 10, TTL, T0)
    assert f.complete("x", [outcome(a)], T0 + TTL * 3) == [True]
    assert rows(conn)[u("a")].state == UrlState.DONE


def test_retry_puts_row_back_pending_until_due(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a, b = f.lease("w1", 10, TTL, T0)
    due = T0 + 60
    assert f.complete("w1", [outcome(a, None, retry_at=due), outcome(b, None)], T0 + 1) == [
        True,
        True,
    ]
    table = rows(conn)
    assert (table[u("a")].state, table[u("a")].attempts, table[u("a")].next_attempt_at) == (
        UrlState.PENDING,
        1,
        due,
    )
    assert table[u("a")].lease_owner is None
    assert table[u("b")].next_attempt_at == T0 + 1  # no retry_at: due at once
    assert results(conn) == {}

    assert [x.url for x in f.lease("w1", 10, TTL, T0 + 2)] == [u("b")]
    assert f.lease("w1", 10, TTL, due - 0.001) == []
    assert f.next_wake_at() is not None
    (again,) = f.lease("w1", 10, TTL, due)
    assert (again.url, again.attempts) == (u("a"), 1)


# -- quiescence ------------------------------------------------------------------


def test_finish_if_quiescent(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    other = new_frontier(conn)
    other.enqueue([disc(u("other-crawl"))], T0)  # never done: must not block ``f``
    f.enqueue([disc(u("a"))], T0)
    assert f.finish_if_quiescent(T0) is False  # pending

    (a,) = f.lease("w1", 10, TTL, T0)
    assert f.finish_if_quiescent(T0) is False  # leased
    assert f.finish_if_quiescent(T0 + TTL * 5) is False  # expired, not reclaimed
    assert crawl_state(conn, f.crawl_id) == ("running", None)

    assert f.complete("w1", [outcome(a, None, retry_at=T0 + 500)], T0) == [True]
    assert f.finish_if_quiescent(T0 + 1) is False  # pending, not yet due

    (a,) = f.lease("w1", 10, TTL, T0 + 500)
    assert f.complete("w1", [outcome(a, children=[disc(u("b"))])], T0 + 500) == [True]
    assert f.finish_if_quiescent(T0 + 501) is False  # a child of the last page

    drain(f, Plan(), now=T0 + 600)
    assert f.finish_if_quiescent(T0 + 700) is True
    assert crawl_state(conn, f.crawl_id) == ("finished", T0 + 700)
    assert f.finish_if_quiescent(T0 + 800) is True
    assert crawl_state(conn, f.crawl_id) == ("finished", T0 + 700)
    assert crawl_state(conn, other.crawl_id) == ("running", None)
    assert other.finish_if_quiescent(T0) is False


# -- reclaim ---------------------------------------------------------------------


def test_reclaim_returns_only_expired_leases(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u(str(i))) for i in range(3)], T0)
    f.lease("x", 2, TTL, T0)  # expire at T0 + 30
    (late,) = f.lease("y", 1, TTL, T0 + 20)  # expires at T0 + 50
    assert f.reclaim(T0 + TTL - 0.1, stale_after_s=3600) == 0
    assert f.reclaim(T0 + 40, stale_after_s=3600) == 2
    table = rows(conn)
    assert [url for url, r in table.items() if r.state == UrlState.LEASED] == [late.url]
    pending = [r for r in table.values() if r.state == UrlState.PENDING]
    assert all(r.lease_owner is None and r.lease_expires_at is None for r in pending)
    assert all(r.attempts == 0 for r in pending)
    assert f.reclaim(T0 + 40, stale_after_s=3600) == 0


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "pass"], check=True)
    del proc
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _add_worker(
    conn: sqlite3.Connection, crawl_id: int, token: str, pid: int, heartbeat_at: float
) -> None:
    conn.execute(
        "INSERT INTO worker (token, crawl_id, pid, hostname, started_at, heartbeat_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (token, crawl_id, pid, socket.gethostname(), heartbeat_at, heartbeat_at),
    )


def test_reclaim_returns_leases_of_dead_workers(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u(str(i))) for i in range(4)], T0)
    _add_worker(conn, f.crawl_id, "dead", _dead_pid(), T0)
    _add_worker(conn, f.crawl_id, "alive", os.getppid(), T0)
    _add_worker(conn, f.crawl_id, "silent", os.getppid(), T0 - 1000)
    f.register_worker("me", T0)
    try:
        dead = f.lease("dead", 1, 3600, T0)
        alive = f.lease("alive", 1, 3600, T0)
        silent = f.lease("silent", 1, 3600, T0)
        mine = f.lease("me", 1, 3600, T0)
        # Nothing has expired: only the dead pid and the stale heartbeat are reclaimed.
        assert f.reclaim(T0 + 1, stale_after_s=100) == 2
        table = rows(conn)
        assert table[dead[0].url].state == UrlState.PENDING
        assert table[silent[0].url].state == UrlState.PENDING
        assert table[alive[0].url].lease_owner == "alive"
        assert table[mine[0].url].lease_owner == "me"
        workers = {r[0] for r in conn.execute("SELECT token FROM worker")}
        assert workers == {"alive", "me"}
    finally:
        f.release("me")


def test_worker_row_with_our_pid_but_unknown_token_is_dead(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a"))], T0)
    _add_worker(conn, f.crawl_id, "earlier-life", os.getpid(), T0)
    f.lease("earlier-life", 1, 3600, T0)
    assert f.reclaim(T0, stale_after_s=3600) == 1
    assert rows(conn)[u("a")].state == UrlState.PENDING


# -- kinds -----------------------------------------------------------------------


def _with_check_child(conn: sqlite3.Connection, url: str) -> Frontier:
    """A crawl whose seed page links to ``url`` as a link to check."""
    f = new_frontier(conn)
    f.enqueue([disc(u("p"))], T0)
    (p,) = f.lease("w1", 10, TTL, T0)
    assert f.complete("w1", [outcome(p, children=[disc(url, UrlKind.CHECK)])], T0) == [True]
    assert rows(conn)[url].kind == UrlKind.CHECK
    return f


def test_check_found_again_as_page_becomes_page(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p")), disc(u("q"))], T0)
    p, q = f.lease("w1", 2, TTL, T0)
    assert f.complete("w1", [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])], T0) == [True]
    assert f.complete("w1", [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])], T0) == [True]
    row = rows(conn)[u("x")]
    assert (row.kind, row.state, row.depth) == (UrlKind.PAGE, UrlState.PENDING, 1)
    assert len(rows(conn)) == 3
    (x,) = f.lease("w1", 10, TTL, T0)
    assert x.kind == UrlKind.PAGE


def test_upgrade_takes_the_smaller_depth(conn: sqlite3.Connection) -> None:
    f = _with_check_child(conn, u("x"))  # depth 1
    f.enqueue([disc(u("x"), UrlKind.PAGE)], T0)  # now a seed
    row = rows(conn)[u("x")]
    assert (row.kind, row.depth) == (UrlKind.PAGE, 0)


def test_upgrade_works_without_the_seen_cache(conn: sqlite3.Connection) -> None:
    f = _with_check_child(conn, u("x"))
    resumed = Frontier(conn, f.crawl_id)  # a new process: empty caches
    resumed.enqueue([disc(u("q"))], T0)
    (q,) = resumed.lease("w1", 1, TTL, T0)
    resumed.complete("w1", [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])], T0)
    assert rows(conn)[u("x")].kind == UrlKind.PAGE


def test_kinds_only_ever_grow_check_anchors_page(conn: sqlite3.Connection) -> None:
    f = _with_check_child(conn, u("x"))
    seen = []
    for kind in (UrlKind.ANCHORS, UrlKind.CHECK, UrlKind.PAGE, UrlKind.ANCHORS, UrlKind.CHECK):
        f.enqueue([disc(u("x"), kind)], T0)
        seen.append(UrlKind(rows(conn)[u("x")].kind))
    assert seen == [UrlKind.ANCHORS, UrlKind.ANCHORS, UrlKind.PAGE, UrlKind.PAGE, UrlKind.PAGE]
    assert len(rows(conn)) == 2


def test_page_found_again_as_check_stays_page(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p")), disc(u("x"))], T0)
    p, x = f.lease("w1", 10, TTL, T0)
    f.complete("w1", [outcome(x)], T0)
    f.complete("w1", [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])], T0)
    row = rows(conn)[u("x")]
    assert (row.kind, row.state) == (UrlKind.PAGE, UrlState.DONE)


def test_check_done_then_found_as_page_goes_back_to_pending(conn: sqlite3.Connection) -> None:
    f = _with_check_child(conn, u("x"))
    (x,) = f.lease("w1", 10, TTL, T0)
    assert f.complete("w1", [outcome(x)], T0) == [True]
    assert rows(conn)[u("x")].state == UrlState.DONE
    assert f.finish_if_quiescent(T0) is True

    f.enqueue([disc(u("x"), UrlKind.PAGE)], T0 + 1)
    row = rows(conn)[u("x")]
    assert (row.kind, row.state) == (UrlKind.PAGE, UrlState.PENDING)
    (again,) = f.lease("w1", 10, TTL, T0 + 1)
    assert (again.url, again.kind) == (u("x"), UrlKind.PAGE)
    assert f.complete("w1", [outcome(again, children=[disc(u("deeper"))])], T0 + 1) == [True]
    assert (u("x"), u("deeper"), "a", "") in links(conn)


def test_check_upgraded_while_leased_returns_to_pending_on_completion(
    conn: sqlite3.Connection,
) -> None:
    f = _with_check_child(conn, u("x"))
    (x,) = f.lease("x-holder", 10, TTL, T0)
    assert x.kind == UrlKind.CHECK
    f.enqueue([disc(u("q"))], T0)
    (q,) = f.lease("w1", 10, TTL, T0)
    f.complete("w1", [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])], T0)
    row = rows(conn)[u("x")]
    assert (row.kind, row.state, row.lease_owner) == (UrlKind.PAGE, UrlState.LEASED, "x-holder")

    assert f.complete("x-holder", [outcome(x)], T0 + 1) == [True]
    row = rows(conn)[u("x")]
    assert (row.kind, row.state, row.lease_owner) == (UrlKind.PAGE, UrlState.PENDING, None)
    assert f.finish_if_quiescent(T0 + 1) is False
    (again,) = f.lease("w1", 10, TTL, T0 + 1)
    assert (again.url, again.kind) == (u("x"), UrlKind.PAGE)


# -- skip rows -------------------------------------------------------------------


def test_skip_children_are_stored_done_with_their_result(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p"))], T0)
    (p,) = f.lease("w1", 10, TTL, T0)
    mail = disc("mailto:a@b.test", UrlKind.SKIP, result=ResultClass.SKIPPED, reason="scheme mailto")
    excluded = disc(
        u("private"), UrlKind.SKIP, result=ResultClass.EXCLUDED, reason="matches --exclude"
    )
    assert f.complete("w1", [outcome(p, children=[mail, excluded, mail])], T0 + 2) == [True]
    table = rows(conn)
    for url in (mail.url, excluded.url):
        assert (table[url].kind, table[url].state) == (UrlKind.SKIP, UrlState.DONE)
    assert table[mail.url].host is None
    got = results(conn)
    assert got[mail.url] == ("skipped", None, "scheme mailto", None)
    assert got[excluded.url] == ("excluded", None, "matches --exclude", None)
    assert {(s, t) for s, t, _, _ in links(conn)} == {(u("p"), mail.url), (u("p"), excluded.url)}
    assert f.lease("w1", 10, TTL, T0 + 2) == []
    assert f.finish_if_quiescent(T0 + 2) is True
    # Skipped stays skipped, whatever kind a later page gives it.
    f.enqueue([disc(excluded.url, UrlKind.PAGE)], T0 + 3)
    assert (rows(conn)[excluded.url].kind, rows(conn)[excluded.url].state) == (
        UrlKind.SKIP,
        UrlState.DONE,
    )


# -- max_urls --------------------------------------------------------------------


def test_max_urls_stops_new_urls_but_links_existing_ones(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn, max_urls=3)
    f.enqueue([disc(u("p"))], T0)
    (p,) = f.lease("w1", 10, TTL, T0)
    kids = [disc(u("a")), disc(u("b")), disc(u("c")), disc(u("p"))]
    assert f.complete("w1", [outcome(p, children=kids)], T0) == [True]
    assert sorted(rows(conn)) == [u("a"), u("b"), u("p")]
    assert links(conn) == {(u("p"), x, "a", "") for x in (u("a"), u("b"), u("p"))}

    a = next(x for x in f.lease("w1", 10, TTL, T0) if x.url == u("a"))
    assert f.complete("w1", [outcome(a, children=[disc(u("b")), disc(u("d"))])], T0) == [True]
    assert len(rows(conn)) == 3
    assert (u("a"), u("b"), "a", "") in links(conn)
    assert not any(t == u("d") for _, t, _, _ in links(conn))
    assert f.enqueue([disc(u("seed2"))], T0) == 0
    # A fresh Frontier counts what is in the table, not what it inserted itself.
    assert Frontier(conn, f.crawl_id, max_urls=3).enqueue([disc(u("seed3"))], T0) == 0
    assert Frontier(conn, f.crawl_id, max_urls=4).enqueue([disc(u("seed3"))], T0) == 1


# -- redirects -------------------------------------------------------------------


def test_redirect_creates_target_one_hop_further(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p"))], T0)
    (p,) = f.lease("w1", 10, TTL, T0)
    f.complete("w1", [outcome(p, children=[disc(u("old"))])], T0)
    (old,) = f.lease("w1", 10, TTL, T0)
    moved = Result(ResultClass.REDIRECTED, status=301)
    assert f.complete("w1", [outcome(old, moved, redirect_to=disc(u("new")))], T0) == [True]
    table = rows(conn)
    assert (table[u("new")].depth, table[u("new")].hop) == (1, 1)
    assert table[u("new")].state == UrlState.PENDING
    assert (u("old"), u("new"), "redirect", "") in links(conn)
    assert results(conn)[u("old")] == ("redirected", 301, None, u("new"))

    (new,) = f.lease("w1", 10, TTL, T0)
    assert new.hop == 1
    f.complete("w1", [outcome(new, moved, redirect_to=disc(u("newest")))], T0)
    assert (rows(conn)[u("newest")].depth, rows(conn)[u("newest")].hop) == (1, 2)


# -- report views ----------------------------------------------------------------


def view(conn: sqlite3.Connection, name: str, crawl_id: int) -> list[dict[str, Any]]:
    cur = conn.execute(f"SELECT * FROM {name} WHERE crawl_id = ?", (crawl_id,))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def resolved(conn: sqlite3.Connection, crawl_id: int) -> Mapping[str, dict[str, Any]]:
    return {r["url"]: r for r in view(conn, "resolved", crawl_id)}


BROKEN = Result(ResultClass.BROKEN, status=404, error_kind="http_status", error="HTTP 404")


def test_broken_child_with_two_sources(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p1")), disc(u("p2"))], T0)
    dead = u("dead")
    plan = Plan(
        results={dead: BROKEN},
        children={
            u("p1"): [disc(dead, UrlKind.CHECK), disc(u("fine"), UrlKind.CHECK)],
            u("p2"): [disc(dead, UrlKind.CHECK, element="img", fragment="f")],
        },
    )
    drain(f, plan)
    got = {
        (r["url"], r["status"], r["error"], r["source"], r["element"], r["fragment"])
        for r in view(conn, "broken_links", f.crawl_id)
    }
    assert got == {
        (dead, 404, "HTTP 404", u("p1"), "a", ""),
        (dead, 404, "HTTP 404", u("p2"), "img", "f"),
    }
    assert len(view(conn, "broken_links", f.crawl_id)) == 2
    assert resolved(conn, f.crawl_id)[u("fine")]["class"] == "ok"


def test_broken_seed_is_reported_without_source(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("gone"))], T0)
    drain(f, Plan(results={u("gone"): BROKEN}))
    rows_ = view(conn, "broken_links", f.crawl_id)
    assert [(r["url"], r["source"]) for r in rows_] == [(u("gone"), None)]


def test_redirect_chain_to_a_broken_url(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p"))], T0)
    a, b, c = u("a"), u("b"), u("c")
    drain(
        f,
        Plan(
            results={c: BROKEN},
            children={u("p"): [disc(a, UrlKind.CHECK)]},
            redirects={a: b, b: c},
        ),
    )
    res = resolved(conn, f.crawl_id)
    assert res[a]["class"] == "broken"
    assert c in res[a]["error"]
    assert (res[a]["final_url"], res[a]["redirects"], res[a]["status"]) == (c, 2, 404)
    assert res[b]["class"] == "broken"
    assert res[c]["class"] == "broken"
    assert res[u("p")]["class"] == "ok"
    # Reported once, through the link the page really has.
    broken = [(r["url"], r["source"]) for r in view(conn, "broken_links", f.crawl_id)]
    assert broken == [(a, u("p"))]
    redirects = {
        r["url"]: (r["redirect_to"], r["final_url"], r["hops"], r["is_loop"])
        for r in view(conn, "redirects", f.crawl_id)
    }
    assert redirects == {a: (b, c, 2, 0), b: (c, c, 1, 0)}


def test_redirect_chain_to_an_ok_url_is_redirected(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p"))], T0)
    drain(
        f,
        Plan(children={u("p"): [disc(u("a"), UrlKind.CHECK)]}, redirects={u("a"): u("b")}),
    )
    res = resolved(conn, f.crawl_id)[u("a")]
    assert (res["class"], res["error"], res["final_url"], res["status"]) == (
        "redirected",
        None,
        u("b"),
        200,
    )
    assert view(conn, "broken_links", f.crawl_id) == []


def test_redirect_loop_is_broken(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p"))], T0)
    a, b = u("a"), u("b")
    drain(f, Plan(children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: a}))
    res = resolved(conn, f.crawl_id)
    for url in (a, b):
        assert (res[url]["class"], res[url]["error"]) == ("broken", "redirect loop")
    loops = {r["url"]: r["is_loop"] for r in view(conn, "redirects", f.crawl_id)}
    assert loops == {a: 1, b: 1}
    broken = [(r["url"], r["source"], r["error"]) for r in view(conn, "broken_links", f.crawl_id)]
    assert broken == [(a, u("p"), "redirect loop")]


@pytest.mark.parametrize(
    ("config", "expected_class"),
    [({"max_redirects": 2}, "broken"), ({"max_redirects": 3}, "redirected"), ({}, "redirected")],
)
def test_redirect_chain_longer_than_max_redirects(
    conn: sqlite3.Connection, config: dict[str, Any], expected_class: str
) -> None:
    f = new_frontier(conn, config)
    f.enqueue([disc(u("p"))], T0)
    a, b, c, d = (u(x) for x in "abcd")
    drain(f, Plan(children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: c, c: d}))
    res = resolved(conn, f.crawl_id)
    assert res[a]["redirects"] == 3
    assert res[a]["final_url"] == d
    assert res[a]["class"] == expected_class
    assert res[b]["class"] == "redirected"  # two hops: within every limit here
    broken = [(r["url"], r["error"]) for r in view(conn, "broken_links", f.crawl_id)]
    if expected_class == "broken":
        assert broken == [(a, "too many redirects (3)")]
    else:
        assert broken == []


def test_lease_returns_rows_shallowest_first(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("a"))], T0)
    (a,) = f.lease("w1", 10, TTL, T0)
    f.complete("w1", [outcome(a, children=[disc(u("c1")), disc(u("c2"))])], T0)
    f.enqueue([disc(u("b"))], T0)  # depth 0, newest id
    got = f.lease("w1", 10, TTL, T0)
    assert [(x.depth, x.url) for x in got] == [(0, u("b")), (1, u("c1")), (1, u("c2"))]


def test_checks_are_leased_with_the_pages_that_link_to_them(conn: sqlite3.Connection) -> None:
    # An image found on a depth-1 page is at depth 2 but is checked ahead of
    # the remaining depth-1 pages, and those ahead of the depth-2 pages.
    f = new_frontier(conn)
    f.enqueue([disc(u("a"))], T0)
    (a,) = f.lease("w1", 10, TTL, T0)
    f.complete("w1", [outcome(a, children=[disc(u("p1")), disc(u("p2"))])], T0)
    (p1,) = f.lease("w1", 1, TTL, T0)
    children = [disc(u("deep")), disc(u("img.png"), UrlKind.CHECK)]
    f.complete("w1", [outcome(p1, children=children)], T0)
    got = f.lease("w1", 10, TTL, T0)
    assert [(x.url, x.depth) for x in got] == [
        (u("img.png"), 2),
        (u("p2"), 1),
        (u("deep"), 2),
    ]


def test_kind_upgrade_does_not_count_against_max_urls(conn: sqlite3.Connection) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("p")), disc(u("q"))], T0)
    (p,) = f.lease("w1", 1, TTL, T0)
    f.complete("w1", [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])], T0)
    resumed = Frontier(conn, f.crawl_id, max_urls=4)  # 3 URLs so far: room for one more
    (q,) = resumed.lease("w1", 1, TTL, T0)
    children = [disc(u("x"), UrlKind.PAGE), disc(u("y"))]  # an upgrade, then a new URL
    assert resumed.complete("w1", [outcome(q, children=children)], T0) == [True]
    assert rows(conn)[u("x")].kind == UrlKind.PAGE
    assert sorted(rows(conn)) == [u("p"), u("q"), u("x"), u("y")]


def _link_tables(conn: sqlite3.Connection) -> dict[str, set[tuple[str, str, str]]]:
    """(source url, target url, fragment) per link table."""
    return {
        table: set(
            conn.execute(
                f"SELECT s.url, t.url, l.fragment FROM {table} l "
                "JOIN url s ON s.id = l.source_id JOIN url t ON t.id = l.target_id"
            ).fetchall()
        )
        for table in ("link_open", "link_settled")
    }


def test_links_to_pages_crawled_ok_are_settled_the_rest_stay_open(
    conn: sqlite3.Connection,
) -> None:
    f = new_frontier(conn)
    f.enqueue([disc(u("")), disc(u("bad"))], T0)
    first = f.lease("w1", 10, TTL, T0)
    by_url = {row.url: row for row in first}
    # "" is crawled OK (a page, settled); "bad" is a page answered 404 (not settled).
    assert all(f.complete("w1", [outcome(by_url[u("")]), outcome(by_url[u("bad")], BROKEN)], T0))
    f.enqueue([disc(u("next"))], T0)
    (nxt,) = f.lease("w1", 10, TTL, T0)
    children = [
        disc(u("")),  # settled page
        disc(u(""), fragment="top"),  # a fragment is checked against the page: open
        disc(u("bad")),  # broken page: open
        disc(u("img.png"), UrlKind.CHECK, element="img"),  # not crawled yet: open
    ]
    assert f.complete("w1", [outcome(nxt, children=children)], T0) == [True]
    tables = _link_tables(conn)
    assert tables["link_settled"] == {(u("next"), u(""), "")}
    assert tables["link_open"] == {
        (u("next"), u(""), "top"),
        (u("next"), u("bad"), ""),
        (u("next"), u("img.png"), ""),
    }
    # The `link` view holds every link; reports read only link_open.
    assert {(s, t, fr) for s, t, _, fr in links(conn)} == tables["link_open"] | tables[
        "link_settled"
    ]
    assert {r["source"] for r in view(conn, "broken_links", f.crawl_id)} == {u("next")}
    # A second writer (no cache) learns "settled" from the row itself.
    again = Frontier(conn, f.crawl_id)
    again.enqueue([disc(u("other"))], T0)
    (other,) = [row for row in again.lease("w2", 10, TTL, T0) if row.url == u("other")]
    assert again.complete("w2", [outcome(other, children=[disc(u(""))])], T0) == [True]
    assert (u("other"), u(""), "") in _link_tables(conn)["link_settled"]


def test_counters_kept_by_triggers_agree_with_a_scan(conn: sqlite3.Connection) -> None:
    """crawl_count (summary's source) against counting every row, through every kind of write."""
    from crawler.store.sqlite import results

    def both(crawl_id: int) -> tuple[results.Summary, results.Summary]:
        kept = results.summary(conn, crawl_id)
        conn.execute("SAVEPOINT scan")
        conn.execute("DROP TABLE crawl_count")  # the summary falls back to a scan
        scanned = results.summary(conn, crawl_id)
        conn.execute("ROLLBACK TO scan")
        conn.execute("RELEASE scan")
        return kept, scanned

    f = new_frontier(conn)
    other = new_frontier(conn)  # a second crawl in the same file is counted apart
    other.enqueue([disc(u(""))], T0)
    drain(other, Plan())
    f.enqueue([disc(u("")), disc("mailto:x@y.z", UrlKind.SKIP, result=ResultClass.SKIPPED)], T0)
    plan = Plan(
        results={u("gone"): BROKEN, u("x"): OK},
        children={
            u(""): [disc(u("x"), UrlKind.CHECK, element="img"), disc(u("gone")), disc(u("r"))],
        },
        redirects={u("r"): u("r2")},
    )
    drain(f, plan)
    kept, scanned = both(f.crawl_id)
    assert kept == scanned
    assert (kept.pages, kept.skipped, kept.redirected, kept.broken) == (2, 1, 1, 1)
    plan.results[u("x")] = BROKEN
    f.enqueue([disc(u("x"))], T0)  # found as a page: fetched again, and now broken
    drain(f, plan)
    kept, scanned = both(f.crawl_id)
    assert kept == scanned
    assert kept.broken == 2
    assert both(other.crawl_id)[0] == both(other.crawl_id)[1]
    assert conn.execute("SELECT count(*) FROM crawl_count WHERE n < 0").fetchone()[0] == 0
