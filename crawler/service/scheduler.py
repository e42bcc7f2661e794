"""Crawl definitions: recurring crawls, their schedule, and what follows each run.

A definition (``Definition.spec``: seeds, settings, schedule, ``keep_runs``,
webhook) is kept in the store with its schedule position ``next_run_at``.

- ``tick`` starts a run of every definition that is due, unless one of its
  runs is still queued, running or paused: never two runs of one definition
  at once. A due definition stays due until it can start, and then starts
  *once*; the next position is computed from the time it starts, so after
  downtime (or a long run) the service catches up with one run, not one per
  missed slot. The position is written before the run is created: a kill in
  between loses that one run rather than starting two.
- Each run is a crawl of the ``CrawlManager`` with the definition's id; the
  manager starts it as a re-crawl of the definition's latest finished run.
- When a run finishes, before its end is recorded (``delivery_for``, called
  by the manager): the diff against the previous finished run and, when it
  has new broken links and the definition a webhook, the delivery the
  manager records in the same transaction as the run's end. Its body names
  the report and the diff by absolute URL under the service's public address
  (``--public-url``), or says they are relative when none is set.
- Then (``run_finished``): retention. Runs beyond the newest ``keep_runs``
  that are over (finished, failed, cancelled), except the one an active run
  re-crawls from and those whose webhook delivery is still being tried, are
  deleted one by one with their deliveries, each through the store's delete
  (batches of rows, from the definition's SQLite file or from PostgreSQL),
  so a running crawl is never held up for long.

The clock is injected (``clock``: seconds since the epoch): tests move it
and call ``tick`` themselves; the service's own loop calls ``tick`` every
``TICK_S`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from crawler.report.diff import CrawlDiff
from crawler.service import schedule
from crawler.service.diffs import diff_of
from crawler.service.manager import ACTIVE_STATES, CrawlManager, QueueFullError
from crawler.service.webhooks import Clock, WebhookSender
from crawler.store.service import Definition, Delivery, Entry

log = structlog.get_logger(__name__)

TICK_S = 1.0
DEFAULT_KEEP_RUNS = 10
MAX_WEBHOOK_URLS = 100  # new broken URLs listed in a webhook body
MAX_WEBHOOK_SOURCES = 5  # sources listed per new broken URL
OVER_STATES = frozenset({"finished", "failed", "cancelled"})
RELATIVE_URLS_NOTE = (
    "report_url, diff_url and dashboard_url are relative to the service's address: its "
    "operator set no public URL (crawler serve --public-url, CRAWLER_PUBLIC_URL)"
)


class DefinitionNotFoundError(LookupError):
    """No definition with this id."""


@dataclass
class Scheduler:
    """The service's crawl definitions (module docstring)."""

    manager: CrawlManager
    webhooks: WebhookSender
    clock: Clock = time.time
    public_url: str | None = None  # where users reach the service; webhooks link under it
    _definitions: dict[int, Definition] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _task: asyncio.Task[None] | None = None
    _retention: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def open(self) -> None:
        for definition in await self.manager.store.definitions():
            self._definitions[definition.id] = definition
        self.manager.on_finished.append(self.run_finished)
        self.manager.delivery_for = self.delivery_for
        self.manager.on_delivery = self.webhooks.track
        self.manager.on_deleted.append(self.webhooks.forget)
        await self.webhooks.open()
        self._task = asyncio.create_task(self._loop(), name="scheduler")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.webhooks.close()

    # -- definitions -------------------------------------------------------------

    def get(self, definition_id: int) -> Definition:
        definition = self._definitions.get(definition_id)
        if definition is None:
            raise DefinitionNotFoundError(definition_id)
        return definition

    def definitions(self) -> list[Definition]:
        return sorted(self._definitions.values(), key=lambda d: d.id)

    def secret_of(self, definition_id: int) -> str | None:
        definition = self._definitions.get(definition_id)
        webhook = None if definition is None else definition.spec.get("webhook")
        return None if not webhook else str(webhook["secret"])

    async def create(self, spec: dict[str, Any]) -> Definition:
        now = self.clock()
        definition = await self.manager.store.insert_definition(
            spec, now, schedule.first_run(spec["schedule"], now)
        )
        self._definitions[definition.id] = definition
        log.info("definition_created", definition_id=definition.id)
        await self.tick()
        return definition

    async def replace(self, definition_id: int, spec: dict[str, Any]) -> Definition:
        """New seeds, settings, schedule, retention or webhook; a new schedule restarts."""
        definition = self.get(definition_id)
        now = self.clock()
        if spec["schedule"] != definition.spec["schedule"]:
            definition.next_run_at = schedule.first_run(spec["schedule"], now)
        definition.spec, definition.updated_at = spec, now
        await self.manager.store.update_definition(definition)
        log.info("definition_updated", definition_id=definition_id)
        await self.tick()
        return definition

    async def delete(self, definition_id: int) -> None:
        """The definition, its runs (a running one is stopped first) and its deliveries."""
        self.get(definition_id)
        definition = self._definitions.pop(definition_id)
        try:
            for run in self.manager.runs_of(definition_id):
                with contextlib.suppress(LookupError):
                    await self.manager.delete(run.id)
        except BaseException:
            self._definitions[definition_id] = definition
            raise
        await self.manager.store.delete_definition(definition_id)
        log.info("definition_deleted", definition_id=definition_id)

    def active_run(self, definition_id: int) -> Entry | None:
        runs = self.manager.runs_of(definition_id)
        return next((r for r in runs if r.state in ACTIVE_STATES), None)

    # -- the schedule ----------------------------------------------------------------

    async def tick(self) -> list[int]:
        """Start the runs that are due; their crawl ids."""
        started = []
        async with self._lock:
            now = self.clock()
            for definition in self.definitions():
                due = definition.next_run_at
                if due is None or due > now or self.active_run(definition.id) is not None:
                    continue
                definition.next_run_at = schedule.next_run(definition.spec["schedule"], now)
                await self.manager.store.update_definition(definition)
                spec = definition.spec
                try:
                    entry = await self.manager.create(
                        list(spec["seeds"]), dict(spec["settings"]), definition.id
                    )
                except QueueFullError:
                    definition.next_run_at = due  # still due: tried again next tick
                    await self.manager.store.update_definition(definition)
                    log.warning("definition_run_deferred", definition_id=definition.id)
                    continue
                log.info("definition_run_started", definition_id=definition.id, crawl_id=entry.id)
                started.append(entry.id)
        return started

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self.tick()
            except Exception:  # the store failed: try again next tick
                log.exception("scheduler_tick_failed")

    # -- after a run -----------------------------------------------------------------

    async def delivery_for(self, entry: Entry) -> Delivery | None:
        """The webhook delivery of a finished run: when its definition has a webhook and
        the diff against the previous finished run has new broken links."""
        if entry.definition_id is None or entry.definition_id not in self._definitions:
            return None
        definition = self._definitions[entry.definition_id]
        webhook = definition.spec.get("webhook")
        previous = self.manager.previous_run(entry)
        if not webhook or previous is None:
            return None
        diff = await diff_of(self.manager.store, previous, entry)
        if diff is None or not diff.new_broken:
            return None
        body = webhook_body(definition.id, entry.id, diff, self.public_url)
        return self.webhooks.new(definition.id, entry.id, webhook["url"], body)

    async def run_finished(self, entry: Entry) -> None:
        """Retention, and the next run if it is due (module docstring)."""
        if entry.definition_id is None or entry.definition_id not in self._definitions:
            return
        await self.retain(entry.definition_id)
        await self.tick()

    async def retain(self, definition_id: int) -> list[int]:
        """Delete the runs beyond the newest ``keep_runs`` that are over; their ids."""
        deleted: list[int] = []
        async with self._retention:
            definition = self._definitions.get(definition_id)
            if definition is None:
                return deleted
            keep = int(definition.spec.get("keep_runs", DEFAULT_KEEP_RUNS))
            active = self.active_run(definition_id)
            # The run an active run re-crawls from is read by it: kept until it is over.
            base = None if active is None else self.manager.previous_run(active)
            # A run whose webhook is still being tried keeps it (and its report) until
            # the delivery is over: a later retention retires it.
            notifying = self.webhooks.pending_crawls()
            for run in self.manager.runs_of(definition_id)[keep:]:
                if run.state not in OVER_STATES or (base is not None and run.id == base.id):
                    continue
                if run.id in notifying:
                    continue
                await self.manager.delete(run.id)
                deleted.append(run.id)
        if deleted:
            log.info("runs_retired", definition_id=definition_id, crawl_ids=deleted)
        return deleted


def webhook_body(
    definition_id: int, crawl_id: int, diff: CrawlDiff, public_url: str | None = None
) -> bytes:
    """The JSON a webhook receives: the diff's counts and the first new broken URLs,
    with the report and the diff as absolute URLs under ``public_url`` (else relative,
    and ``note`` says so)."""
    new = [
        {
            "url": link.url,
            "status": link.status,
            "error": link.error,
            "sources": link.sources[:MAX_WEBHOOK_SOURCES],
        }
        for link in diff.new_broken[:MAX_WEBHOOK_URLS]
    ]
    base = public_url or ""
    document: dict[str, Any] = {
        "event": "run_finished",
        "definition_id": definition_id,
        "crawl_id": crawl_id,
        "previous_crawl_id": diff.from_crawl,
        "counts": diff.counts(),
        "new_broken": new,
        "new_broken_truncated": len(diff.new_broken) > MAX_WEBHOOK_URLS,
        "report_url": f"{base}/crawls/{crawl_id}/report",
        "diff_url": f"{base}/definitions/{definition_id}/diff?from={diff.from_crawl}&to={crawl_id}",
        "dashboard_url": f"{base}/#/definitions/{definition_id}",
    }
    if not public_url:
        document["note"] = RELATIVE_URLS_NOTE
    return json.dumps(document, sort_keys=True).encode("utf-8")
