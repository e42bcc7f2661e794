"""Crawls of the service: their states, the queue, and at most N running at once.

Architecture:

- ``Entry`` (from ``index``) is the crawl's persisted state, the user's intent:
  queued, running, paused, cancelled, finished, failed, deleting. It is
  changed here, in memory first (so decisions never race), then written to
  the index in order.
- ``CrawlRun`` (from ``runs``) drives one crawl while it runs. A crawl is
  "pausing" or "cancelling" between the request and its engine's stop.
- ``_kick`` starts queued crawls, oldest ``queued_at`` first, while fewer than
  ``max_running`` runs exist. It runs after every change that can free a slot.
- At start, crawls recorded as running (the service stopped or died under
  them) go back to the queue in their old order and resume. At shutdown each
  run is stopped gracefully and left recorded as running, so it resumes next
  time; a kill loses nothing either, the engine's leases just expire.

Runs of crawl definitions (``scheduler``) are crawls like any other, with
their ``definition_id``: each starts as a re-crawl of its definition's
latest finished run (``previous_run``). When one finishes, its webhook
delivery (``delivery_for``, the scheduler's: the diff, when it has new broken
links) is recorded in the same transaction as its finished state
(``ServiceStore.finish``), so a kill in between loses neither: the run stays
recorded as running, resumes, finds its crawl done and records both. Then the
``on_finished`` callbacks (the scheduler's: retention, the next run) run in a
task of their own. ``PAUSE_BEFORE_FINISH_ENV`` holds a run in that window, for
the fault test that kills the service there.

Every crawl's task binds ``crawl_id`` to structlog's context, so each log
line of that crawl (engine's included) carries it.

Storage is a ``crawler.store.service.ServiceStore``: SQLite files under the
data directory, or one PostgreSQL database (``--db``), where ``crawler work``
processes on other machines join the running crawls and leave them when
their state here stops being running (pause, cancel, delete). A delete waits
for them to leave before it removes the crawl's rows.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from crawler.engine.membudget import ByteBudget
from crawler.service import budget
from crawler.service.budget import MemoryPlan
from crawler.service.config import MAX_QUEUED, ServiceConfig
from crawler.service.metrics import ServiceMetrics
from crawler.service.progress import ZERO_COUNTS, settled
from crawler.service.runs import CrawlRun
from crawler.service.schemas import Progress, WorkerView
from crawler.store import crawl_stats, liveness
from crawler.store.service import Delivery, Entry, ServiceStore, open_service_store

log = structlog.get_logger(__name__)

SAMPLE_EVERY_S = 0.5
STOP_GRACE_S = 5.0  # beyond the engine's shutdown timeout, before a run is cancelled
WORKERS_GONE_POLL_S = 0.2
STATES = ("queued", "running", "paused", "cancelled", "finished", "failed", "deleting")
ACTIVE_STATES = frozenset({"queued", "running", "paused"})  # a run that may still go on
# Tests only: a file path; a run that finished writes it and waits there, before its
# finish (and webhook delivery) is recorded, so a test can kill the service in that window.
PAUSE_BEFORE_FINISH_ENV = "CRAWLER_TEST_PAUSE_BEFORE_FINISH"
PAUSE_BEFORE_FINISH_S = 120.0


class CrawlNotFoundError(LookupError):
    """No crawl with this id."""


class ConflictError(RuntimeError):
    """The crawl is in a state where this action makes no sense."""


class QueueFullError(RuntimeError):
    """Too many crawls waiting."""


@dataclass(slots=True)
class _Running:
    run: CrawlRun
    task: asyncio.Task[None] | None = None
    stopping: bool = False


@dataclass(slots=True)
class _Settled:
    state: str
    progress: Progress


@dataclass
class CrawlManager:
    """The crawls of one data directory; see the module docstring."""

    config: ServiceConfig
    metrics: ServiceMetrics
    _store: ServiceStore | None = None
    _entries: dict[int, Entry] = field(default_factory=dict)
    _running: dict[int, _Running] = field(default_factory=dict)
    _settled: dict[int, _Settled] = field(default_factory=dict)
    _closing: bool = False
    _sampler: asyncio.Task[None] | None = None
    memory: MemoryPlan | None = None
    _page_budget: ByteBudget | None = None
    on_finished: list[Callable[[Entry], Awaitable[None]]] = field(default_factory=list)
    # The webhook delivery a finished run records with its end, and who sends it.
    delivery_for: Callable[[Entry], Awaitable[Delivery | None]] | None = None
    on_delivery: Callable[[Delivery], None] | None = None
    on_deleted: list[Callable[[int], None]] = field(default_factory=list)
    _hooks: set[asyncio.Task[None]] = field(default_factory=set)

    # -- lifecycle -------------------------------------------------------------

    async def open(self) -> None:
        self.memory = budget.plan(self.config.memory_budget_bytes, self.config.max_running)
        self._page_budget = ByteBudget(self.memory.page_budget_bytes)
        log.info(
            "memory_budget",
            budget_bytes=self.memory.budget_bytes,
            max_body_bytes=self.memory.max_body_bytes,
            max_links_per_page=self.memory.max_links_per_page,
            page_budget_bytes=self.memory.page_budget_bytes,
        )
        self._store = await open_service_store(self.config.db, self.config.data_dir)
        for entry in await self._store.entries():
            self._entries[entry.id] = entry
        for entry in list(self._entries.values()):
            if entry.state == "deleting":
                await self._finish_delete(entry)
        resumed = [e.id for e in self._entries.values() if e.state == "running"]
        for crawl_id in resumed:  # back in the queue, in their old order, until a slot is free
            self._entries[crawl_id].state = "queued"
        if resumed:
            log.info("crawls_resuming", crawl_ids=resumed)
        self.metrics.watch_states(STATES, self.count)
        self.metrics.in_flight.set_function(
            lambda: sum(r.run.in_flight for r in self._running.values())
        )
        self.metrics.frontier.labels(state="pending").set_function(
            lambda: sum(r.run.tracker.counts.pending for r in self._running.values())
        )
        self.metrics.frontier.labels(state="leased").set_function(
            lambda: sum(r.run.tracker.counts.leased for r in self._running.values())
        )
        self._sampler = asyncio.create_task(self._sample_loop(), name="crawl-sampler")
        self._kick()

    async def close(self) -> None:
        """Stop every run gracefully; they stay recorded as running, to resume."""
        self._closing = True
        for running in self._running.values():
            running.stopping = True
            running.run.stop()
        tasks = [r.task for r in self._running.values() if r.task is not None]
        tasks.extend(self._hooks)
        if tasks:
            log.info("crawls_stopping", crawls=len(tasks))
            await self._settle(tasks)
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        if self._store is not None:
            await self._store.close()

    @property
    def store(self) -> ServiceStore:
        assert self._store is not None, "CrawlManager.open() first"
        return self._store

    # -- reading -----------------------------------------------------------------

    def get(self, crawl_id: int) -> Entry:
        entry = self._entries.get(crawl_id)
        if entry is None:
            raise CrawlNotFoundError(crawl_id)
        return entry

    def entries(self) -> list[Entry]:
        """Newest first."""
        return sorted(self._entries.values(), key=lambda e: e.id, reverse=True)

    def count(self, state: str) -> int:
        if state == "running":
            return len(self._running)
        return sum(
            1 for e in self._entries.values() if e.state == state and e.id not in self._running
        )

    def shown_state(self, entry: Entry) -> str:
        """The state as the API shows it, with the transitional ones."""
        running = self._running.get(entry.id)
        if running is None:
            return entry.state
        if entry.state == "paused":
            return "pausing"
        if entry.state == "cancelled":
            return "cancelling"
        if entry.state == "deleting":
            return "deleting"
        return "running"

    def queue_position(self, entry: Entry) -> int | None:
        if entry.state != "queued" or entry.id in self._running:
            return None
        key = (entry.queued_at, entry.id)
        return 1 + sum(1 for e in self._queue() if (e.queued_at, e.id) < key)

    def workers(self, entry: Entry) -> list[WorkerView]:
        """The workers of a running crawl with their rates; none when it is not running."""
        running = self._running.get(entry.id)
        return [] if running is None else running.run.workers.views()

    async def progress(self, entry: Entry) -> Progress:
        running = self._running.get(entry.id)
        if running is not None:
            return running.run.tracker.progress(running.run.in_flight)
        cached = self._settled.get(entry.id)
        if cached is not None and cached.state == entry.state:
            return cached.progress
        try:
            snap = await self.store.snapshot(entry.id)
        except Exception as exc:  # a damaged crawl must not break the listing
            log.warning("progress_unreadable", crawl_id=entry.id, error=str(exc))
            return settled(ZERO_COUNTS, 0.0)
        progress = (
            settled(ZERO_COUNTS, 0.0) if snap is None else settled(snap.counts, snap.elapsed_s)
        )
        self._settled[entry.id] = _Settled(entry.state, progress)
        return progress

    # -- changing ----------------------------------------------------------------

    def runs_of(self, definition_id: int) -> list[Entry]:
        """A definition's runs, newest first."""
        return [e for e in self.entries() if e.definition_id == definition_id]

    def previous_run(self, entry: Entry) -> Entry | None:
        """The latest finished run of the entry's definition before it."""
        if entry.definition_id is None:
            return None
        done = [
            e
            for e in self.runs_of(entry.definition_id)
            if e.id < entry.id and e.state == "finished"
        ]
        return done[0] if done else None

    async def create(
        self, seeds: list[str], settings: dict[str, Any], definition_id: int | None = None
    ) -> Entry:
        if self.count("queued") >= MAX_QUEUED:
            raise QueueFullError(f"{MAX_QUEUED} crawls are queued already")
        entry = await self.store.insert(seeds, settings, time.time(), definition_id)
        self._entries[entry.id] = entry
        log.info("crawl_created", crawl_id=entry.id, seeds=len(seeds), definition_id=definition_id)
        self._kick()
        return entry

    async def pause(self, crawl_id: int) -> Entry:
        entry = self.get(crawl_id)
        if entry.state == "paused":
            return entry
        if entry.state not in ("queued", "running"):
            raise ConflictError(f"crawl {crawl_id} is {entry.state}; only a queued or running one")
        await self._set(entry, "paused")
        self._stop_run(crawl_id)
        return entry

    async def resume(self, crawl_id: int) -> Entry:
        entry = self.get(crawl_id)
        if entry.state in ("queued", "running"):
            return entry
        if entry.state not in ("paused", "failed"):
            raise ConflictError(f"crawl {crawl_id} is {entry.state}; only a paused or failed one")
        if entry.definition_id is not None:  # never two runs of one definition at once
            other = next(
                (
                    e
                    for e in self.runs_of(entry.definition_id)
                    if e.id != crawl_id and e.state in ACTIVE_STATES
                ),
                None,
            )
            if other is not None:
                raise ConflictError(
                    f"crawl {crawl_id}: run {other.id} of its definition "
                    f"{entry.definition_id} is {other.state}"
                )
        entry.queued_at = time.time()
        entry.error = None
        await self._set(entry, "queued")
        self._kick()
        return entry

    async def cancel(self, crawl_id: int) -> Entry:
        entry = self.get(crawl_id)
        if entry.state == "cancelled":
            return entry
        if entry.state in ("finished", "deleting"):
            raise ConflictError(f"crawl {crawl_id} is {entry.state} already")
        await self._set(entry, "cancelled")
        self._stop_run(crawl_id)
        return entry

    async def delete(self, crawl_id: int) -> None:
        entry = self.get(crawl_id)
        if entry.state == "deleting":
            raise ConflictError(f"crawl {crawl_id} is being deleted already")
        await self._set(entry, "deleting")
        running = self._running.get(crawl_id)
        if running is not None and running.task is not None:
            self._stop_run(crawl_id)
            await self._settle([running.task])
        await self._finish_delete(entry)

    # -- internals -----------------------------------------------------------------

    async def _set(self, entry: Entry, state: str) -> None:
        entry.state = state
        self._settled.pop(entry.id, None)
        await self.store.update(entry)

    def _stop_run(self, crawl_id: int) -> None:
        running = self._running.get(crawl_id)
        if running is not None and not running.stopping:
            running.stopping = True
            running.run.stop()

    async def _settle(self, tasks: list[asyncio.Task[None]]) -> None:
        """Wait for stopped runs; cancel those that outlive the engine's own timeout."""
        _, late = await asyncio.wait(tasks, timeout=self.config.shutdown_timeout_s + STOP_GRACE_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _finish_delete(self, entry: Entry) -> None:
        await self._workers_gone(entry.id)
        await self.store.delete(entry.id)
        self._entries.pop(entry.id, None)
        self._settled.pop(entry.id, None)
        for forget in self.on_deleted:
            forget(entry.id)
        log.info("crawl_deleted", crawl_id=entry.id)

    async def _workers_gone(self, crawl_id: int) -> None:
        """Wait (bounded) until no live worker holds the crawl: remote ones see 'deleting'."""
        deadline = time.monotonic() + self.config.shutdown_timeout_s + STOP_GRACE_S
        while time.monotonic() < deadline:
            rows = await self.store.workers(crawl_id)
            now = time.time()
            stale_after_s = 2 * max(float(self.get(crawl_id).settings.get("lease_ttl_s", 60)), 1)
            raw = [(w.token, w.pid, w.hostname, w.heartbeat_at) for w in rows]
            if len(liveness.dead_workers(raw, now, stale_after_s)) == len(raw):
                return
            await asyncio.sleep(WORKERS_GONE_POLL_S)
        log.warning("crawl_workers_still_running", crawl_id=crawl_id)

    def _queue(self) -> list[Entry]:
        """Queued crawls, oldest first (those resumed at start kept their old place)."""
        waiting = [
            e for e in self._entries.values() if e.state == "queued" and e.id not in self._running
        ]
        return sorted(waiting, key=lambda e: (e.queued_at, e.id))

    def _kick(self) -> None:
        """Start queued crawls while there are free slots."""
        if self._closing:
            return
        for entry in self._queue():
            if len(self._running) >= self.config.max_running:
                return
            previous = self.previous_run(entry)
            run = CrawlRun(
                self.store,
                entry.id,
                entry.seeds,
                entry.settings,
                self.metrics,
                shutdown_timeout_s=self.config.shutdown_timeout_s,
                memory=(self.memory, self._page_budget)
                if self.memory is not None and self._page_budget is not None
                else None,
                previous_crawl_id=None if previous is None else previous.id,
            )
            running = self._running[entry.id] = _Running(run)
            resumed = entry.started_at is not None
            entry.state = "running"
            entry.started_at = entry.started_at or time.time()
            self._settled.pop(entry.id, None)
            running.task = asyncio.create_task(self._drive(entry, running, resumed), name="crawl")

    async def _drive(self, entry: Entry, running: _Running, resumed: bool) -> None:
        """The crawl's task: its log lines carry its id."""
        structlog.contextvars.bind_contextvars(crawl_id=entry.id)
        finished = False
        try:
            await self.store.update(entry)
            log.info("crawl_started", resumed=resumed)
            finished = await running.run.execute()
        except asyncio.CancelledError:
            log.warning("crawl_cancelled_hard")
            raise
        except Exception as exc:
            log.exception("crawl_failed")
            if entry.state in ("running", "queued"):
                entry.state = "failed"
                entry.error = f"{type(exc).__name__}: {exc}"
        finally:
            del self._running[entry.id]
            self._settled.pop(entry.id, None)
        refused = await self._refused_seeds(entry) if finished else []
        delivery = None
        if finished and not refused and entry.state != "deleting":
            delivery = await self._delivery(entry)
            await _pause_before_finish(entry)
        if finished and entry.state != "deleting" and refused:
            # Not a clean crawl of nothing: the place it was asked to start was refused.
            entry.state = "failed"
            entry.finished_at = time.time()
            entry.error = "seed refused: " + "; ".join(
                f"{url}: {error or 'private address'}" for url, error in refused
            )
            log.warning("crawl_seed_refused", seeds=[url for url, _ in refused])
        elif finished and entry.state != "deleting":
            entry.state = "finished"
            entry.finished_at = time.time()
            log.info("crawl_finished")
        else:
            if entry.state == "running" and not running.stopping:  # never asked to stop
                entry.state = "failed"
                entry.error = "the crawl stopped by itself"
            log.info("crawl_stopped", state=entry.state)
        if entry.state == "finished" and not self._closing:  # started before any await
            for hook in self.on_finished:
                task = asyncio.create_task(self._hook(hook, entry), name="crawl-finished-hook")
                self._hooks.add(task)
                task.add_done_callback(self._hooks.discard)
        if entry.state != "deleting":
            await self._record_end(entry, delivery if entry.state == "finished" else None)
        self._kick()

    async def _delivery(self, entry: Entry) -> Delivery | None:
        """The finished run's webhook delivery, if it calls for one (not recorded yet)."""
        if self.delivery_for is None:
            return None
        try:
            return await self.delivery_for(entry)
        except Exception:  # the diff could not be read: the run's end matters more
            log.exception("webhook_delivery_not_built")
            return None

    async def _record_end(self, entry: Entry, delivery: Delivery | None) -> None:
        """The run's final state, and its delivery in the same transaction."""
        try:
            recorded = await self.store.finish(entry, delivery)
        except Exception:  # still recorded as running: resumed and recorded next start
            log.exception("crawl_end_unrecorded", state=entry.state)
            return
        if recorded is not None and self.on_delivery is not None:
            self.on_delivery(recorded)

    async def _refused_seeds(self, entry: Entry) -> list[tuple[str, str | None]]:
        """Seeds the private-address guard refused (read once, when the crawl ends)."""
        try:
            found = await self.store.crawl_stats(entry.id)
        except Exception as exc:  # the crawl's own state matters more
            log.warning("crawl_stats_unreadable", error=str(exc))
            return []
        return [] if found is None else crawl_stats.refused_seeds(found, entry.seeds)

    async def _hook(self, hook: Callable[[Entry], Awaitable[None]], entry: Entry) -> None:
        structlog.contextvars.bind_contextvars(crawl_id=entry.id)
        try:
            await hook(entry)
        except Exception:
            log.exception("crawl_finished_hook_failed")

    async def _sample_loop(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_EVERY_S)
            for crawl_id, running in list(self._running.items()):
                try:
                    await running.run.sample()
                except Exception as exc:  # a busy or vanished file: try again next time
                    log.debug("sample_failed", crawl_id=crawl_id, error=str(exc))


async def _pause_before_finish(entry: Entry) -> None:
    """Tests only (``PAUSE_BEFORE_FINISH_ENV``): hold the run where a kill would once
    have lost its webhook; the test kills the service while it waits."""
    path = os.environ.get(PAUSE_BEFORE_FINISH_ENV)
    if not path:
        return
    await asyncio.to_thread(_write_text, path, str(entry.id))
    log.warning("paused_before_finish", path=path)
    await asyncio.sleep(PAUSE_BEFORE_FINISH_S)


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
