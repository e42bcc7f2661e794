"""The report contract, run on every backend: what ``load_report`` reads back from a crawl.

Summary counts, broken links with their sources, broken edges with their
failure kinds, redirect chains, missing fragments, and links to pages already
crawled OK (settled: kept apart, never reported). The documented views
(``resolved``, ``redirects``, ``broken_links``) are part of the SQL interface
and are compared too, where the report does not show a column.
"""

from __future__ import annotations

from typing import Any

import pytest
from backends import Backend
from contractkit import BROKEN, OK, T0, TTL, Plan, disc, drain, outcome, u

from crawler.models import Result, ResultClass, UrlKind
from crawler.report.model import BrokenLink, Location, ReportData


def broken(report: ReportData) -> list[tuple[str, int | None, str | None, list[str]]]:
    return [(b.url, b.status, b.error, b.sources) for b in report.broken]


def edges(report: ReportData) -> list[tuple[str, str | None, str, tuple[str, ...]]]:
    return [(e.url, e.source, e.kind, e.elements) for e in report.edges]


def classes(report: ReportData) -> dict[str, tuple[str, int | None, str | None]]:
    return {r.url: (r.result_class, r.status, r.error) for r in report.need_results()}


async def test_broken_child_with_two_sources(db: Backend) -> None:
    f = await db.store()
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
    report = await db.report(f.crawl_id)
    assert report.broken == [
        BrokenLink(
            dead, 404, "HTTP 404", [u("p1"), u("p2")], [Location(u("p1")), Location(u("p2"))]
        )
    ]
    assert edges(report) == [
        (dead, u("p1"), "http_status", ("a",)),
        (dead, u("p2"), "http_status", ("img",)),
    ]
    assert classes(report)[u("fine")] == ("ok", 200, None)
    rows = await db.view("broken_links", f.crawl_id)
    assert {(r["source"], r["element"], r["fragment"]) for r in rows} == {
        (u("p1"), "a", ""),
        (u("p2"), "img", "f"),
    }
    assert len(rows) == 2


async def test_broken_seed_is_reported_without_source(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("gone"))], T0)
    await drain(f, Plan(results={u("gone"): BROKEN}))
    report = await db.report(f.crawl_id)
    assert broken(report) == [(u("gone"), 404, "HTTP 404", [])]
    assert edges(report) == [(u("gone"), None, "http_status", ())]
    assert report.summary.pages == 0


async def test_redirect_chain_to_a_broken_url(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    a, b, c = u("a"), u("b"), u("c")
    plan = Plan(
        results={c: BROKEN}, children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: c}
    )
    await drain(f, plan)
    report = await db.report(f.crawl_id)
    got = classes(report)
    assert got[a][:2] == ("broken", 404)
    assert c in (got[a][2] or "")
    assert got[b][0] == got[c][0] == "broken"
    assert got[u("p")] == ("ok", 200, None)
    # Reported once, through the link the page really has.
    assert [(x.url, x.sources) for x in report.broken] == [(a, [u("p")])]
    assert edges(report) == [(a, u("p"), "http_status", ("a",))]
    res = {r["url"]: r for r in await db.view("resolved", f.crawl_id)}
    assert (res[a]["final_url"], res[a]["redirects"]) == (c, 2)
    redirects = {
        r["url"]: (r["redirect_to"], r["final_url"], r["hops"], bool(r["is_loop"]))
        for r in await db.view("redirects", f.crawl_id)
    }
    assert redirects == {a: (b, c, 2, False), b: (c, c, 1, False)}
    assert (report.summary.redirected, report.summary.broken) == (0, 3)


async def test_redirect_chain_to_an_ok_url_is_redirected(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    plan = Plan(children={u("p"): [disc(u("a"), UrlKind.CHECK)]}, redirects={u("a"): u("b")})
    await drain(f, plan)
    report = await db.report(f.crawl_id)
    assert classes(report)[u("a")] == ("redirected", 200, None)
    res = {r["url"]: r for r in await db.view("resolved", f.crawl_id)}
    assert res[u("a")]["final_url"] == u("b")
    assert report.broken == []
    assert (report.summary.redirected, report.summary.broken) == (1, 0)


async def test_redirect_loop_is_broken(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    a, b = u("a"), u("b")
    plan = Plan(children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: a})
    await drain(f, plan)
    report = await db.report(f.crawl_id)
    got = classes(report)
    for url in (a, b):
        assert got[url] == ("broken", None, "redirect loop")
    loops = {r["url"]: bool(r["is_loop"]) for r in await db.view("redirects", f.crawl_id)}
    assert loops == {a: True, b: True}
    assert broken(report) == [(a, None, "redirect loop", [u("p")])]
    assert edges(report) == [(a, u("p"), "redirect_loop", ("a",))]


@pytest.mark.parametrize(
    ("config", "expected_class"),
    [({"max_redirects": 2}, "broken"), ({"max_redirects": 3}, "redirected"), ({}, "redirected")],
)
async def test_redirect_chain_longer_than_max_redirects(
    db: Backend, config: dict[str, Any], expected_class: str
) -> None:
    f = await db.store(config)
    await f.enqueue([disc(u("p"))], T0)
    a, b, c, d = (u(x) for x in "abcd")
    plan = Plan(children={u("p"): [disc(a, UrlKind.CHECK)]}, redirects={a: b, b: c, c: d})
    await drain(f, plan)
    res = {r["url"]: r for r in await db.view("resolved", f.crawl_id)}
    assert (res[a]["redirects"], res[a]["final_url"]) == (3, d)
    report = await db.report(f.crawl_id)
    assert classes(report)[a][0] == expected_class
    assert classes(report)[b][0] == "redirected"  # two hops: within every limit here
    if expected_class == "broken":
        assert [(x.url, x.error) for x in report.broken] == [(a, "too many redirects (3)")]
        assert edges(report) == [(a, u("p"), "too_many_redirects", ("a",))]
    else:
        assert report.broken == []


async def test_missing_fragment_is_a_broken_link(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    (p,) = await f.lease("w1", 10, TTL, T0)
    kids = [
        disc(u("t"), UrlKind.ANCHORS, fragment="here"),
        disc(u("t"), UrlKind.ANCHORS, fragment="gone"),
        disc(u("t"), UrlKind.ANCHORS, fragment="top"),  # always there
    ]
    await f.complete("w1", [outcome(p, children=kids, anchors=frozenset())], T0)
    (t,) = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(t, anchors=frozenset({"here"}))], T0)
    report = await db.report(f.crawl_id)
    assert broken(report) == [(u("t") + "#gone", 200, "fragment #gone not found", [u("p")])]
    assert edges(report) == [(u("t") + "#gone", u("p"), "missing_fragment", ("a",))]
    assert (report.summary.ok, report.summary.broken) == (2, 1)


async def test_a_fragment_is_looked_for_where_the_redirects_end(db: Backend) -> None:
    """t#here and t#gone, t -> n: checked on n's anchors. A chain that loops
    (l1 -> l2 -> l1) or ends broken (m -> dead) is the link's own failure: no
    fragment row of its own."""
    f = await db.store()
    await f.enqueue([disc(u("p"))], T0)
    kids = [
        disc(u(name), UrlKind.ANCHORS, fragment=fragment)
        for name, fragment in [("t", "here"), ("t", "gone"), ("l1", "x"), ("m", "y")]
    ]
    plan = Plan(
        results={u("dead"): BROKEN},
        children={u("p"): kids},
        redirects={u("t"): u("n"), u("l1"): u("l2"), u("l2"): u("l1"), u("m"): u("dead")},
        anchors={u("n"): frozenset({"here", "x", "y"})},
    )
    await drain(f, plan)
    report = await db.report(f.crawl_id)
    gone = (u("t") + "#gone", 200, f"fragment #gone not found (redirected to {u('n')})", [u("p")])
    assert [b for b in broken(report) if "#" in b[0]] == [gone]
    assert (u("t") + "#gone", u("p"), "missing_fragment", ("a",)) in edges(report)
    assert {b.url for b in report.broken} == {u("t") + "#gone", u("l1"), u("m")}


async def test_links_to_pages_crawled_ok_are_settled_the_rest_stay_open(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("")), disc(u("bad"))], T0)
    by_url = {row.url: row for row in await f.lease("w1", 10, TTL, T0)}
    # "" is crawled OK (a page, settled); "bad" is a page answered 404 (not settled).
    outs = [outcome(by_url[u("")]), outcome(by_url[u("bad")], BROKEN)]
    assert all(await f.complete("w1", outs, T0))
    await f.enqueue([disc(u("next"))], T0)
    (nxt,) = await f.lease("w1", 10, TTL, T0)
    children = [
        disc(u("")),  # settled page
        disc(u(""), fragment="top"),  # a fragment is checked against the page: open
        disc(u("bad")),  # broken page: open
        disc(u("img.png"), UrlKind.CHECK, element="img"),  # not crawled yet: open
    ]
    assert await f.complete("w1", [outcome(nxt, children=children)], T0) == [True]
    tables = await db.link_tables()
    assert tables["settled"] == {(u("next"), u(""), "")}
    assert tables["open"] == {
        (u("next"), u(""), "top"),
        (u("next"), u("bad"), ""),
        (u("next"), u("img.png"), ""),
    }
    # The `link` view holds every link; reports read only the open ones.
    assert {(s, t, fr) for s, t, _, fr in await db.links()} == tables["open"] | tables["settled"]
    assert broken(await db.report(f.crawl_id)) == [(u("bad"), 404, "HTTP 404", [u("next")])]
    # A second writer (no cache) learns "settled" from the row itself.
    again = await db.store(crawl_id=f.crawl_id)
    await again.enqueue([disc(u("other"))], T0)
    (other,) = [row for row in await again.lease("w2", 10, TTL, T0) if row.url == u("other")]
    assert await again.complete("w2", [outcome(other, children=[disc(u(""))])], T0) == [True]
    assert (u("other"), u(""), "") in (await db.link_tables())["settled"]


async def test_summary_counts_follow_every_kind_of_write(db: Backend) -> None:
    other = await db.store()  # a second crawl in the same database is counted apart
    await other.enqueue([disc(u(""))], T0)
    await drain(other, Plan())
    f = await db.store()
    seeds = [disc(u("")), disc("mailto:x@y.z", UrlKind.SKIP, result=ResultClass.SKIPPED)]
    await f.enqueue(seeds, T0)
    early = (await db.report(f.crawl_id)).summary
    assert (early.pending, early.skipped, early.pages, early.links) == (1, 1, 0, 0)
    plan = Plan(
        results={u("gone"): BROKEN, u("x"): OK},
        children={
            u(""): [disc(u("x"), UrlKind.CHECK, element="img"), disc(u("gone")), disc(u("r"))],
        },
        redirects={u("r"): u("r2")},
    )
    await drain(f, plan)
    s = (await db.report(f.crawl_id)).summary
    assert (s.pages, s.ok, s.redirected, s.broken, s.skipped, s.excluded, s.blocked) == (
        2,
        3,
        1,
        1,
        1,
        0,
        0,
    )
    assert (s.links, s.pending) == (5, 0)
    # A check found again as a page is fetched again, and now broken: its result is replaced.
    plan.results[u("x")] = BROKEN
    await f.enqueue([disc(u("x"))], T0)
    assert (await db.report(f.crawl_id)).summary.pending == 1
    await drain(f, plan)
    report = await db.report(f.crawl_id)
    s = report.summary
    assert (s.pages, s.ok, s.redirected, s.broken, s.skipped, s.links, s.pending) == (
        2,
        2,
        1,
        2,
        1,
        5,
        0,
    )
    assert report.pages == [u(""), u("r2")]
    theirs = (await db.report(other.crawl_id)).summary
    assert (theirs.pages, theirs.ok, theirs.links, theirs.broken) == (1, 1, 1, 0)
    counts = await f.counts()
    assert (counts.pending, counts.leased, counts.done, counts.broken) == (0, 0, 6, 2)


async def test_results_come_in_the_order_they_were_checked(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("a")), disc(u("b"))], T0)
    a, b = await f.lease("w1", 10, TTL, T0)
    await f.complete("w1", [outcome(b, BROKEN)], T0 + 1)
    await f.complete("w1", [outcome(a)], T0 + 2)
    report = await db.report(f.crawl_id)
    assert [(r.url, r.result_class, r.checked_at) for r in report.need_results()] == [
        (u("b"), "broken", T0 + 1),
        (u("a"), "ok", T0 + 2),
    ]
    assert report.need_pages() == [u("a")]


def placed(found: Any, line: int, column: int) -> Any:
    return found._replace(line=line, column=column)


async def test_links_keep_where_their_page_writes_them(db: Backend) -> None:
    """Line and column are stored per link (first occurrence), in both link tables.

    The report's edge and location for a (broken URL, source) pair is the
    earliest of its links (one per fragment); a redirect and a link whose
    text was not found have none; the ``link`` and ``broken_links`` views
    show them too.
    """
    f = await db.store()
    await f.enqueue([disc(u("home"))], T0)
    dead = u("dead")
    plan = Plan(
        results={dead: BROKEN},
        redirects={u("old"): u("new")},
        children={
            u("home"): [
                placed(disc(u("p2")), 2, 5),
                placed(disc(dead, UrlKind.CHECK, fragment="b"), 9, 3),
                placed(disc(dead, UrlKind.CHECK), 12, 40),
                disc(u("nowhere"), UrlKind.CHECK),  # written where it was not found
                placed(disc(u("old"), UrlKind.CHECK), 3, 1),
                placed(disc(u("wide"), UrlKind.CHECK), 1, 1_000_000),  # minified HTML
                placed(disc(u("long"), UrlKind.CHECK), 2_000_000, 1023),
            ],
            # p2 links back to home, a page crawled OK: the link is settled.
            u("p2"): [placed(disc(u("home")), 7, 11), placed(disc(dead, UrlKind.CHECK), 1, 200)],
        },
    )
    await drain(f, plan)
    report = await db.report(f.crawl_id)
    assert [(e.url, e.source, e.line, e.column) for e in report.edges] == [
        (dead, u("home"), 9, 3),
        (dead, u("p2"), 1, 200),
    ]
    assert report.broken[0].locations == [Location(u("home"), 9, 3), Location(u("p2"), 1, 200)]
    links = {
        (s, t, fr, line, col)
        for s, t, fr, line, col in await db.fetch(
            "SELECT s.url, t.url, l.fragment, l.line, l.col FROM link l "
            "JOIN url s ON s.id = l.source_id JOIN url t ON t.id = l.target_id"
        )
    }
    assert links == {
        (u("home"), u("p2"), "", 2, 5),
        (u("home"), dead, "b", 9, 3),
        (u("home"), dead, "", 12, 40),
        (u("home"), u("nowhere"), "", None, None),
        (u("home"), u("old"), "", 3, 1),
        (u("home"), u("wide"), "", 1, 1_000_000),
        (u("home"), u("long"), "", 2_000_000, 1023),
        (u("old"), u("new"), "", None, None),  # a redirect is written nowhere
        (u("p2"), u("home"), "", 7, 11),
        (u("p2"), dead, "", 1, 200),
    }
    assert (u("p2"), u("home"), "") in (await db.link_tables())["settled"]
    rows = await db.view("broken_links", f.crawl_id)
    assert {(r["source"], r["fragment"], r["line"], r["col"]) for r in rows} == {
        (u("home"), "b", 9, 3),
        (u("home"), "", 12, 40),
        (u("p2"), "", 1, 200),
    }


async def test_a_link_keeps_its_position_when_its_target_is_upgraded(db: Backend) -> None:
    """A link keeps its position when its target is later upgraded to a page and crawled."""
    f = await db.store()
    await f.enqueue([disc(u("a"))], T0)
    [leased] = await f.lease("w1", 10, TTL, T0)
    first = outcome(leased, children=[placed(disc(u("x"), UrlKind.CHECK), 4, 2)])
    assert await f.complete("w1", [first], T0) == [True]
    await f.enqueue([disc(u("x"))], T0)  # upgraded to a page: fetched again
    await drain(f, Plan(children={u("x"): [placed(disc(u("a")), 1, 1)]}))
    got = await db.fetch(
        "SELECT l.line, l.col FROM link l JOIN url t ON t.id = l.target_id WHERE t.url = ?",
        u("x"),
    )
    assert got == [(4, 2)]


async def test_reads_are_the_same_before_and_after_open_links_are_merged(db: Backend) -> None:
    """Open links are appended, then moved into the target-keyed table in batches.

    Every read (the report, the views) sees the links not moved yet, and the
    same rows before the move as after it: broken and blocked links with
    their sources, a broken seed nothing links to, a redirect to a broken
    URL, the located results.
    """
    f = await db.store()
    await f.enqueue([disc(u("")), disc(u("lost"))], T0)  # lost: a broken seed, no source
    img = disc(u("i.png"), UrlKind.CHECK, element="img")
    wall = Result(ResultClass.BLOCKED, status=403, error_kind="blocked", error="bot wall")
    plan = Plan(
        results={u("gone"): BROKEN, u("i.png"): BROKEN, u("lost"): BROKEN, u("wall"): wall},
        redirects={u("old"): u("gone")},
        children={
            u(""): [disc(u("a")), placed(disc(u("gone")), 3, 7), img, disc(u("b"))],
            u("a"): [disc(u("gone")), disc(u("")), img, disc(u("wall"), UrlKind.CHECK)],
            u("b"): [disc(u("a")), img, disc(u("old"), UrlKind.CHECK)],
        },
    )
    await drain(f, plan)
    assert await db.fresh_links() > 0

    async def reads() -> tuple[Any, ...]:
        report = await db.report(f.crawl_id)
        located = {r.url: r.locations for r in report.need_results()}
        views = [
            sorted(map(repr, await db.view(name, f.crawl_id)))
            for name in ("broken_links", "blocked_links", "broken_fragments")
        ]
        return (report.summary, report.broken, report.edges, located, views, await db.links())

    before = await reads()
    summary, broken_links, _, located, _, _ = before
    assert [b.url for b in broken_links] == [u("gone"), u("i.png"), u("lost"), u("old")]
    assert summary.broken == 4
    assert located[u("gone")] == [Location(u(""), 3, 7), Location(u("a"))]
    assert located[u("wall")] == [Location(u("a"))]
    assert await db.merge_links() > 0
    assert await db.fresh_links() == 0
    assert await reads() == before
