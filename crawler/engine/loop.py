"""Orchestration: lease → fetch → extract → scope → complete, until the store says done.

The engine holds no visited set and no count of expected work: the store is
the only judge of "finished", decided inside one transaction. What the engine
keeps in memory is bounded by the lease batch and the concurrency limits:

- ``_ready``: leased rows waiting for their host to have a free slot;
- running fetches, at most ``max_concurrency``, at most ``host_concurrency``
  per host (``HostGate``);
- ``_outcomes``: fetched rows waiting for the writer's next group commit.

Nothing blocks on a full queue: the dispatcher simply starts nothing new when
a limit is reached, and the writer drains outcomes independently.

With ``--render`` a fetched page is then loaded in the browser
(``render_step``): its host's slot is given back first, because the page's
own requests wait for that host's slots too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import structlog

from crawler import recrawl
from crawler.config import CrawlSettings
from crawler.engine.checked_hosts import CheckedHosts
from crawler.engine.cookie_sync import CookieSync
from crawler.engine.membudget import PageMemory, Reservation
from crawler.engine.parse_pool import ParsePool
from crawler.engine.render_step import BrowserLoads, Renders, render_outcome, wants_render
from crawler.models import (
    LeaseAsk,
    LeasedUrl,
    LeaseGrant,
    Outcome,
    PreviousPage,
    Result,
    ResultClass,
    UrlKind,
)
from crawler.net.fetch import Fetched, Fetcher
from crawler.net.robots import Robots
from crawler.outcome import (
    Parsed,
    Policy,
    build_outcome,
    host_pause_s,
    parse_body,
    wants_parse,
)
from crawler.scope import Scope
from crawler.store.contract import FrontierStore

log = structlog.get_logger(__name__)

MAX_COMMIT_BATCH = 512
# A group commit waits up to this long for this many outcomes: fewer, larger
# transactions write far fewer B-tree pages per URL (each page a commit
# touches is written whole; at 20 ms and 128 rows a 10,000-page SQLite crawl
# committed ~16 URLs at a time), and on PostgreSQL wait for fewer WAL flushes.
COMMIT_GATHER_S = 0.25
COMMIT_GATHER_ROWS = 256
IDLE_POLL_S = 1.0
LEASE_ROUNDS = 8
# The store's writer thread runs Python between its SQLite calls; with the
# interpreter's default 5 ms switch interval, each wake-up of the event loop
# (a response arrived) could wait that long for the GIL. Measured through a
# 50 ms-latency proxy at --host-concurrency 8 (bench/latency.py): 73% of the
# bound C / delay with 5 ms, 81% with 0.5 ms.
GIL_SWITCH_INTERVAL_S = 0.0005
# Net allocations of tracked objects between young collections while crawling
# (CPython's default: 700). A page's records live until their group commit,
# ~50 a page, so the young generation swings by tens of thousands of objects
# from one commit to the next: a threshold inside that swing collects several
# times a second, each time walking the outcomes waiting for the store, for
# nothing (bench/RESULTS.md, "The event loop's thread per page" and session
# 32). Reference counting frees almost all of them; the few cycles
# (exceptions, closed connections) wait a little longer.
GC_YOUNG_THRESHOLD = 100_000
# Parse helpers start once this many pages were parsed here: a small crawl
# is over before a helper would have paid for its start (~0.3 s, ~25 MB, on
# the other core: the loop's thread only spawns it). At 1,000, a 10,000-page
# crawl parsed over a tenth of its pages (1,000 and those of the helper's
# start) on the loop's thread, the one that saturates.
PARSE_HELPERS_AFTER_PAGES = 200
# ... or once this much HTML was: what 200 pages of a typical site weigh, and a
# few dozen of a site of large pages (the Python docs: 96 KB a page on average).
PARSE_HELPERS_AFTER_BYTES = 4 * 1024 * 1024
# A page is parsed on the loop's thread instead when every helper already holds
# this many rounds of fetches (--max-concurrency pages each; the tasks' limit
# is two rounds: past it, fetch slots wait on the helpers), or this many bytes
# of pages not parsed yet (a site of large pages: a few dozen of the Python
# docs' are a second of a helper's work), and its body is small enough not to
# hold the loop long: the loop's thread parses beside the helpers, at no other
# process's memory. A helper that keeps up never holds that much, and gets
# every page. The largest pages always go to the helpers: parsed here, one
# would stop every fetch for as long as it takes (and this process never
# holds a tree of more than a page of that size on top of the pages in flight).
SHARE_ABOVE_ROUNDS = 1.5
SHARE_ABOVE_BYTES = 2 * 1024 * 1024
SHARE_MAX_BYTES = 1024 * 1024
# Such a page (a site's table of contents, its index: the pages that link to
# all others, often met first), when other work goes on meanwhile, also starts
# the helpers at once, whatever was parsed before, and waits for them while the
# loop goes on fetching; else (no helper allowed, or nothing else to do), it is
# parsed on a thread of its own, one such page at a time. On the loop's thread
# before any helper ran, the Python docs' 2.5 MB contents.html stopped every
# fetch for as long as it took; on a thread while the helper started, this
# process held its tree beside the helper's (bench/RESULTS.md, session 41).


@dataclass(slots=True)
class RunStats:
    """Counters of this run, for progress display; not used for decisions."""

    started_at: float
    fetched: int = 0
    pages: int = 0
    broken: int = 0
    retried: int = 0
    rejected: int = 0
    in_flight: int = 0
    not_modified: int = 0  # re-crawl pages answered 304, taken from the previous crawl


class Engine:
    """Runs one crawl's frontier to quiescence (or until stopped)."""

    def __init__(
        self,
        frontier: FrontierStore,
        fetcher: Fetcher,
        scope: Scope,
        settings: CrawlSettings,
        *,
        robots: Robots | None = None,
        owner: str | None = None,
        shutdown_timeout_s: float = 10.0,
        parse_helpers: int = 0,
        renderer: Renders | None = None,
        parse_helpers_after: int | None = None,
        memory: PageMemory | None = None,
    ) -> None:
        self._frontier = frontier
        self._fetcher = fetcher
        self._scope = scope
        self._settings = settings
        self.owner = owner or uuid.uuid4().hex
        self._policy = Policy.from_settings(settings)
        self._robots = robots  # the rules to obey (the runner's, None when not obeyed)
        self._wake = asyncio.Event()
        self._checked = (
            CheckedHosts(self._robots, self._wake.set, scope.is_in_scope) if self._robots else None
        )
        jar = fetcher.jar if settings.cookies else None
        self._cookies = CookieSync(jar, frontier) if jar is not None else None
        # The store's gate: in memory for SQLite, shared by every worker for PostgreSQL.
        self._gate = frontier.host_gate(
            self.owner, self._host_limits, settings.lease_ttl_s, self._wake.set
        )
        self._timer: asyncio.Handle | None = None  # uvloop's call_at gives a plain Handle
        self._timer_at = 0.0
        self._ready: OrderedDict[str, deque[LeasedUrl]] = OrderedDict()
        self._buffered = 0
        self._running: set[asyncio.Task[None]] = set()
        self._fetching = 0  # of _running, those whose request is not answered yet
        self._outcomes: list[Outcome] = []
        # A re-crawl's view of the pages leased: what the previous crawl stored (row id).
        self._previous: dict[int, PreviousPage] = {}
        self._committing = 0
        self._writer_wake = asyncio.Event()
        self._stopping = False
        self._draining = False
        self._shutdown_timeout_s = shutdown_timeout_s
        self._frontier_dry = False
        self._leasing: asyncio.Task[None] | None = None
        self._lease_in_commit = False  # the running group commit leases after it
        # Hold no more than about eight rounds of fetches (at most the configured
        # batch): enough to keep every slot busy while a lease waits behind a
        # group commit (with four, the slots found no row leased a quarter of a
        # 10,000-page crawl's time: bench/RESULTS.md, session 35), few enough
        # that other workers on the same crawl find work too. Each lease is a
        # transaction that rewrites the pages of the rows it takes (two rounds: a
        # third of a 10,000-page SQLite crawl's commits were leases of 32 rows).
        self._batch = min(settings.lease_batch, LEASE_ROUNDS * settings.max_concurrency)
        self._fatal: BaseException | None = None
        self._parse_helpers = parse_helpers
        self._parse_helpers_after = (
            PARSE_HELPERS_AFTER_PAGES if parse_helpers_after is None else parse_helpers_after
        )
        # With a memory budget (the service), a page reserves its bytes before it is
        # fetched and gives them back once committed; parsing never runs on the loop.
        self._memory = memory
        self._reserved: dict[int, Reservation] = {}
        self._parsed_here = 0
        self._parsed_here_bytes = 0
        # Pages each helper holds past which the loop's thread parses too.
        self._share_above = max(1, int(SHARE_ABOVE_ROUNDS * settings.max_concurrency))
        self._parse_pool: ParsePool | None = None
        self._parse_pool_start: asyncio.Task[None] | None = None
        self._large_pages: ThreadPoolExecutor | None = None  # see SHARE_MAX_BYTES
        self.stats = RunStats(started_at=time.monotonic())
        self._renderer = renderer
        self._loads = BrowserLoads(fetcher, self._gate) if renderer is not None else None

    # -- public --------------------------------------------------------------

    async def run(self) -> bool:
        """Crawl until finished (True) or stopped (False). Leases are released on stop."""
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(switch_interval, GIL_SWITCH_INTERVAL_S))
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], GC_YOUNG_THRESHOLD), *thresholds[1:])
        try:
            finished = await self._run()
        finally:
            sys.setswitchinterval(switch_interval)
            gc.set_threshold(*thresholds)
            self._abandon_parse_pool()
        stats = self.stats
        log.info(
            "engine_stopped",
            finished=finished,
            owner=self.owner,
            fetched=stats.fetched,
            pages=stats.pages,
            broken=stats.broken,
            retried=stats.retried,
            rejected=stats.rejected,
            not_modified=stats.not_modified,
            seconds=round(time.monotonic() - stats.started_at, 3),
        )
        return finished

    async def _run(self) -> bool:
        now = time.time()
        await self._frontier.register_worker(self.owner, now)
        self._fetcher.learn_head_unreliable(await self._frontier.head_unreliable_hosts())
        if self._cookies is not None:
            await self._cookies.load()
        await self._frontier.reclaim(now, stale_after_s=self._settings.lease_ttl_s * 2)
        writer = asyncio.create_task(self._write_loop(), name="crawler-writer")
        renewer = asyncio.create_task(self._renew_loop(), name="crawler-renewer")
        finished = False
        try:
            finished = await self._main_loop()
        finally:
            await self._shutdown(writer, renewer)
        if self._fatal is not None:
            raise self._fatal
        return finished

    def stop(self) -> None:
        """Stop leasing; ``run`` returns once in-flight work is settled."""
        self._stopping = True
        self._wake.set()

    # -- the loop ------------------------------------------------------------

    async def _main_loop(self) -> bool:
        batch = self._batch
        while not self._stopping and self._fatal is None:
            if (
                self._leasing is None
                and not self._lease_in_commit
                and self._buffered <= batch // 2
                and not self._frontier_dry
            ):
                # In the background: the rows already leased keep being dispatched.
                # Most leases go with a group commit instead (``_lease_with_commit``).
                self._start_lease()
            self._dispatch()
            if self._is_idle():
                if await self._frontier.finish_if_quiescent(time.time()):
                    return True
                await self._wait_for_due_work()
                continue
            await self._wake.wait()
            self._wake.clear()
        return False

    def _ask(self, limit: int) -> LeaseAsk:
        since = self._cookies.since() if self._cookies is not None else None
        return LeaseAsk(limit=limit, ttl_s=self._settings.lease_ttl_s, cookies_since=since)

    def _start_lease(self) -> None:
        self._leasing = asyncio.create_task(self._lease(self._batch - self._buffered))
        self._leasing.add_done_callback(self._on_leased)

    async def _lease(self, batch: int) -> None:
        ask = self._ask(batch)
        asked_at = time.time()
        self._take(ask, await self._frontier.lease_more(self.owner, ask, asked_at), asked_at)

    async def _lease_with_commit(self) -> LeaseAsk | None:
        """Lease with the group commit about to be sent, if a round of rows or more is missing.

        A lease sent once the commit runs would wait behind it on the store's
        writer, and the free slots with it. So it goes first, ahead of the
        commit (a backend that serializes its calls takes them in order);
        or, when the frontier ran dry and the new work is this commit's
        children, in the same call right after it (the ask returned). Either
        way the rows stay within the batch: no other lease runs meanwhile.
        """
        if (
            self._stopping
            or self._draining
            or self._leasing is not None
            or self._batch - self._buffered < max(1, self._batch // LEASE_ROUNDS)
        ):
            return None
        if self._frontier_dry:
            self._lease_in_commit = True
            return self._ask(self._batch - self._buffered)
        self._start_lease()
        await asyncio.sleep(0)  # the lease's first step hands it to the store
        return None

    def _take(self, ask: LeaseAsk, grant: LeaseGrant, asked_at: float) -> None:
        """Queue the rows a lease granted by host, with what was read beside them."""
        leased = grant.rows
        self._frontier_dry = len(leased) < ask.limit
        if self._cookies is not None and grant.cookies is not None:
            self._cookies.merge(grant.cookies, asked_at)
        if self._checked is not None:
            self._checked.note(leased)
        for row in leased:
            found = grant.previous.get(row.url) if row.kind == UrlKind.PAGE else None
            if found is not None:
                self._previous[row.id] = found
            queue = self._ready.get(row.host)
            if queue is None:
                queue = self._ready[row.host] = deque()
            queue.append(row)
        self._buffered += len(leased)

    def _on_leased(self, task: asyncio.Task[None]) -> None:
        self._leasing = None
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._fatal = exc
        self._wake.set()

    def _host_limits(self, host: str) -> tuple[int, float]:
        """(concurrency, minimum interval) for ``host``: settings, per-host, Crawl-delay."""
        settings = self._settings
        concurrency, interval = settings.host_concurrency, settings.host_request_interval_s
        overrides = settings.host_settings(host)
        if overrides is not None:
            concurrency = overrides.concurrency or concurrency
            interval = max(interval, overrides.request_interval_s or 0.0)
        if self._robots is not None:
            interval = max(interval, self._robots.crawl_delays.get(host, 0.0))
        return concurrency, interval

    def _dispatch(self) -> None:
        """Start fetches round-robin across hosts while slots are free."""
        limit = self._settings.max_concurrency
        # Tasks past their request (a page being parsed) hold no slot, but
        # there are at most as many of them as of requests: memory stays bounded.
        tasks_limit = 2 * limit
        backlog_limit = MAX_COMMIT_BATCH * 2
        while (
            self._ready
            and self._fetching < limit
            and len(self._running) < tasks_limit
            and len(self._outcomes) < backlog_limit
        ):
            started = False
            for host in list(self._ready):
                if self._fetching >= limit or len(self._running) >= tasks_limit:
                    break
                if self._checked is not None and self._checked.holds(host):
                    continue  # its robots.txt is being read, for its Crawl-delay
                if not self._gate.try_acquire(host):
                    self._wake_when_ready(host)
                    continue
                queue = self._ready[host]
                row = queue.popleft()
                if not queue:
                    del self._ready[host]
                self._buffered -= 1
                self._fetching += 1
                task = asyncio.create_task(self._process(row))
                self._running.add(task)
                task.add_done_callback(self._fetch_done)
                started = True
            if not started:
                break
        self.stats.in_flight = self._fetching

    def _fetch_done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not self._running:
            self._writer_wake.set()  # nothing more is coming soon: commit what there is

    def _wake_when_ready(self, host: str) -> None:
        """A host waits for its interval or pause: look again when it is over."""
        ready_at = self._gate.ready_at(host)
        loop = asyncio.get_running_loop()
        if ready_at <= loop.time():
            return
        if self._timer is not None and self._timer_at <= ready_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = ready_at
        self._timer = loop.call_at(ready_at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._wake.set()

    def _is_idle(self) -> bool:
        return (
            self._leasing is None
            and self._buffered == 0
            and not self._running
            and not self._outcomes
            and self._committing == 0
        )

    async def _wait_for_due_work(self) -> None:
        """Nothing to do here now: wait for a retry to fall due or a lease to expire."""
        now = time.time()
        wake_at = await self._frontier.next_wake_at()
        timeout = IDLE_POLL_S if wake_at is None else min(max(wake_at - now, 0.0), IDLE_POLL_S)
        if timeout > 0:
            await self._idle_until_woken(timeout)
            self._wake.clear()
        await self._frontier.reclaim(time.time(), stale_after_s=self._settings.lease_ttl_s * 2)
        self._frontier_dry = False

    async def _idle_until_woken(self, limit_s: float) -> None:
        """Until this process has work, another worker finished the crawl, or ``limit_s``.

        With other workers on the crawl, this one runs dry while they hold the
        last leases; the store tells it when they finish, so the crawl's end
        is not a poll interval late.
        """
        woken = asyncio.ensure_future(self._wake.wait())
        finished = asyncio.ensure_future(self._frontier.wait_for_finish(limit_s))
        try:
            await asyncio.wait(
                {woken, finished}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (woken, finished):
                task.cancel()
            await asyncio.gather(woken, finished, return_exceptions=True)
        if finished.done() and not finished.cancelled():
            error = finished.exception()
            if error is not None:
                raise error

    # -- one URL ---------------------------------------------------------------

    async def _process(self, row: LeasedUrl) -> None:
        answered = False

        def on_answered() -> None:
            """The host's slot is free once its answer is in, before the body is parsed.

            A rendered page gives it back then too: its own requests need the host's slots.
            """
            nonlocal answered
            if not answered:
                answered = True
                self._fetching -= 1
                self._gate.release(row.host)
                self._wake.set()

        try:
            if self._memory is not None and row.kind >= UrlKind.ANCHORS:
                reservation = await self._memory.budget.reserve(self._memory.cost.worst())
                self._reserved[row.id] = reservation
            outcome = await self._fetch_and_build(row, on_answered)
        except BaseException:
            self._release_memory(row.id)
            raise
        finally:
            on_answered()
        self._outcomes.append(outcome)
        self._writer_wake.set()
        self._wake.set()

    async def _fetch_and_build(self, row: LeasedUrl, on_answered: Callable[[], None]) -> Outcome:
        previous = recrawl.conditional(row, self._previous.pop(row.id, None), self._policy)
        try:
            if (
                row.kind == UrlKind.PAGE
                and self._robots is not None
                and not await self._robots.allowed(row.url, row.host)
            ):
                result = Result(ResultClass.SKIPPED, error="disallowed by robots.txt")
                return Outcome(leased=row, result=result)
            if previous is not None:  # a re-crawl asks "changed since?"
                fetched = await self._fetcher.fetch_page(
                    row.url,
                    etag=previous.etag,
                    last_modified=previous.last_modified,
                    seed=row.is_seed,
                )
                if recrawl.is_not_modified(fetched):
                    self.stats.not_modified += 1
                    return recrawl.not_modified(row, previous, fetched, self._scope, self._policy)
            elif row.kind >= UrlKind.ANCHORS:
                fetched = await self._fetcher.fetch_page(row.url, seed=row.is_seed)
                self._shrink_memory(row.id, self._body_cost(fetched))
            else:
                fetched = await self._fetcher.check(row.url, row.host)
            on_answered()  # parsing is no request: another may start meanwhile
            parsed = None
            if wants_parse(row, fetched, self._policy):
                parsed = await self._parse_elsewhere(row, fetched)
                if parsed is not None and parsed.dropped:
                    log.warning("links_capped", url=row.url, dropped=parsed.dropped)
            now = time.time()
            outcome = build_outcome(row, fetched, self._scope, self._policy, now, parsed)
            if self._memory is not None:
                self._shrink_memory(row.id, self._memory.cost.after_parse(len(outcome.children)))
            pause = host_pause_s(fetched, outcome, now)
            if pause is not None:
                self._gate.pause(row.host, pause)  # the whole host waits, not only this URL
            if self._renderer is not None and wants_render(self._settings, row, fetched, outcome):
                assert self._loads is not None  # the host's slot went back with on_answered()
                outcome = await render_outcome(
                    self._renderer, row, fetched, outcome, self._scope, self._policy, self._loads
                )
            return outcome
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must cost one URL, not the crawl
            log.exception("url_failed", url=row.url)
            return Outcome(
                leased=row,
                result=Result(
                    result_class=ResultClass.BROKEN,
                    error_kind="internal",
                    error=f"internal error: {type(exc).__name__}: {exc}",
                ),
            )

    async def _parse_elsewhere(self, row: LeasedUrl, fetched: Fetched) -> Parsed | None:
        """A helper process's parse of this body; None to parse it here."""
        size = len(fetched.body or b"")
        waits = size > SHARE_MAX_BYTES and self._other_work()
        if (
            self._parse_helpers > 0
            and self._parse_pool_start is None
            and (
                self._parsed_here >= self._parse_helpers_after
                or self._parsed_here_bytes >= PARSE_HELPERS_AFTER_BYTES
                or waits
            )
        ):
            self._parse_pool_start = asyncio.create_task(self._start_parse_pool())
        if self._parse_pool_start is not None and (self._memory is not None or waits):
            await asyncio.wait({self._parse_pool_start})  # the first pages wait for the helper
        pool = self._parse_pool
        if pool is not None and pool.alive:
            if not self._parse_here_instead(pool, fetched):
                parsed = await pool.parse(row, fetched)
                if parsed is not None:
                    return parsed
            else:
                pool.send_now()
        self._parsed_here += 1
        self._parsed_here_bytes += size
        if self._memory is None and size <= SHARE_MAX_BYTES:
            return None  # parsed on the loop's thread
        parse = partial(
            parse_body, row, fetched, self._scope, self._policy.include_fragments,
            self._policy.max_links,
        )  # fmt: skip
        if self._memory is not None:  # never on the service's loop: a thread, if not a helper
            return await asyncio.to_thread(parse)
        if self._large_pages is None:  # one such page at a time (SHARE_MAX_BYTES)
            self._large_pages = ThreadPoolExecutor(1, thread_name_prefix="crawler-parse")
        return await asyncio.get_running_loop().run_in_executor(self._large_pages, parse)

    def _other_work(self) -> bool:
        """Is there more to do than this page: another fetch, a row leased, or
        outcomes on their way to the store (whose links will be leased next)?

        Only then does a large page wait for a helper: alone (a one-page check),
        it would wait for the helper's start for nothing.
        """
        return (
            len(self._running) > 1
            or self._buffered > 0
            or bool(self._outcomes)
            or self._committing > 0
        )

    def _parse_here_instead(self, pool: ParsePool, fetched: Fetched) -> bool:
        """Are the helpers behind, and this page small enough to parse on the loop?

        Not with a memory budget (the service): its loop never parses.
        """
        return (
            self._memory is None
            and len(fetched.body or b"") <= SHARE_MAX_BYTES
            and pool.behind(self._share_above, SHARE_ABOVE_BYTES)
        )

    def _body_cost(self, fetched: Fetched) -> int:
        if self._memory is None:
            return 0
        return self._memory.cost.after_fetch(len(fetched.body or b""))

    def _shrink_memory(self, row_id: int, size: int) -> None:
        reservation = self._reserved.get(row_id)
        if reservation is not None:
            reservation.shrink(size)

    def _release_memory(self, row_id: int) -> None:
        reservation = self._reserved.pop(row_id, None)
        if reservation is not None:
            reservation.release()

    async def _start_parse_pool(self) -> None:
        pool = ParsePool(
            self._scope, self._policy.include_fragments, self._parse_helpers, self._policy.max_links
        )
        self._parse_pool = pool  # no helper until started: pages are parsed here meanwhile
        await pool.start()

    def _abandon_parse_pool(self) -> None:
        """The helpers of a run whose shutdown was cancelled before closing them (a
        second cancel): stopped here, or they would outlive the crawl in a service."""
        if self._parse_pool_start is not None:
            self._parse_pool_start.cancel()
        if self._parse_pool is not None:
            self._parse_pool.abandon()

    # -- background loops ----------------------------------------------------

    async def _write_loop(self) -> None:
        """Group commit: whatever finished while the last commit ran goes in the next."""
        while True:
            await self._writer_wake.wait()
            self._writer_wake.clear()
            if self._draining and not self._outcomes:
                return
            await self._gather()
            while self._outcomes:
                batch = self._outcomes[:MAX_COMMIT_BATCH]
                del self._outcomes[:MAX_COMMIT_BATCH]
                self._committing += len(batch)
                ask = None
                grant = None
                try:
                    if self._cookies is not None:  # readable before the children are
                        await self._cookies.flush()
                    ask = await self._lease_with_commit()
                    now = time.time()
                    if ask is None:
                        accepted = await self._frontier.complete(self.owner, batch, now)
                    else:
                        accepted, grant = await self._frontier.complete_and_lease(
                            self.owner, batch, now, ask
                        )
                except Exception as exc:
                    self._fatal = exc
                    self._wake.set()
                    return
                finally:
                    self._lease_in_commit = False
                    self._committing -= len(batch)
                    for outcome in batch:
                        self._release_memory(outcome.leased.id)
                self._count(batch, accepted)
                if ask is not None and grant is not None:
                    self._take(ask, grant, now)  # says whether the frontier is dry now
                else:
                    self._frontier_dry = False
                self._wake.set()
            if self._draining:
                return

    async def _gather(self) -> None:
        """Wait for a full group commit, ``COMMIT_GATHER_S`` at most, while fetches run.

        With no fetch in flight (the end of a crawl, a chain of pages) nothing
        more is coming: commit at once, so the next lease finds the children.
        The same when the frontier ran dry, every leased row is started and a
        page's children wait (``_starved``): they are the only new work.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COMMIT_GATHER_S
        while (
            not self._draining
            and self._running
            and len(self._outcomes) < COMMIT_GATHER_ROWS
            and not self._starved()
        ):
            left = deadline - loop.time()
            if left <= 0:
                return
            self._writer_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._writer_wake.wait(), left)

    def _starved(self) -> bool:
        """Would free slots wait for this commit? The last lease took all there was, all started,
        and what waits to be committed holds new URLs (a check's outcome holds none)."""
        return (
            self._frontier_dry
            and self._buffered == 0
            and self._leasing is None
            and any(outcome.children or outcome.recorded for outcome in self._outcomes)
        )

    def _count(self, batch: list[Outcome], accepted: list[bool]) -> None:
        for outcome, ok in zip(batch, accepted, strict=True):
            if not ok:
                self.stats.rejected += 1
                log.warning("completion_rejected", url=outcome.leased.url)
                continue
            if outcome.result is None:
                self.stats.retried += 1
                continue
            self.stats.fetched += 1
            if outcome.leased.kind == UrlKind.PAGE:
                self.stats.pages += 1
            if outcome.result.result_class == ResultClass.BROKEN:
                self.stats.broken += 1

    async def _renew_loop(self) -> None:
        interval = self._settings.lease_ttl_s / 3
        while True:
            await asyncio.sleep(interval)
            await self._frontier.renew(self.owner, self._settings.lease_ttl_s, time.time())

    async def _shutdown(self, writer: asyncio.Task[None], renewer: asyncio.Task[None]) -> None:
        """Settle in-flight work, commit it, and give back the leases not done."""
        renewer.cancel()
        if self._timer is not None:
            self._timer.cancel()
        if self._leasing is not None:  # its rows must be leased before they are released
            await asyncio.gather(self._leasing, return_exceptions=True)
        if self._running:
            _, still_running = await asyncio.wait(
                set(self._running), timeout=self._shutdown_timeout_s
            )
            for task in still_running:
                task.cancel()
            await asyncio.gather(*still_running, return_exceptions=True)
        # Let the writer commit what finished, then stop it.
        self._draining = True
        self._frontier.stopping()
        self._writer_wake.set()
        await asyncio.gather(writer, return_exceptions=True)
        await asyncio.gather(renewer, return_exceptions=True)
        self._ready.clear()
        self._previous.clear()
        self._buffered = 0
        if self._parse_pool_start is not None:
            await asyncio.gather(self._parse_pool_start, return_exceptions=True)
        if self._parse_pool is not None:
            await self._parse_pool.close()
        if self._large_pages is not None:
            # A parse still running (its task was cancelled) ends on its own.
            self._large_pages.shutdown(wait=False)
        await self._gate.aclose()
        if self._checked is not None:
            await self._checked.aclose()
        if self._cookies is not None and self._fatal is None:
            with contextlib.suppress(Exception):  # the leases matter more than the cookies
                await self._cookies.flush()
        for row_id in list(self._reserved):  # not committed: the budget is shared
            self._release_memory(row_id)
        if self._fatal is None:
            await self._frontier.release(self.owner)
