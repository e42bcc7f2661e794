"""``crawler work --service``: one worker process that joins the service's crawls.

``crawler serve --db postgresql://…`` keeps its crawls in PostgreSQL; a
joiner on any machine with the same ``--db`` works on them beside the
service's own engine. Its loop:

1. ask the database which crawls it may join (``PostgresCrawlQueue.joinable``:
   running in the service's index, seeded, not finished), the one with the
   fewest live workers first, then the oldest;
2. open that crawl (``runner.open_existing``) and run an engine on it until the
   crawl finishes, or until the service's index stops saying ``running``
   (paused, cancelled, deleted from the API): a watcher reads the state every
   ``WATCH_EVERY_S`` and stops the engine gracefully, which gives its leases
   back;
3. go back to 1. With nothing to join it waits ``IDLE_POLL_S`` and asks
   again, or returns when ``exit_when_idle`` is set (a batch job; a
   Kubernetes Deployment keeps the default and idles).

SIGTERM or SIGINT stop the current engine gracefully and end the loop. A crawl
that fails under the worker (its rows deleted meanwhile, a database error) is
logged and left; the loop goes on with the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import structlog

from crawler.config import RunOptions
from crawler.engine import runner
from crawler.errors import CrawlerError
from crawler.store.service import CrawlQueue, open_crawl_queue

log = structlog.get_logger(__name__)

IDLE_POLL_S = 2.0
WATCH_EVERY_S = 1.0
FAILED_CRAWL_PAUSE_S = 1.0


@dataclass
class Joiner:
    """The loop of the module docstring, for one process."""

    run: RunOptions
    exit_when_idle: bool = False
    crawls_joined: list[int] = field(default_factory=list)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _job: runner.CrawlJob | None = None

    def stop(self) -> None:
        """End the loop: the current engine stops gracefully, no other crawl is joined."""
        self._stopping.set()
        if self._job is not None:
            self._job.stop()

    async def serve(self) -> None:
        """Join running crawls until stopped (or idle, with ``exit_when_idle``)."""
        queue = await open_crawl_queue(self.run.db)
        try:
            while not self._stopping.is_set():
                joinable = await queue.joinable()
                if not joinable:
                    if self.exit_when_idle:
                        log.info("worker_idle_exit")
                        return
                    await self._wait(IDLE_POLL_S)
                    continue
                await self._work_on(queue, joinable[0])
        finally:
            await queue.close()

    async def _work_on(self, queue: CrawlQueue, crawl_id: int) -> None:
        structlog.contextvars.bind_contextvars(crawl_id=crawl_id)
        try:
            job, _ = await asyncio.to_thread(runner.open_existing, self.run.db, crawl_id)
        except CrawlerError as exc:  # deleted between the query and the open
            log.warning("crawl_join_failed", error=str(exc))
            structlog.contextvars.unbind_contextvars("crawl_id")
            return
        job.records_elapsed = False  # the service's engine counts the crawl's time
        self._job = job
        self.crawls_joined.append(crawl_id)
        watcher = asyncio.create_task(self._watch(queue, crawl_id, job), name="crawl-watch")
        log.info("crawl_joined")
        try:
            finished = await job.run(
                shutdown_timeout_s=self.run.shutdown_timeout_s,
                parse_helpers=self.run.helper_processes(),
            )
            log.info("crawl_left", finished=finished)
        except (CrawlerError, OSError) as exc:
            log.warning("crawl_work_failed", error=str(exc))
            await self._wait(FAILED_CRAWL_PAUSE_S)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            self._job = None
            await asyncio.to_thread(job.close)
            structlog.contextvars.unbind_contextvars("crawl_id")

    async def _watch(self, queue: CrawlQueue, crawl_id: int, job: runner.CrawlJob) -> None:
        """Stop the engine once the service no longer records the crawl as running."""
        while True:
            await asyncio.sleep(WATCH_EVERY_S)
            try:
                state = await queue.state(crawl_id)
            except Exception as exc:  # the database is away: the engine will say so
                log.debug("crawl_watch_failed", error=str(exc))
                continue
            if state != "running":
                log.info("crawl_stopped_by_service", state=state)
                job.stop()
                return

    async def _wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
