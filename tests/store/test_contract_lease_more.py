"""The engine's lease calls, run on every backend: ``lease_more`` and ``complete_and_lease``.

``lease_more`` is ``lease`` with what the engine reads beside the rows (the
cookies stored since its last look, a re-crawl's previous pages) in one call;
``complete_and_lease`` is ``complete`` followed at once by ``lease_more``, at
the same ``now``. Both keep ``lease``'s order and ``complete``'s rejections.
"""

from __future__ import annotations

import dataclasses

from backends import Backend
from contractkit import OK, T0, TTL, Plan, disc, drain, outcome, u
from test_contract_recrawl import recrawl_of

from crawler.models import Cookie, LeaseAsk, UrlKind, UrlState


def cookie(name: str) -> Cookie:
    return Cookie(domain="a.test", path="/", name=name, value="v")


async def test_lease_more_takes_the_head_of_the_lease_order(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("root"))], T0)
    (root,) = await f.lease("w1", 1, TTL, T0)
    await f.enqueue([disc(u("late-seed"))], T0)  # depth 0, the newest row
    level_one = [disc(u("page1")), disc(u("check1"), UrlKind.CHECK, element="img")]
    await f.complete("w1", [outcome(root, children=level_one)], T0)
    grant = await f.lease_more("w1", LeaseAsk(limit=2, ttl_s=TTL), T0)
    assert [x.url for x in grant.rows] == [u("check1"), u("late-seed")]  # a check: level 0
    assert (grant.cookies, grant.previous) == (None, {})  # none asked for, not a re-crawl
    rows = await db.rows()
    assert {url for url, r in rows.items() if r.state == UrlState.LEASED} == {
        u("late-seed"),
        u("check1"),
    }
    assert rows[u("check1")].lease_owner == "w1"
    assert rows[u("check1")].lease_expires_at == T0 + TTL
    # Leased rows are not handed out again, to this owner or another.
    again = await f.lease_more("w2", LeaseAsk(limit=10, ttl_s=TTL), T0)
    assert [x.url for x in again.rows] == [u("page1")]


async def test_lease_more_reads_the_cookies_stored_since_only_with_rows(db: Backend) -> None:
    f = await db.store()
    await f.put_cookies([cookie("old")], T0)
    await f.put_cookies([cookie("new")], T0 + 10)
    ask = LeaseAsk(limit=5, ttl_s=TTL, cookies_since=T0 + 5)
    assert (await f.lease_more("w1", ask, T0 + 20)).cookies is None  # nothing leased
    await f.enqueue([disc(u("a"))], T0)
    grant = await f.lease_more("w1", ask, T0 + 20)
    assert [x.url for x in grant.rows] == [u("a")]
    assert grant.cookies == [cookie("new")]


async def test_lease_more_of_a_recrawl_brings_its_pages_previous_record(db: Backend) -> None:
    first = await db.store()
    await first.enqueue([disc(u("home")), disc(u("img"), UrlKind.CHECK)], T0)
    tagged = dataclasses.replace(OK, etag='"h"')
    await drain(first, Plan(results={u("home"): tagged, u("img"): tagged}))
    second = await recrawl_of(db, first.crawl_id)
    await second.enqueue([disc(u("home")), disc(u("img"), UrlKind.CHECK), disc(u("new"))], T0)
    grant = await second.lease_more("w1", LeaseAsk(limit=10, ttl_s=TTL), T0)
    assert {x.url for x in grant.rows} == {u("home"), u("img"), u("new")}
    assert set(grant.previous) == {u("home")}  # pages only, those the first crawl kept
    assert grant.previous[u("home")].etag == '"h"'
    # The first crawl is no re-crawl: nothing is read for its pages.
    await first.enqueue([disc(u("later"))], T0 + 1)
    assert (await first.lease_more("w1", LeaseAsk(limit=10, ttl_s=TTL), T0 + 1)).previous == {}


async def test_complete_and_lease_leases_the_children_just_committed(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("root"))], T0)
    (root,) = await f.lease("w1", 1, TTL, T0)
    kids = [disc(u("p1")), disc(u("c1"), UrlKind.CHECK, element="img")]
    accepted, grant = await f.complete_and_lease(
        "w1", [outcome(root, children=kids)], T0, LeaseAsk(limit=10, ttl_s=TTL)
    )
    assert accepted == [True]
    assert [(x.url, x.depth) for x in grant.rows] == [(u("c1"), 1), (u("p1"), 1)]
    rows = await db.rows()
    assert rows[u("root")].state == UrlState.DONE
    assert {rows[u("p1")].lease_owner, rows[u("c1")].lease_owner} == {"w1"}
    assert rows[u("p1")].lease_expires_at == T0 + TTL


async def test_complete_and_lease_rejects_a_stale_completion_and_still_leases(
    db: Backend,
) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    (a,) = await f.lease("w1", 1, TTL, T0)
    assert await f.reclaim(T0 + TTL + 1, stale_after_s=10_000) == 1  # a's lease expired
    accepted, grant = await f.complete_and_lease(
        "w1",
        [outcome(a, children=[disc(u("child"))])],
        T0 + TTL + 1,
        LeaseAsk(limit=1, ttl_s=TTL),
    )
    assert accepted == [False]
    assert [x.url for x in grant.rows] == [u("a")]  # the head of the order, again
    rows = await db.rows()
    assert u("child") not in rows  # a rejected outcome writes nothing
    assert rows[u("b")].state == UrlState.PENDING
