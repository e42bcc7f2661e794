"""One run of one crawl inside the service: open it, run it, stop it, sample it.

The crawl itself is ``runner``'s: ``runner.start`` for a new crawl,
``runner.open_existing`` to resume one, ``job.run()`` to drive it, and
``job.stop()`` to end it gracefully (the engine settles in-flight requests and
gives its leases back). ``CrawlRun`` adds what a long-lived process needs:

- a stop asked for before the engine exists is delivered once it does;
- a crawl file left half-created by a kill (crawl row or seeds missing) is
  started afresh rather than resumed into an empty crawl;
- samples for live progress and metrics, read on separate read-only
  connections so they never wait for the crawl's writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import structlog

from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.errors import ForeignDatabaseError, UsageError
from crawler.service.metrics import ServiceMetrics, host_deltas
from crawler.service.progress import RunTracker
from crawler.store.sqlite import reads

log = structlog.get_logger(__name__)

COUNTS_EVERY_S = 1.0
HOSTS_EVERY_S = 5.0
SAMPLE_COST_FACTOR = 20  # a sample may take at most 1/20 of the time between samples
STOP_POLL_S = 0.01


def crawl_files(path: Path) -> list[Path]:
    """The database and its WAL and shared-memory files."""
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]


def remove_crawl_files(path: Path) -> None:
    for file in crawl_files(path):
        with contextlib.suppress(FileNotFoundError):
            file.unlink()


class CrawlRun:
    """Drives one crawl until it finishes or is stopped; see the module docstring."""

    def __init__(
        self,
        path: Path,
        seeds: list[str],
        settings: dict[str, Any],
        metrics: ServiceMetrics,
        *,
        shutdown_timeout_s: float,
    ) -> None:
        self.path = path
        self._seeds = seeds
        self._settings = settings
        self._metrics = metrics
        self._shutdown_timeout_s = shutdown_timeout_s
        self.job: runner.CrawlJob | None = None
        self.tracker = RunTracker()
        self._stop_requested = False
        self._run_task: asyncio.Task[bool] | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._engine_seen = (0, 0, 0)
        self._hosts: dict[str, tuple[int, int]] = {}
        self._next_counts_at = 0.0
        self._next_hosts_at = 0.0
        self._sampling = asyncio.Lock()
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
        job, orphaned = await asyncio.to_thread(self._open)
        self.job = job
        if orphaned:
            self._metrics.lease_expiries.inc(orphaned)
            log.info("leases_orphaned", leases=orphaned)
        try:
            self._hosts = await asyncio.to_thread(reads.host_totals, self.path)
            if self._stop_requested:
                return False
            self._run_task = asyncio.create_task(
                job.run(shutdown_timeout_s=self._shutdown_timeout_s), name="crawl-run"
            )
            return await self._run_task
        finally:
            with contextlib.suppress(Exception):
                await self.sample(final=True)
            await asyncio.to_thread(job.close)

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

    def _open(self) -> tuple[runner.CrawlJob, int]:
        """The job, and how many leases a dead process left behind in it."""
        settings = CrawlSettings.model_validate(self._settings)
        if self.path.exists():
            try:
                job, _ = runner.open_existing(self.path)
            except ForeignDatabaseError:
                raise
            except UsageError:  # killed after creating the file, before recording the crawl
                remove_crawl_files(self.path)
            else:
                counts = reads.counts(self.path)
                if counts.pending + counts.leased + counts.done > 0:
                    return job, counts.leased
                job.close()  # killed before its seeds were enqueued
                remove_crawl_files(self.path)
        return runner.start(self.path, self._seeds, settings), 0

    async def sample(self, *, final: bool = False) -> None:
        """Refresh progress and metrics when due (always when ``final``)."""
        if self._sampling.locked():
            return
        async with self._sampling:
            self._sample_engine()
            now = time.monotonic()
            if final or now >= self._next_counts_at:
                started = time.monotonic()
                counts = await asyncio.to_thread(reads.counts, self.path)
                cost = time.monotonic() - started
                self.tracker.observe(counts, time.monotonic())
                self._next_counts_at = now + max(COUNTS_EVERY_S, cost * SAMPLE_COST_FACTOR)
            if final or now >= self._next_hosts_at:
                started = time.monotonic()
                totals = await asyncio.to_thread(reads.host_totals, self.path)
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
