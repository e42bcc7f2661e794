"""The frontier contract, run on every backend: dedup, leases, completion, quiescence, reclaim.

Each test states one rule of ``crawler.store.contract.FrontierStore`` and runs
on SQLite and on PostgreSQL (the ``db`` fixture). A backend may store things
its own way; it may not mean something else.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from backends import Backend
from contractkit import BROKEN, MOVED, T0, TTL, Plan, disc, drain, outcome, u

from crawler.models import Discovered, LeasedUrl, ResultClass, UrlKind, UrlState
from crawler.store.contract import FrontierStore

# -- dedup -----------------------------------------------------------------------


async def test_enqueue_same_key_twice_gives_one_row(db: Backend) -> None:
    f = await db.store()
    assert await f.enqueue([disc(u("")), disc(u(""))], T0) == 1
    assert await f.enqueue([disc(u(""))], T0) == 0
    # A second store on the same crawl has empty caches: the UNIQUE key decides.
    again = await db.store(crawl_id=f.crawl_id)
    assert await again.enqueue([disc(u("")), disc(u("x"))], T0) == 1
    rows = await db.rows()
    assert sorted(rows) == [u(""), u("x")]
    assert all(r.depth == 0 and r.state == UrlState.PENDING for r in rows.values())


async def test_same_url_in_two_crawls_is_two_rows(db: Backend) -> None:
    first, second = await db.store(), await db.store()
    assert await first.enqueue([disc(u(""))], T0) == 1
    assert await second.enqueue([disc(u(""))], T0) == 1
    assert len(await db.rows(first.crawl_id)) == 1
    assert len(await db.rows(second.crawl_id)) == 1


async def test_child_found_by_two_pages_in_one_batch_is_one_url_two_links(db: Backend) -> None:
    f = await db.store()
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
    table = await db.rows()
    assert sorted(table) == [u("p1"), u("p2"), child]
    assert table[child].depth == 1
    assert table[child].state == UrlState.PENDING
    assert table[u("p2")].depth == 0  # a seed found again keeps its depth
    assert await db.links() == {
        (u("p1"), child, "a", ""),
        (u("p1"), u("p2"), "a", ""),
        (u("p2"), child, "img", ""),
        (u("p2"), child, "a", "top"),
    }


async def test_child_dedup_survives_a_tiny_seen_cache(db: Backend) -> None:
    f = await db.store()
    db.shrink_seen_cache(f, 1)
    await f.enqueue([disc(u("p"))], T0)
    (page,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u(f"c{i % 4}")) for i in range(12)]
    assert await f.complete("w1", [outcome(page, children=kids)], T0) == [True]
    assert sorted(await db.rows()) == sorted({u("p")} | {k.url for k in kids})
    assert len(await db.links()) == 4


# -- lease order -------------------------------------------------------------------


async def test_lease_takes_shallowest_then_oldest_up_to_limit(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a"))], T0)
    (a,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("c1")), disc(u("c2")), disc(u("c3"))]
    await f.complete("w1", [outcome(a, children=kids)], T0)
    await f.enqueue([disc(u("b"))], T0)  # depth 0, but the newest row
    ids = {url: r.id for url, r in (await db.rows()).items()}
    assert ids[u("b")] > ids[u("c3")] > ids[u("c2")] > ids[u("c1")]

    first = await f.lease("w1", 2, TTL, T0)
    assert [(x.url, x.depth) for x in first] == [(u("b"), 0), (u("c1"), 1)]
    assert [x.url for x in await f.lease("w1", 1, TTL, T0)] == [u("c2")]
    assert [x.url for x in await f.lease("w1", 5, TTL, T0)] == [u("c3")]
    assert await f.lease("w1", 5, TTL, T0) == []


async def test_checks_are_leased_with_the_pages_that_link_to_them(db: Backend) -> None:
    # An image found on a depth-1 page is at depth 2 but is checked ahead of
    # the remaining depth-1 pages, and those ahead of the depth-2 pages.
    f = await db.store()
    await f.enqueue([disc(u("a"))], T0)
    (a,) = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(a, children=[disc(u("p1")), disc(u("p2"))])], T0)
    (p1,) = await f.lease("w1", 1, TTL, T0)
    children = [disc(u("deep")), disc(u("img.png"), UrlKind.CHECK)]
    await f.complete("w1", [outcome(p1, children=children)], T0)
    got = await f.lease("w1", 10, TTL, T0)
    assert [(x.url, x.depth) for x in got] == [
        (u("img.png"), 2),
        (u("p2"), 1),
        (u("deep"), 2),
    ]


async def test_lease_order_is_level_then_kind_then_id(db: Backend) -> None:
    """The order is ``depth - (kind < page), kind, id``, for what a lease picks and returns.

    Within one level, checks (kind 1) go before anchor fetches (kind 2), and
    those before pages (kind 3), whatever their ids; a small lease takes the
    head of that order, not any rows of the level.
    """
    f = await db.store()
    await f.enqueue([disc(u("root"))], T0)
    (root,) = await f.lease("w1", 1, TTL, T0)
    level_one = [
        disc(u("page1")),
        disc(u("anchors1"), UrlKind.ANCHORS, fragment="x"),
        disc(u("check1"), UrlKind.CHECK, element="img"),
        disc(u("page2")),
    ]
    await f.complete("w1", [outcome(root, children=level_one)], T0)
    (first,) = await f.lease("w1", 1, TTL, T0)  # checks of level 0 before level-1 pages
    assert first.url == u("check1")
    assert [x.url for x in await f.lease("w1", 1, TTL, T0)] == [u("anchors1")]
    (page1,) = await f.lease("w1", 1, TTL, T0)
    assert page1.url == u("page1")
    level_two = [
        disc(u("deep-page")),
        disc(u("deep-anchors"), UrlKind.ANCHORS, fragment="y"),
        disc(u("deep-check"), UrlKind.CHECK, element="img"),
    ]
    await f.complete("w1", [outcome(page1, children=level_two)], T0)
    # Pending now: page2 (depth 1, page), deep-anchors and deep-check (depth 2,
    # counted at level 1), deep-page (depth 2, page: level 2).
    assert [x.url for x in await f.lease("w1", 1, TTL, T0)] == [u("deep-check")]
    got = await f.lease("w1", 10, TTL, T0)
    assert [(x.url, x.kind, x.depth) for x in got] == [
        (u("deep-anchors"), UrlKind.ANCHORS, 2),
        (u("page2"), UrlKind.PAGE, 1),
        (u("deep-page"), UrlKind.PAGE, 2),
    ]


async def test_lease_fills_in_the_leased_row(db: Backend) -> None:
    f = await db.store()
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
    row = (await db.rows())[x.url]
    assert (row.state, row.lease_owner, row.lease_expires_at) == (UrlState.LEASED, "w1", T0 + TTL)


# -- batch leases, renew, release ----------------------------------------------------


async def test_a_lease_is_not_handed_out_twice(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u(str(i))) for i in range(5)], T0)
    mine = await f.lease("x", 3, TTL, T0)
    theirs = await f.lease("y", 10, TTL, T0)
    assert (len(mine), len(theirs)) == (3, 2)
    assert {m.id for m in mine}.isdisjoint({t.id for t in theirs})
    assert await f.lease("y", 10, TTL, T0) == []
    # Expired but not reclaimed: still not leasable by anyone else.
    assert await f.lease("y", 10, TTL, T0 + TTL * 10) == []
    owners = sorted(r.lease_owner or "" for r in (await db.rows()).values())
    assert owners == ["x", "x", "x", "y", "y"]


async def test_concurrent_leases_from_many_workers_never_overlap(db: Backend) -> None:
    seed = await db.store()
    await seed.enqueue([disc(u(str(i))) for i in range(600)], T0)
    workers = [await db.store(crawl_id=seed.crawl_id) for _ in range(4)]

    async def take(f: FrontierStore, owner: str) -> list[int]:
        got: list[int] = []
        while batch := await f.lease(owner, 7, TTL, T0):
            got += [x.id for x in batch]
        return got

    taken = await asyncio.gather(*(take(f, f"w{i}") for i, f in enumerate(workers)))
    every = [i for ids in taken for i in ids]
    assert len(every) == len(set(every)) == 600


async def test_renew_extends_only_this_owners_leases(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    await f.lease("x", 1, TTL, T0)
    await f.lease("y", 1, TTL, T0)
    assert await f.renew("x", TTL, T0 + 20) == 1
    assert await f.reclaim(T0 + TTL + 1, stale_after_s=3600) == 1
    table = await db.rows()
    assert (table[u("a")].lease_owner, table[u("a")].lease_expires_at) == ("x", T0 + 20 + TTL)
    assert table[u("b")].state == UrlState.PENDING


async def test_release_returns_leases_untouched(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    await f.lease("x", 1, TTL, T0)
    await f.lease("y", 1, TTL, T0)
    assert await f.release("x") == 1
    table = await db.rows()
    a = table[u("a")]
    assert (a.state, a.lease_owner, a.attempts) == (UrlState.PENDING, None, 0)
    assert table[u("b")].lease_owner == "y"


# -- completion ------------------------------------------------------------------


async def test_complete_marks_done_with_children_and_result(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u(""))], T0)
    (root,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("page")), disc("http://elsewhere.test/x", UrlKind.CHECK, element="img")]
    assert await f.complete("w1", [outcome(root, children=kids)], T0 + 1) == [True]
    table = await db.rows()
    assert (table[u("")].state, table[u("")].lease_owner, table[u("")].attempts) == (
        UrlState.DONE,
        None,
        1,
    )
    assert table["http://elsewhere.test/x"].kind == UrlKind.CHECK
    assert table["http://elsewhere.test/x"].host == "elsewhere.test"
    assert await db.results() == {u(""): ("ok", 200, None, None)}
    report = await db.report(f.crawl_id)
    assert [(r.url, r.checked_at) for r in report.need_results()] == [(u(""), T0 + 1)]


async def test_complete_by_wrong_owner_is_rejected_and_writes_nothing(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u(""))], T0)
    (root,) = await f.lease("x", 10, TTL, T0)
    before = await db.rows()
    stale = [
        outcome(root, children=[disc(u("child"))], redirect_to=disc(u("moved"))),
        outcome(root, result=None, retry_at=T0 + 5),
    ]
    assert await f.complete("y", stale, T0) == [False, False]
    assert await db.rows() == before
    assert await db.links() == set()
    assert await db.results() == {}
    assert await f.complete("x", [outcome(root)], T0) == [True]


async def test_complete_after_lease_reclaimed_by_another_owner_is_rejected(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a_x, b_x = await f.lease("x", 10, TTL, T0)
    later = T0 + TTL + 1
    assert await f.reclaim(later, stale_after_s=3600) == 2
    a_y, b_y = await f.lease("y", 10, TTL, later)
    assert (a_y.id, b_y.id) == (a_x.id, b_x.id)
    before = await db.rows()
    accepted = await f.complete(
        "x",
        [outcome(a_x, children=[disc(u("from-x"))]), outcome(b_x, result=None, retry_at=later)],
        later,
    )
    assert accepted == [False, False]
    assert await db.rows() == before
    assert await db.links() == set()
    assert await db.results() == {}
    # The new holder's completion goes through, once: a second one is stale.
    accepted = await f.complete(
        "y", [outcome(a_y), outcome(a_y, children=[disc(u("late"))])], later
    )
    assert accepted == [True, False]
    table = await db.rows()
    assert u("late") not in table
    assert table[u("a")].state == UrlState.DONE


async def test_expired_lease_not_yet_reclaimed_still_completes(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a"))], T0)
    (a,) = await f.lease("x", 10, TTL, T0)
    assert await f.complete("x", [outcome(a)], T0 + TTL * 3) == [True]
    assert (await db.rows())[u("a")].state == UrlState.DONE


async def test_retry_puts_row_back_pending_until_due(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a, b = await f.lease("w1", 10, TTL, T0)
    due = T0 + 60
    outs = [outcome(a, None, retry_at=due), outcome(b, None)]
    assert await f.complete("w1", outs, T0 + 1) == [True, True]
    table = await db.rows()
    ra = table[u("a")]
    assert (ra.state, ra.attempts, ra.next_attempt_at, ra.lease_owner) == (
        UrlState.PENDING,
        1,
        due,
        None,
    )
    assert table[u("b")].next_attempt_at == T0 + 1  # no retry_at: due at once
    assert await db.results() == {}
    assert [x.url for x in await f.lease("w1", 10, TTL, T0 + 2)] == [u("b")]
    assert await f.lease("w1", 10, TTL, due - 0.001) == []
    assert await f.next_wake_at() is not None
    (again,) = await f.lease("w1", 10, TTL, due)
    assert (again.url, again.attempts) == (u("a"), 1)


async def test_next_wake_at_is_the_first_retry_or_lease_expiry(db: Backend) -> None:
    f = await db.store()
    assert await f.next_wake_at() is None
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a, b = await f.lease("w1", 10, TTL, T0)
    assert await f.next_wake_at() == T0 + TTL  # the leases' expiry
    await f.complete("w1", [outcome(a, None, retry_at=T0 + 5)], T0)
    assert await f.next_wake_at() == T0 + 5
    await f.complete("w1", [outcome(b)], T0)
    assert await f.next_wake_at() == T0 + 5


async def test_concurrent_completions_inserting_the_same_urls(db: Backend) -> None:
    """Workers finding the same children at once: one row each, every link, no error."""
    seed = await db.store()
    await seed.enqueue([disc(u(f"p{i}")) for i in range(40)], T0)
    workers = [await db.store(crawl_id=seed.crawl_id) for _ in range(4)]
    shared = [disc(u(f"c{i}")) for i in range(300)]

    def children(row: LeasedUrl) -> list[Discovered]:
        if row.depth:
            return []
        return shared[::-1] if row.id % 2 else shared  # half of them in reverse order

    async def work(f: FrontierStore, owner: str) -> None:
        while batch := await f.lease(owner, 3, TTL, T0):
            outs = [outcome(x, children=children(x)) for x in batch]
            assert all(await f.complete(owner, outs, T0))

    await asyncio.gather(*(work(f, f"w{i}") for i, f in enumerate(workers)))
    table = await db.rows()
    assert len(table) == 340
    assert all(r.state == UrlState.DONE for r in table.values())
    assert len(await db.links()) == 40 * 300


# -- quiescence ------------------------------------------------------------------


async def test_finish_if_quiescent(db: Backend) -> None:
    f = await db.store()
    other = await db.store()
    await other.enqueue([disc(u("other-crawl"))], T0)  # never done: must not block ``f``
    await f.enqueue([disc(u("a"))], T0)
    assert await f.finish_if_quiescent(T0) is False  # pending
    (a,) = await f.lease("w1", 10, TTL, T0)
    assert await f.finish_if_quiescent(T0) is False  # leased
    assert await f.finish_if_quiescent(T0 + TTL * 5) is False  # expired, not reclaimed
    assert await db.crawl_state(f.crawl_id) == ("running", None)
    assert await f.complete("w1", [outcome(a, None, retry_at=T0 + 500)], T0) == [True]
    assert await f.finish_if_quiescent(T0 + 1) is False  # pending, not yet due
    (a,) = await f.lease("w1", 10, TTL, T0 + 500)
    assert await f.complete("w1", [outcome(a, children=[disc(u("b"))])], T0 + 500) == [True]
    assert await f.finish_if_quiescent(T0 + 501) is False  # a child of the last page
    await drain(f, Plan(), now=T0 + 600)
    assert await f.finish_if_quiescent(T0 + 700) is True
    assert await db.crawl_state(f.crawl_id) == ("finished", T0 + 700)
    assert await f.finish_if_quiescent(T0 + 800) is True
    assert await db.crawl_state(f.crawl_id) == ("finished", T0 + 700)
    assert await db.crawl_state(other.crawl_id) == ("running", None)
    assert await other.finish_if_quiescent(T0) is False


async def test_quiescence_is_never_seen_while_another_worker_completes(db: Backend) -> None:
    """A chain crawled by one worker while another asks "finished?" in a tight loop."""
    f = await db.store()
    watcher = await db.store(crawl_id=f.crawl_id)
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
        states = [r.state for r in (await db.rows()).values()]
        assert states == [UrlState.DONE] * 60

    await asyncio.gather(crawl(), watch())
    assert await watcher.finish_if_quiescent(T0) is True


async def test_an_idle_worker_learns_that_another_finished_the_crawl(db: Backend) -> None:
    """``wait_for_finish``: False at its limit while work is outstanding, True once finished."""
    f = await db.store()
    idle = await db.store(crawl_id=f.crawl_id)
    await f.enqueue([disc(u("a"))], T0)
    (a,) = await f.lease("w1", 10, TTL, T0)
    assert await idle.wait_for_finish(0.05) is False  # leased by w1
    waiting = asyncio.ensure_future(idle.wait_for_finish(3600))
    assert await idle.wait_for_finish(0.05) is False  # the long wait has begun meanwhile
    assert await f.complete("w1", [outcome(a)], T0) == [True]
    assert await f.finish_if_quiescent(T0) is True
    # Bounded: a wait that missed the finish would run out its hour and fail here.
    assert await asyncio.wait_for(waiting, 60) is True
    assert await asyncio.wait_for(idle.wait_for_finish(3600), 60) is True  # already finished


# -- reclaim ---------------------------------------------------------------------


async def test_reclaim_returns_only_expired_leases(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u(str(i))) for i in range(3)], T0)
    await f.lease("x", 2, TTL, T0)  # expire at T0 + 30
    (late,) = await f.lease("y", 1, TTL, T0 + 20)  # expires at T0 + 50
    assert await f.reclaim(T0 + TTL - 0.1, stale_after_s=3600) == 0
    assert await f.reclaim(T0 + 40, stale_after_s=3600) == 2
    table = await db.rows()
    assert [url for url, r in table.items() if r.state == UrlState.LEASED] == [late.url]
    pending = [r for r in table.values() if r.state == UrlState.PENDING]
    assert all(r.lease_owner is None and r.lease_expires_at is None for r in pending)
    assert all(r.attempts == 0 for r in pending)
    assert await f.reclaim(T0 + 40, stale_after_s=3600) == 0


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def test_reclaim_returns_leases_of_dead_workers(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u(str(i))) for i in range(4)], T0)
    await db.add_worker(f.crawl_id, "dead", _dead_pid(), T0)
    await db.add_worker(f.crawl_id, "alive", os.getppid(), T0)
    await db.add_worker(f.crawl_id, "silent", os.getppid(), T0 - 1000)
    await f.register_worker("me", T0)
    try:
        dead = await f.lease("dead", 1, 3600, T0)
        alive = await f.lease("alive", 1, 3600, T0)
        silent = await f.lease("silent", 1, 3600, T0)
        mine = await f.lease("me", 1, 3600, T0)
        # Nothing has expired: only the dead pid and the stale heartbeat are reclaimed.
        assert await f.reclaim(T0 + 1, stale_after_s=100) == 2
        table = await db.rows()
        assert table[dead[0].url].state == UrlState.PENDING
        assert table[silent[0].url].state == UrlState.PENDING
        assert table[alive[0].url].lease_owner == "alive"
        assert table[mine[0].url].lease_owner == "me"
        assert await db.workers() == {"alive", "me"}
    finally:
        await f.release("me")


async def test_worker_row_with_our_pid_but_unknown_token_is_dead(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a"))], T0)
    await db.add_worker(f.crawl_id, "earlier-life", os.getpid(), T0)
    await f.lease("earlier-life", 1, 3600, T0)
    assert await f.reclaim(T0, stale_after_s=3600) == 1
    assert (await db.rows())[u("a")].state == UrlState.PENDING


# -- kinds -----------------------------------------------------------------------


async def _with_check_child(db: Backend, url: str) -> FrontierStore:
    """A crawl whose seed page links to ``url`` as a link to check."""
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    assert await f.complete("w1", [outcome(p, children=[disc(url, UrlKind.CHECK)])], T0) == [True]
    assert (await db.rows())[url].kind == UrlKind.CHECK
    return f


async def test_check_found_again_as_page_becomes_page(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p")), disc(u("q"))], T0)
    p, q = await f.lease("w1", 2, TTL, T0)
    outs = [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])]
    assert await f.complete("w1", outs, T0) == [True]
    outs = [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])]
    assert await f.complete("w1", outs, T0) == [True]
    row = (await db.rows())[u("x")]
    assert (row.kind, row.state, row.depth) == (UrlKind.PAGE, UrlState.PENDING, 1)
    assert len(await db.rows()) == 3
    (x,) = await f.lease("w1", 10, TTL, T0)
    assert x.kind == UrlKind.PAGE


async def test_upgrade_takes_the_smaller_depth(db: Backend) -> None:
    f = await _with_check_child(db, u("x"))  # depth 1
    await f.enqueue([disc(u("x"), UrlKind.PAGE)], T0)  # now a seed
    row = (await db.rows())[u("x")]
    assert (row.kind, row.depth) == (UrlKind.PAGE, 0)


async def test_upgrade_works_without_the_seen_cache(db: Backend) -> None:
    f = await _with_check_child(db, u("x"))
    resumed = await db.store(crawl_id=f.crawl_id)  # a new process: empty caches
    await resumed.enqueue([disc(u("q"))], T0)
    (q,) = await resumed.lease("w1", 1, TTL, T0)
    await resumed.complete("w1", [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])], T0)
    assert (await db.rows())[u("x")].kind == UrlKind.PAGE


async def test_kinds_only_ever_grow_check_anchors_page(db: Backend) -> None:
    f = await _with_check_child(db, u("x"))
    seen = []
    for kind in (UrlKind.ANCHORS, UrlKind.CHECK, UrlKind.PAGE, UrlKind.ANCHORS, UrlKind.CHECK):
        await f.enqueue([disc(u("x"), kind)], T0)
        seen.append(UrlKind((await db.rows())[u("x")].kind))
    assert seen == [UrlKind.ANCHORS, UrlKind.ANCHORS, UrlKind.PAGE, UrlKind.PAGE, UrlKind.PAGE]
    assert len(await db.rows()) == 2


async def test_kinds_found_in_one_batch_fold_like_one_at_a_time(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("x"), UrlKind.CHECK), disc(u("x"), UrlKind.ANCHORS), disc(u("x"), UrlKind.CHECK)]
    assert await f.complete("w1", [outcome(p, children=kids)], T0) == [True]
    row = (await db.rows())[u("x")]
    assert (row.kind, row.depth, row.state) == (UrlKind.ANCHORS, 1, UrlState.PENDING)


async def test_page_found_again_as_check_stays_page(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p")), disc(u("x"))], T0)
    p, x = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(x)], T0)
    await f.complete("w1", [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])], T0)
    row = (await db.rows())[u("x")]
    assert (row.kind, row.state) == (UrlKind.PAGE, UrlState.DONE)


async def test_check_done_then_found_as_page_goes_back_to_pending(db: Backend) -> None:
    f = await _with_check_child(db, u("x"))
    (x,) = await f.lease("w1", 10, TTL, T0)
    assert await f.complete("w1", [outcome(x)], T0) == [True]
    assert (await db.rows())[u("x")].state == UrlState.DONE
    assert await f.finish_if_quiescent(T0) is True
    await f.enqueue([disc(u("x"), UrlKind.PAGE)], T0 + 1)
    row = (await db.rows())[u("x")]
    assert (row.kind, row.state) == (UrlKind.PAGE, UrlState.PENDING)
    (again,) = await f.lease("w1", 10, TTL, T0 + 1)
    assert (again.url, again.kind) == (u("x"), UrlKind.PAGE)
    outs = [outcome(again, children=[disc(u("deeper"))])]
    assert await f.complete("w1", outs, T0 + 1) == [True]
    assert (u("x"), u("deeper"), "a", "") in await db.links()


async def test_check_upgraded_while_leased_returns_to_pending_on_completion(db: Backend) -> None:
    f = await _with_check_child(db, u("x"))
    (x,) = await f.lease("x-holder", 10, TTL, T0)
    assert x.kind == UrlKind.CHECK
    await f.enqueue([disc(u("q"))], T0)
    (q,) = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(q, children=[disc(u("x"), UrlKind.PAGE)])], T0)
    row = (await db.rows())[u("x")]
    assert (row.kind, row.state, row.lease_owner) == (UrlKind.PAGE, UrlState.LEASED, "x-holder")
    assert await f.complete("x-holder", [outcome(x)], T0 + 1) == [True]
    row = (await db.rows())[u("x")]
    assert (row.kind, row.state, row.lease_owner) == (UrlKind.PAGE, UrlState.PENDING, None)
    assert await f.finish_if_quiescent(T0 + 1) is False
    (again,) = await f.lease("w1", 10, TTL, T0 + 1)
    assert (again.url, again.kind) == (u("x"), UrlKind.PAGE)


# -- skip rows -------------------------------------------------------------------


async def test_skip_children_are_stored_done_with_their_result(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    mail = disc("mailto:a@b.test", UrlKind.SKIP, result=ResultClass.SKIPPED, reason="scheme mailto")
    excluded = disc(
        u("private"), UrlKind.SKIP, result=ResultClass.EXCLUDED, reason="matches --exclude"
    )
    assert await f.complete("w1", [outcome(p, children=[mail, excluded, mail])], T0 + 2) == [True]
    table = await db.rows()
    for url in (mail.url, excluded.url):
        assert (table[url].kind, table[url].state) == (UrlKind.SKIP, UrlState.DONE)
    assert table[mail.url].host is None
    got = await db.results()
    assert got[mail.url] == ("skipped", None, "scheme mailto", None)
    assert got[excluded.url] == ("excluded", None, "matches --exclude", None)
    assert {(s, t) for s, t, _, _ in await db.links()} == {
        (u("p"), mail.url),
        (u("p"), excluded.url),
    }
    assert await f.lease("w1", 10, TTL, T0 + 2) == []
    assert await f.finish_if_quiescent(T0 + 2) is True
    # Skipped stays skipped, whatever kind a later page gives it.
    await f.enqueue([disc(excluded.url, UrlKind.PAGE)], T0 + 3)
    row = (await db.rows())[excluded.url]
    assert (row.kind, row.state) == (UrlKind.SKIP, UrlState.DONE)


# -- --max-urls ------------------------------------------------------------------


async def test_max_urls_stops_new_urls_but_links_existing_ones(db: Backend) -> None:
    f = await db.store(max_urls=3)
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    kids = [disc(u("a")), disc(u("b")), disc(u("c")), disc(u("p"))]
    assert await f.complete("w1", [outcome(p, children=kids)], T0) == [True]
    assert sorted(await db.rows()) == [u("a"), u("b"), u("p")]
    assert await db.links() == {(u("p"), x, "a", "") for x in (u("a"), u("b"), u("p"))}
    a = next(x for x in await f.lease("w1", 10, TTL, T0) if x.url == u("a"))
    outs = [outcome(a, children=[disc(u("b")), disc(u("d"))])]
    assert await f.complete("w1", outs, T0) == [True]
    assert len(await db.rows()) == 3
    assert (u("a"), u("b"), "a", "") in await db.links()
    assert not any(t == u("d") for _, t, _, _ in await db.links())
    assert await f.enqueue([disc(u("seed2"))], T0) == 0
    # A fresh store counts what is in the table, not what it inserted itself.
    capped = await db.store(crawl_id=f.crawl_id, max_urls=3)
    assert await capped.enqueue([disc(u("seed3"))], T0) == 0
    roomier = await db.store(crawl_id=f.crawl_id, max_urls=4)
    assert await roomier.enqueue([disc(u("seed3"))], T0) == 1


async def test_kind_upgrade_does_not_count_against_max_urls(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p")), disc(u("q"))], T0)
    (p,) = await f.lease("w1", 1, TTL, T0)
    await f.complete("w1", [outcome(p, children=[disc(u("x"), UrlKind.CHECK)])], T0)
    resumed = await db.store(crawl_id=f.crawl_id, max_urls=4)  # 3 URLs so far: room for one
    (q,) = await resumed.lease("w1", 1, TTL, T0)
    children = [disc(u("x"), UrlKind.PAGE), disc(u("y"))]  # an upgrade, then a new URL
    assert await resumed.complete("w1", [outcome(q, children=children)], T0) == [True]
    table = await db.rows()
    assert table[u("x")].kind == UrlKind.PAGE
    assert sorted(table) == [u("p"), u("q"), u("x"), u("y")]


# -- redirects -------------------------------------------------------------------


async def test_redirect_creates_target_one_hop_further(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(p, children=[disc(u("old"))])], T0)
    (old,) = await f.lease("w1", 10, TTL, T0)
    assert await f.complete("w1", [outcome(old, MOVED, redirect_to=disc(u("new")))], T0) == [True]
    table = await db.rows()
    assert (table[u("new")].depth, table[u("new")].hop) == (1, 1)
    assert table[u("new")].state == UrlState.PENDING
    assert (u("old"), u("new"), "redirect", "") in await db.links()
    assert (await db.results())[u("old")] == ("redirected", 301, None, u("new"))
    (new,) = await f.lease("w1", 10, TTL, T0)
    assert new.hop == 1
    await f.complete("w1", [outcome(new, MOVED, redirect_to=disc(u("newest")))], T0)
    newest = (await db.rows())[u("newest")]
    assert (newest.depth, newest.hop) == (1, 2)


# -- --max-cache-age ----------------------------------------------------------------


async def test_max_cache_age_reuses_an_earlier_crawls_ok_result(db: Backend) -> None:
    first = await db.store()
    await first.enqueue([disc(u("p"))], T0)
    (p,) = await first.lease("w1", 10, TTL, T0)
    kids = [disc(u("fine"), UrlKind.CHECK), disc(u("bad"), UrlKind.CHECK)]
    await first.complete("w1", [outcome(p, children=kids)], T0)
    await drain(first, Plan(results={u("bad"): BROKEN}))
    second = await db.store(max_cache_age_s=3600)
    await second.enqueue([disc(u("p"))], T0 + 10)
    (p2,) = await second.lease("w1", 10, TTL, T0 + 10)
    await second.complete("w1", [outcome(p2, children=kids)], T0 + 10)
    table = await db.rows(second.crawl_id)
    assert table[u("fine")].state == UrlState.DONE  # reused: not requested again
    assert table[u("bad")].state == UrlState.PENDING  # broken results are never reused
    assert (await db.results(second.crawl_id))[u("fine")] == ("ok", 200, None, None)
    # Too old for the limit: requested again.
    third = await db.store(max_cache_age_s=5)
    await third.enqueue([disc(u("p"))], T0 + 10)
    (p3,) = await third.lease("w1", 10, TTL, T0 + 10)
    await third.complete("w1", [outcome(p3, children=kids)], T0 + 10)
    assert (await db.rows(third.crawl_id))[u("fine")].state == UrlState.PENDING


# -- per-crawl facts: robots.txt, active time ------------------------------------------


async def test_robots_are_stored_per_crawl_and_host(db: Backend) -> None:
    f, other = await db.store(), await db.store()
    assert await f.get_robots("a.test") is None
    await f.put_robots("a.test", 200, "User-agent: *\nDisallow: /x\n", T0)
    await f.put_robots("b.test:8080", None, "", T0)
    assert await f.get_robots("a.test") == (200, "User-agent: *\nDisallow: /x\n")
    assert await f.get_robots("b.test:8080") == (None, "")
    assert await other.get_robots("a.test") is None  # another crawl asks again
    await f.put_robots("a.test", 404, "", T0 + 1)  # fetched again: replaced
    assert await f.get_robots("a.test") == (404, "")
    resumed = await db.store(crawl_id=f.crawl_id)
    assert await resumed.get_robots("a.test") == (404, "")


async def test_active_time_is_committed_as_it_is_added(db: Backend) -> None:
    # A run adds its time every few seconds (runner.ELAPSED_EVERY_S): each addition
    # is durable at once, so a process killed later loses only what it had not added.
    f = await db.store()
    await f.add_elapsed(1.25)
    assert (await db.report(f.crawl_id)).crawl.elapsed_s == 1.25
    await f.add_elapsed(0.5)
    assert (await db.report(f.crawl_id)).crawl.elapsed_s == 1.75


async def test_active_time_adds_up_over_resumes(db: Backend) -> None:
    f = await db.store()
    await f.add_elapsed(1.5)
    resumed = await db.store(crawl_id=f.crawl_id)
    await resumed.add_elapsed(2.0)
    assert (await db.report(f.crawl_id)).crawl.elapsed_s == 3.5
