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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass

import structlog

from crawler.config import CrawlSettings
from crawler.engine.checked_hosts import CheckedHosts
from crawler.engine.cookie_sync import CookieSync
from crawler.engine.parse_pool import ParsePool
from crawler.models import LeasedUrl, Outcome, Result, ResultClass, UrlKind
from crawler.net.fetch import Fetched, Fetcher
from crawler.net.robots import Robots
from crawler.outcome import Parsed, Policy, build_outcome, host_pause_s, wants_parse
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
LEASE_ROUNDS = 4
# Parse helpers start once this many pages were parsed here: a small crawl
# is over before a helper would have paid for its start (~0.3 s, ~25 MB).
PARSE_HELPERS_AFTER_PAGES = 1000


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
        self._outcomes: list[Outcome] = []
        self._committing = 0
        self._writer_wake = asyncio.Event()
        self._stopping = False
        self._draining = False
        self._shutdown_timeout_s = shutdown_timeout_s
        self._frontier_dry = False
        self._leasing: asyncio.Task[None] | None = None
        self._fatal: BaseException | None = None
        self._parse_helpers = parse_helpers
        self._parsed_here = 0
        self._parse_pool: ParsePool | None = None
        self._parse_pool_start: asyncio.Task[None] | None = None
        self.stats = RunStats(started_at=time.monotonic())

    # -- public --------------------------------------------------------------

    async def run(self) -> bool:
        """Crawl until finished (True) or stopped (False). Leases are released on stop."""
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
            seconds=round(time.monotonic() - stats.started_at, 3),
        )
        return finished

    def stop(self) -> None:
        """Stop leasing; ``run`` returns once in-flight work is settled."""
        self._stopping = True
        self._wake.set()

    # -- the loop ------------------------------------------------------------

    async def _main_loop(self) -> bool:
        # Hold no more than about four rounds of fetches: enough to keep every slot
        # busy while a lease waits behind a group commit, few enough that other
        # workers on the same crawl find work too. Each lease is a transaction
        # that rewrites the pages of the rows it takes (two rounds: a third of a
        # 10,000-page SQLite crawl's commits were leases of 32 rows).
        batch = min(self._settings.lease_batch, LEASE_ROUNDS * self._settings.max_concurrency)
        while not self._stopping and self._fatal is None:
            if self._leasing is None and self._buffered <= batch // 2 and not self._frontier_dry:
                # In the background: the lease waits behind a group commit on the
                # writer thread, and the rows already leased keep being dispatched.
                self._leasing = asyncio.create_task(self._lease(batch - self._buffered))
                self._leasing.add_done_callback(self._on_leased)
            self._dispatch()
            if self._is_idle():
                if await self._frontier.finish_if_quiescent(time.time()):
                    return True
                await self._wait_for_due_work()
                continue
            await self._wake.wait()
            self._wake.clear()
        return False

    async def _lease(self, batch: int) -> None:
        leased = await self._frontier.lease(
            self.owner, batch, self._settings.lease_ttl_s, time.time()
        )
        self._frontier_dry = len(leased) < batch
        if self._cookies is not None and leased:
            await self._cookies.refresh()
        if self._checked is not None:
            self._checked.note(leased)
        for row in leased:
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
        backlog_limit = MAX_COMMIT_BATCH * 2
        while self._ready and len(self._running) < limit and len(self._outcomes) < backlog_limit:
            started = False
            for host in list(self._ready):
                if len(self._running) >= limit:
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
                task = asyncio.create_task(self._process(row))
                self._running.add(task)
                task.add_done_callback(self._fetch_done)
                started = True
            if not started:
                break
        self.stats.in_flight = len(self._running)

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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
        await self._frontier.reclaim(time.time(), stale_after_s=self._settings.lease_ttl_s * 2)
        self._frontier_dry = False

    # -- one URL ---------------------------------------------------------------

    async def _process(self, row: LeasedUrl) -> None:
        try:
            outcome = await self._fetch_and_build(row)
        finally:
            self._gate.release(row.host)
        self._outcomes.append(outcome)
        self._writer_wake.set()
        self._wake.set()

    async def _fetch_and_build(self, row: LeasedUrl) -> Outcome:
        try:
            if (
                row.kind == UrlKind.PAGE
                and self._robots is not None
                and not await self._robots.allowed(row.url, row.host)
            ):
                result = Result(ResultClass.SKIPPED, error="disallowed by robots.txt")
                return Outcome(leased=row, result=result)
            if row.kind >= UrlKind.ANCHORS:
                fetched = await self._fetcher.fetch_page(row.url)
            else:
                fetched = await self._fetcher.check(row.url, row.host)
            parsed = None
            if wants_parse(row, fetched, self._policy):
                parsed = await self._parse_elsewhere(row, fetched)
            now = time.time()
            outcome = build_outcome(row, fetched, self._scope, self._policy, now, parsed)
            pause = host_pause_s(fetched, outcome, now)
            if pause is not None:
                self._gate.pause(row.host, pause)  # the whole host waits, not only this URL
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
        pool = self._parse_pool
        if pool is not None and pool.alive:
            return await pool.parse(row, fetched)
        self._parsed_here += 1
        if (
            self._parse_helpers > 0
            and self._parse_pool_start is None
            and self._parsed_here >= PARSE_HELPERS_AFTER_PAGES
        ):
            self._parse_pool_start = asyncio.create_task(self._start_parse_pool())
        return None

    async def _start_parse_pool(self) -> None:
        pool = ParsePool(self._scope, self._policy.include_fragments, self._parse_helpers)
        await pool.start()
        self._parse_pool = pool

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
                try:
                    if self._cookies is not None:  # readable before the children are
                        await self._cookies.flush()
                    accepted = await self._frontier.complete(self.owner, batch, time.time())
                except Exception as exc:
                    self._fatal = exc
                    self._wake.set()
                    return
                finally:
                    self._committing -= len(batch)
                self._count(batch, accepted)
                self._frontier_dry = False
                self._wake.set()
            if self._draining:
                return

    async def _gather(self) -> None:
        """Wait for a full group commit, ``COMMIT_GATHER_S`` at most, while fetches run.

        With no fetch in flight (the end of a crawl, a chain of pages) nothing
        more is coming: commit at once, so the next lease finds the children.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COMMIT_GATHER_S
        while not self._draining and self._running and len(self._outcomes) < COMMIT_GATHER_ROWS:
            left = deadline - loop.time()
            if left <= 0:
                return
            self._writer_wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._writer_wake.wait(), left)

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
        self._buffered = 0
        if self._parse_pool_start is not None:
            await asyncio.gather(self._parse_pool_start, return_exceptions=True)
        if self._parse_pool is not None:
            await self._parse_pool.close()
        await self._gate.aclose()
        if self._checked is not None:
            await self._checked.aclose()
        if self._cookies is not None and self._fatal is None:
            with contextlib.suppress(Exception):  # the leases matter more than the cookies
                await self._cookies.flush()
        if self._fatal is None:
            await self._frontier.release(self.owner)
