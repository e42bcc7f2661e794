"""One run of one crawl inside the service: open it, run it, stop it, sample it.

The crawl itself is ``runner``'s: ``runner.start`` for a new crawl,
``runner.open_existing`` to resume one, ``job.run()`` to drive it, and
``job.stop()`` to end it gracefully (the engine settles in-flight requests and
gives its leases back). ``CrawlRun`` adds what a long-lived process needs:

- a stop asked for before the engine exists is delivered once it does;
- a crawl left half-created by a kill (crawl row or seeds missing) is
  started afresh rather than resumed into an empty crawl (``store.prepare``);
- once the frontier holds the seeds, the store is told (``mark_seeded``), so
  ``crawler work`` processes on PostgreSQL may join;
- samples for live progress, per-worker rates and metrics, read through the
  ``ServiceStore`` on connections of their own, so they never wait for the
  crawl's writer.

Which backend holds the crawl is the store's business: the run asks it for
the ``CrawlTarget`` to hand the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any

import structlog

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.engine.membudget import ByteBudget, PageCost, PageMemory
from crawler.service.budget import MemoryPlan
from crawler.service.metrics import ServiceMetrics, host_deltas
from crawler.service.progress import RunTracker, WorkerTracker
from crawler.store.service import ServiceStore

log = structlog.get_logger(__name__)

COUNTS_EVERY_S = 1.0
HOSTS_EVERY_S = 5.0
SAMPLE_COST_FACTOR = 20  # a sample may take at most 1/20 of the time between samples
STOP_POLL_S = 0.01


class CrawlRun:
    """Drives one crawl until it finishes or is stopped; see the module docstring."""

    def __init__(
        self,
        store: ServiceStore,
        crawl_id: int,
        seeds: list[str],
        settings: dict[str, Any],
        metrics: ServiceMetrics,
        *,
        shutdown_timeout_s: float,
        memory: tuple[MemoryPlan, ByteBudget] | None = None,
        previous_crawl_id: int | None = None,
    ) -> None:
        self._store = store
        self.previous_crawl_id = previous_crawl_id
        self.crawl_id = crawl_id
        self._seeds = seeds
        self._settings = settings
        self._metrics = metrics
        self._shutdown_timeout_s = shutdown_timeout_s
        self._memory = memory
        self.job: runner.CrawlJob | None = None
        self.tracker = RunTracker()
        self.workers = WorkerTracker()
        self._stop_requested = False
        self._run_task: asyncio.Task[bool] | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._engine_seen = (0, 0, 0)
        self._hosts: dict[str, tuple[int, int]] = {}
        self._next_counts_at = 0.0
        self._next_hosts_at = 0.0
        self._sampling = asyncio.Lock()
        self._seeded: list[asyncio.Task[None]] = []
        self._done = False

    @property
    def in_flight(self) -> int:
        engine = self.job.engine if self.job is not None else None
        return engine.stats.in_flight if engine is not None else 0

    async def execute(self) -> bool:
        """Crawl until finished (True) or stopped (False)."""
        try:
            return await self._execute()
        finally:
            self._done = True

    async def _execute(self) -> bool:
        orphaned = await self._store.prepare(self.crawl_id)
        job = await asyncio.to_thread(self._open, orphaned is not None)
        self.job = job
        if orphaned:
            self._metrics.lease_expiries.inc(orphaned)
            log.info("leases_orphaned", leases=orphaned)
        loop = asyncio.get_running_loop()
        job.on_seeded = lambda: self._seeded.append(loop.create_task(self._mark_seeded()))
        try:
            self._hosts = await self._store.host_totals(self.crawl_id)
            if self._stop_requested:
                return False
            self._run_task = asyncio.create_task(self._run(job), name="crawl-run")
            return await self._run_task
        finally:
            with contextlib.suppress(Exception):
                await self.sample(final=True)
            await asyncio.gather(*self._seeded, return_exceptions=True)
            await asyncio.to_thread(job.close)

    def _run(self, job: runner.CrawlJob) -> Coroutine[Any, Any, bool]:
        """The job's run, within the service's memory budget when it has one.

        The crawl's body and links-per-page caps are lowered to the budget's (a
        crawl may ask for less); its pages are parsed by a helper process from
        the first one, and reserve their bytes in the budget all crawls share.
        """
        if self._memory is None:
            return job.run(shutdown_timeout_s=self._shutdown_timeout_s)
        plan, shared = self._memory
        asked = job.settings
        links = plan.max_links_per_page
        if asked.max_links_per_page is not None:
            links = min(links, asked.max_links_per_page)
        job.settings = asked.model_copy(
            update={
                "max_body_bytes": min(asked.max_body_bytes, plan.max_body_bytes),
                "max_links_per_page": links,
            }
        )
        cost = PageCost(job.settings.max_body_bytes, links)
        return job.run(
            shutdown_timeout_s=self._shutdown_timeout_s,
            parse_helpers=plan.helpers_per_crawl,
            parse_helpers_after=0,
            memory=PageMemory(shared, cost),
        )

    async def _mark_seeded(self) -> None:
        await self._store.mark_seeded(self.crawl_id, time.time())

    def stop(self) -> None:
        """Ask for a graceful stop, now or as soon as the engine exists."""
        self._stop_requested = True
        job = self.job
        if job is not None and job.engine is not None:
            job.stop()
        elif self._stopper is None:
            self._stopper = asyncio.create_task(self._stop_when_engine_exists())

    async def _stop_when_engine_exists(self) -> None:
        while self.job is None or self.job.engine is None:
            if self._done:
                return
            await asyncio.sleep(STOP_POLL_S)
        self.job.stop()

    def _open(self, resume: bool) -> runner.CrawlJob:
        """The job: the recorded crawl, or a new one under the service's id."""
        target = self._store.target(self.crawl_id)
        if resume:
            job, _ = runner.open_existing(target.db, target.crawl_id)
            return job
        settings = CrawlSettings.model_validate(self._settings)
        # A definition's run is a re-crawl of its previous finished run: both are in
        # one database (PostgreSQL, or the definition's SQLite file), under the
        # service's ids. A one-off crawl (its own file, crawl id None) has no previous.
        previous = self.previous_crawl_id if target.crawl_id is not None else None
        return runner.start(
            target.db,
            self._seeds,
            settings,
            crawl_id=target.crawl_id,
            previous_crawl_id=previous,
        )

    async def sample(self, *, final: bool = False) -> None:
        """Refresh progress and metrics when due (always when ``final``)."""
        if self._sampling.locked():
            return
        async with self._sampling:
            self._sample_engine()
            now = time.monotonic()
            if final or now >= self._next_counts_at:
                started = time.monotonic()
                snap = await self._store.snapshot(self.crawl_id)
                workers = await self._store.workers(self.crawl_id)
                cost = time.monotonic() - started
                if snap is not None:
                    self.tracker.observe(snap.counts, time.monotonic())
                self.workers.observe(workers, time.monotonic())
                self._next_counts_at = now + max(COUNTS_EVERY_S, cost * SAMPLE_COST_FACTOR)
            if final or now >= self._next_hosts_at:
                started = time.monotonic()
                totals = await self._store.host_totals(self.crawl_id)
                cost = time.monotonic() - started
                self._metrics.add_host_totals(host_deltas(self._hosts, totals))
                self._hosts = totals
                self._next_hosts_at = now + max(HOSTS_EVERY_S, cost * SAMPLE_COST_FACTOR)

    def _sample_engine(self) -> None:
        engine = self.job.engine if self.job is not None else None
        if engine is None:
            return
        stats = engine.stats
        seen = (stats.pages, stats.fetched, stats.broken)
        pages, links, broken = (max(a - b, 0) for a, b in zip(seen, self._engine_seen, strict=True))
        self._engine_seen = seen
        if pages:
            self._metrics.pages.inc(pages)
        if links:
            self._metrics.links.inc(links)
        if broken:
            self._metrics.broken.inc(broken)
