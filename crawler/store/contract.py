"""The storage contract the engine, the runner and robots.txt handling rely on.

Everything above ``crawler/store`` talks to a ``FrontierStore`` and never to a
database driver. Two backends keep it: ``sqlite.store.AsyncFrontier`` (one
machine) and ``postgres.frontier.PostgresFrontier`` (many workers on many
machines). The meaning of each call is written here, once; neither backend's
code is the specification. Each backend chooses its own physical schema and
statements, never its own meaning: tests/store/test_contract_*.py runs every
rule below against both, so a change of meaning on one backend fails a test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from crawler.models import (
    Cookie,
    Counts,
    Discovered,
    LeaseAsk,
    LeasedUrl,
    LeaseGrant,
    Outcome,
    PreviousPage,
)
from crawler.politeness import Gate, Limits


class FrontierStore(Protocol):
    """Frontier, visited set, quiescence and the per-crawl facts, for one crawl.

    Each call is one transaction: it happens whole or not at all, and a
    concurrent caller (another store on the same crawl, in this process or
    another) sees it whole or not at all. Times (``now``) are unix seconds
    passed by the caller; a store never reads the clock for its decisions.

    A URL row is keyed by (crawl, normalized URL) and moves
    ``pending -> leased -> done``. Its kind (``UrlKind``: skip < check <
    anchors < page) says what is done with it; its depth is the link hops
    from a seed, its hop the redirect hops from the URL a page linked to.

    Dedup and kind upgrade (``enqueue``, ``complete``): a URL already in the
    crawl is never added twice, whoever finds it and however small the
    store's caches. Found again with a stronger kind (check < anchors <
    page), it takes that kind and the smaller depth, and goes back to pending
    if it was done (or when its current lease completes); an upgrade never
    counts as a new URL. A skipped URL stays skipped; a weaker kind changes
    nothing. A skipped URL is stored done with its result (skipped or
    excluded) and is never leased.

    ``--max-urls`` (``max_urls``): once the crawl has that many URL rows
    (counted in the database, not by this store), no new URL is added and no
    link to one is recorded; links to URLs already known still are.

    ``--max-cache-age`` (``max_cache_age_s``): a new link to check takes the
    latest OK result an earlier crawl (of the last 20) recorded for the same
    URL no more than that many seconds before ``now``, and is stored done
    with it instead of being requested. Broken results are never reused.

    Lease order: due pending rows in the order ``depth - (kind < page), kind,
    id``: a link that is only checked (or fetched for its anchors) counts one
    level up, so checks keep pace with the pages that link to them; within a
    level checks go first, then anchor fetches, then pages, each oldest
    first. A lease of ``limit`` rows takes the head of that order and returns
    the rows in it.

    Settled links: a page crawled with an OK result is settled; it is never
    fetched again and never reported, so a later link to it (without a
    fragment) may be stored apart from the links reports read. Every link is
    still recorded and visible in the ``link`` view.

    Re-crawls: a page completed with an OK result that carries validators
    (``Result.etag``, ``Result.last_modified``) keeps them with the page. A
    crawl recorded with ``previous_crawl_id`` (``open.create_crawl``) is a
    re-crawl of that crawl: ``previous_pages`` hands the engine, for pages it
    leased, what that crawl stored for the same URLs, so it can ask "changed
    since?" and, on ``304 Not Modified``, complete the page with the stored
    result and links instead of the body. ``open.load_diff`` compares two
    crawls (new, fixed and still broken links; pages added and removed).

    Reports: ``crawler.store.open.load_report`` reads a crawl's
    ``ReportData`` (summary counts, broken links with their sources, broken
    edges with failure kinds, pages, results in the order they were checked)
    in one snapshot; both backends return the same rows. A (broken URL,
    source) pair is placed at the earliest line and column of its links; the
    views ``link`` and ``broken_links`` show every link's ``line`` and ``col``. Reading the summary
    at the end of a crawl does not grow with the crawl's size.

    Rendered pages (``--render``): a link found only in a page's rendered DOM
    is stored like any link, its element starting with ``RENDERED_PREFIX``
    (``js:a``), and listed by the ``rendered_links`` view. An accepted
    outcome's ``render_issues`` are stored in the same transaction, in order,
    replacing the page's earlier ones (``render_issues`` view, and
    ``ReportData.render_issues``); a rejected completion stores none.
    """

    crawl_id: int

    async def enqueue(self, seeds: Sequence[Discovered], now: float) -> int:
        """Add seeds at depth 0 (dedup, upgrade, limits as above); return how many were new."""
        ...

    async def lease(self, owner: str, limit: int, ttl_s: float, now: float) -> list[LeasedUrl]:
        """Lease up to ``limit`` pending rows due at ``now``, in the lease order.

        Each row becomes leased by ``owner`` until ``now + ttl_s``. A row
        leased (expired or not) is never handed out again until it is
        completed, released or reclaimed: two owners never hold one row.
        """
        ...

    async def lease_more(self, owner: str, ask: LeaseAsk, now: float) -> LeaseGrant:
        """``lease`` of ``ask.limit`` rows for ``ask.ttl_s``, with what the engine reads beside.

        When rows were leased and ``ask.cookies_since`` is not None, the
        cookies ``get_cookies(ask.cookies_since)`` returns, read after the
        lease; otherwise no cookies (None). For a re-crawl, what
        ``previous_pages`` returns for the page rows leased; for any other
        crawl nothing is read. One call: the engine waits once, not three times.
        """
        ...

    async def renew(self, owner: str, ttl_s: float, now: float) -> int:
        """Extend every lease ``owner`` holds to ``now + ttl_s``, and its heartbeat; how many."""
        ...

    async def complete(self, owner: str, outcomes: Sequence[Outcome], now: float) -> list[bool]:
        """Commit many fetched rows in one transaction; False marks a rejected (stale) one.

        An outcome is accepted only if ``owner`` still holds that row's lease
        (expired but not reclaimed counts as held); only the first outcome of
        a row in a batch can be. A rejected outcome writes nothing: no
        children, links, anchors or result. An accepted one with a result
        marks the row done (or pending again if it was upgraded meanwhile),
        adds its children at depth + 1 and its redirect target at the same
        depth and hop + 1, records its links (element, fragment, and where
        the page writes it: ``Discovered.line``/``column``, NULL when None; a
        link already recorded for the same source, target and fragment keeps
        its own) and anchors, and stores the result, checked at ``now``. An
        accepted outcome with ``recorded`` (a re-crawl's page answered 304)
        has, besides its children, the links its previous crawl recorded from
        ``recorded.page``, each classified by ``recorded.scope.classify_recorded``
        at depth + 1 (``crawler.recrawl.expand``): the same rows as if they were
        among its children. One with ``retry_at``
        instead puts the row back to pending, due at ``retry_at`` (``now``
        if None). Either way the row's attempts grow by one. Children exist
        before their parent is done, so outstanding work never reads zero
        while work remains.
        """
        ...

    async def complete_and_lease(
        self, owner: str, outcomes: Sequence[Outcome], now: float, ask: LeaseAsk
    ) -> tuple[list[bool], LeaseGrant]:
        """``complete``, then at once ``lease_more`` at the same ``now``: two transactions.

        The lease is never queued behind other calls: it sees the commit (the
        children just added are leasable) and nothing else runs between the
        two. If ``complete`` fails nothing is leased; if the lease fails the
        completion stands, as two calls would leave it.
        """
        ...

    async def release(self, owner: str) -> int:
        """Give back every lease ``owner`` holds, untouched (graceful stop); how many."""
        ...

    async def reclaim(self, now: float, stale_after_s: float) -> int:
        """Return to pending every lease expired before ``now``, and every lease of a dead worker.

        A worker is dead when its heartbeat is older than ``stale_after_s``,
        or its pid is gone on this machine, or it has this process's pid but
        a token no engine here holds (``liveness.dead_workers``). Dead
        workers' rows are removed. Attempts are unchanged. Their late
        completions are then rejected.
        """
        ...

    async def finish_if_quiescent(self, now: float) -> bool:
        """Mark the crawl finished (first time: at ``now``) if no row is pending or leased.

        Read and marked in one transaction; a row waiting for its retry, or
        leased with an expired lease, is outstanding work. Other crawls in the
        same database do not count.
        """
        ...

    async def wait_for_finish(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the crawl to be marked finished; whether it is.

        An idle worker waits here while others hold the last leases: whichever
        worker completes the last row marks the crawl finished
        (``finish_if_quiescent``), and the others learn it here, not at their
        next poll. A crawl finished before the call returns True at once.
        """
        ...

    async def is_seeded(self) -> bool:
        """Does the frontier hold everything the crawl starts from?

        The seeds enter it in the transaction that records the crawl
        (``open.create_crawl``); the pages its sitemaps list only once a run
        has collected them. Until then a run enqueues the recorded seeds
        again (idempotent: a crawl recorded by an older version may have
        none) and collects the sitemaps before it crawls.
        """
        ...

    async def mark_seeded(self, now: float) -> None:
        """Record that the seeds and the sitemaps' pages are in the frontier."""
        ...

    async def put_cookies(self, changed: Sequence[Cookie], now: float) -> None:
        """Upsert the crawl's cookies by (domain, path, name), stamped ``now``.

        An expired cookie is a deletion, kept so other workers learn of it; at
        most ``DEFAULT_MAX_COOKIES_PER_HOST`` per domain, live ones first.
        """
        ...

    async def get_cookies(self, since: float | None = None) -> list[Cookie]:
        """The crawl's cookies stamped at or after ``since`` (every one when None)."""
        ...

    async def previous_pages(
        self, urls: Sequence[str], *, with_links: bool = True
    ) -> dict[str, PreviousPage]:
        """For a re-crawl, what its previous crawl stored for these page URLs, by URL.

        Only pages that crawl completed with an OK result and validators are
        in it: their row there (``PreviousPage.row``), validators, status,
        content type and size, every link recorded from them (target URL,
        element, fragment, position; redirects are not links) unless
        ``with_links`` is False, and their anchors when recorded. Empty for a
        crawl that is not a re-crawl, or whose previous crawl is gone.
        ``lease_more`` hands the engine these without links: it completes a
        page answered 304 by reference (``Outcome.recorded``).
        """
        ...

    async def head_unreliable_hosts(self) -> list[str]:
        """Hosts with a result whose HEAD status a confirming GET overruled."""
        ...

    async def register_worker(self, owner: str, now: float) -> None:
        """Record this process (pid, host, heartbeat): its leases are told from a dead one's."""
        ...

    async def next_wake_at(self) -> float | None:
        """When something may next become leasable: the first due retry or lease expiry."""
        ...

    async def counts(self) -> Counts:
        """Frontier counters for progress: pending, leased, done, pages done, broken results."""
        ...

    async def add_elapsed(self, seconds: float) -> None:
        """Add active crawling time to the crawl (summed over resumes)."""
        ...

    async def get_robots(self, host: str) -> tuple[int | None, str] | None:
        """(status, body) of ``host``'s robots.txt as stored for this crawl, None if never."""
        ...

    async def put_robots(self, host: str, status: int | None, body: str, now: float) -> None:
        """Store (or replace) ``host``'s robots.txt for this crawl only."""
        ...

    def host_gate(self, owner: str, limits: Limits, ttl_s: float, wake: Callable[[], None]) -> Gate:
        """The per-host politeness gate for this owner: in memory, or shared by workers."""
        ...

    def stopping(self) -> None:
        """The engine is stopping: commit what it still hands over without holding it back."""
        ...

    def close(self) -> None:
        """Release the store's connections and threads."""
        ...
