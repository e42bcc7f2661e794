"""The ``--render`` part of the contract, on every backend.

A link found only in a page's rendered DOM is an ordinary link whose element
starts with ``js:``: the reports mark it (``BrokenEdge.rendered``) and the
``rendered_links`` view lists it alone. A rendered page's issues are stored
in the transaction that completes it, in order, and read back by
``load_report``; a page rendered again keeps only its latest issues.
"""

from __future__ import annotations

from backends import Backend
from contractkit import BROKEN, T0, TTL, Plan, disc, drain, outcome, u

from crawler.models import RENDERED_PREFIX, RenderIssue, UrlKind
from crawler.report.model import RenderIssueRow

ISSUES = [
    RenderIssue("script_error", "Error: planted", u("app")),
    RenderIssue("request_failed", "HTTP 404", u("gone.js")),
    RenderIssue("not_settled", "still loading after 10s; the DOM taken then"),
]


async def test_links_found_after_rendering_are_marked(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("app"))], T0)
    plan = Plan(
        results={u("gone.js"): BROKEN, u("dead"): BROKEN},
        children={
            u("app"): [
                disc(u("plain"), UrlKind.PAGE),
                disc(u("dead"), UrlKind.CHECK),
                disc(u("routed"), UrlKind.PAGE, element=RENDERED_PREFIX + "a"),
                disc(u("gone.js"), UrlKind.CHECK, element=RENDERED_PREFIX + "script"),
            ]
        },
    )
    await drain(f, plan)
    report = await db.report(f.crawl_id)
    assert [(e.url, e.source, e.elements, e.rendered) for e in report.edges] == [
        (u("dead"), u("app"), ("a",), False),
        (u("gone.js"), u("app"), ("js:script",), True),
    ]
    assert report.rendered_edges() == {(u("gone.js"), u("app"))}
    rows = await db.view("rendered_links", f.crawl_id)
    assert sorted((r["source"], r["target"], r["element"]) for r in rows) == [
        (u("app"), u("gone.js"), "script"),
        (u("app"), u("routed"), "a"),
    ]


async def test_render_issues_are_stored_with_the_page(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("app")), disc(u("calm"))], T0)
    leased = {row.url: row for row in await f.lease("w1", 10, TTL, T0)}
    done = outcome(leased[u("app")])
    done.render_issues = list(ISSUES)
    assert await f.complete("w1", [done, outcome(leased[u("calm")])], T0) == [True, True]
    report = await db.report(f.crawl_id)
    assert report.render_issues == [
        RenderIssueRow(u("app"), issue.kind, issue.message, issue.url) for issue in ISSUES
    ]
    rows = await db.view("render_issues", f.crawl_id)
    assert [(r["page"], r["seq"], r["kind"], r["url"]) for r in rows] == [
        (u("app"), i, issue.kind, issue.url) for i, issue in enumerate(ISSUES)
    ]


async def test_a_page_rendered_again_keeps_its_latest_issues(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("app"), UrlKind.CHECK)], T0)
    (row,) = await f.lease("w1", 10, TTL, T0)
    first = outcome(row)
    first.render_issues = list(ISSUES)
    assert await f.complete("w1", [first], T0) == [True]
    await f.enqueue([disc(u("app"), UrlKind.PAGE)], T0 + 1)  # upgraded: fetched again
    (again,) = await f.lease("w1", 10, TTL, T0 + 1)
    second = outcome(again)
    second.render_issues = [RenderIssue("console_error", "only this")]
    assert await f.complete("w1", [second], T0 + 1) == [True]
    report = await db.report(f.crawl_id)
    assert report.render_issues == [RenderIssueRow(u("app"), "console_error", "only this", None)]


async def test_a_stale_completion_stores_no_issues(db: Backend) -> None:
    f = await db.store()
    await f.enqueue([disc(u("app"))], T0)
    (row,) = await f.lease("w1", 10, TTL, T0)
    await f.reclaim(T0 + TTL + 1, stale_after_s=TTL)
    late = outcome(row)
    late.render_issues = list(ISSUES)
    assert await f.complete("w1", [late], T0 + TTL + 2) == [False]
    assert (await db.report(f.crawl_id)).render_issues == []
