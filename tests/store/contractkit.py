"""Building blocks of the contract tests: found links, outcomes, and a whole crawl in a loop.

Time is passed explicitly (``now``), so lease expiry and retry schedules are exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from crawler.models import Discovered, LeasedUrl, Outcome, Result, ResultClass, UrlKind
from crawler.store.contract import FrontierStore

T0 = 1_000_000.0
TTL = 30.0
OK = Result(ResultClass.OK, status=200)
BROKEN = Result(ResultClass.BROKEN, status=404, error_kind="http_status", error="HTTP 404")
MOVED = Result(ResultClass.REDIRECTED, status=301)


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
    anchors: dict[str, frozenset[str]] = field(default_factory=dict)  # pages' ids, if parsed


async def drain(
    f: FrontierStore, plan: Plan, owner: str = "w1", now: float = T0, lease: int = 1000
) -> None:
    """Lease (``lease`` rows at a time) and complete until nothing is leasable: a whole crawl."""
    for _ in range(100):
        got = await f.lease(owner, lease, TTL, now)
        if not got:
            return
        outs = []
        for leased in got:
            target = plan.redirects.get(leased.url)
            if target is not None:
                outs.append(outcome(leased, MOVED, redirect_to=disc(target, leased.kind)))
            else:
                res = plan.results.get(leased.url, OK)
                children = plan.children.get(leased.url, ())
                anchors = plan.anchors.get(leased.url)
                outs.append(outcome(leased, res, children=children, anchors=anchors))
        assert all(await f.complete(owner, outs, now))
    raise AssertionError("drain did not converge")
