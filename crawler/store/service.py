"""What ``crawler serve`` needs from storage, whichever backend keeps its crawls.

The service's code (``crawler/service``) talks to a ``ServiceStore`` and never
to a database, so the same manager runs on either backend:

- SQLite (``sqlite.service_index.SqliteServiceStore``, the default): the index
  is ``DATA/service.db``, a one-off crawl a file of its own,
  ``DATA/crawls/<id>.db``, and the runs of one definition crawls of one file,
  ``DATA/definitions/<definition id>.db``, under the service's ids;
- PostgreSQL (``postgres.service_store.PostgresServiceStore``, ``--db
  postgresql://…``): the index is the ``service_crawl`` table and each crawl
  rows of the normal crawl tables, with the crawl id equal to the service's,
  so ``crawler work`` processes on other machines can join them.

A store answers three groups of questions:

- the index: ``entries``, ``insert``, ``update`` (state, queue order, times),
  ``finish`` (a run's end and its webhook delivery in one transaction, so a
  kill never records one without the other), ``mark_seeded`` (remote workers
  may join), ``delete`` (the entry, its deliveries and the crawl's data, in
  bounded batches so a running crawl is never held up), ``ping``;
- crawl definitions (recurring crawls) and their webhook deliveries:
  ``definitions``, ``insert_definition``, ``update_definition``,
  ``delete_definition``; ``deliveries``, ``insert_delivery``,
  ``update_delivery``. A run of a definition is an entry whose
  ``definition_id`` names it;
- one crawl's data: where the engine opens it (``target``), whether a start is
  a resume (``prepare``), a ``snapshot`` of its counters, ``host_totals``,
  ``workers``, ``load_report`` and ``load_diff`` (two runs of a definition,
  compared by ``crawler.report.diff`` as ``crawler diff`` does).

``CrawlQueue`` is the worker's side on PostgreSQL: the crawls a ``crawler
work --service`` process may join, and the state of the one it works on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from crawler.errors import UsageError
from crawler.models import Counts
from crawler.report.diff import CrawlDiff
from crawler.report.model import ReportData
from crawler.store.crawl_stats import CrawlStats
from crawler.store.open import is_postgres_url


@dataclass(slots=True)
class Entry:
    """One crawl as the service knows it (a row of the index)."""

    id: int
    state: str
    seeds: list[str]
    settings: dict[str, Any]
    created_at: float
    queued_at: float
    started_at: float | None = None
    finished_at: float | None = None
    error: str | None = None
    definition_id: int | None = None  # a run of this crawl definition


@dataclass(slots=True)
class Definition:
    """A recurring crawl: ``spec`` is the validated API body (seeds, settings,
    schedule, keep_runs, webhook with its secret); ``next_run_at`` is the
    schedule's position, None while it has no next run."""

    id: int
    spec: dict[str, Any]
    created_at: float
    updated_at: float
    next_run_at: float | None


@dataclass(slots=True)
class Delivery:
    """One webhook call for one finished run, and how it went."""

    id: int
    definition_id: int
    crawl_id: int
    url: str
    body: bytes  # the exact bytes sent and signed
    state: str  # pending, delivered, failed
    attempts: int
    created_at: float
    next_attempt_at: float
    last_status: int | None = None
    last_error: str | None = None
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A crawl's frontier counters and its active time so far."""

    counts: Counts
    elapsed_s: float
    finished: bool


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """One process working on a crawl (a row of ``worker``)."""

    token: str
    pid: int
    hostname: str
    started_at: float
    heartbeat_at: float
    urls_done: int
    pages_done: int


@dataclass(frozen=True, slots=True)
class CrawlTarget:
    """What ``runner.start`` / ``runner.open_existing`` get as ``--db`` and crawl id."""

    db: str | Path
    crawl_id: int | None  # None: the one crawl of a one-off crawl's SQLite file


class ServiceStore(Protocol):
    """The service's index of crawls and its reads of each crawl (module docstring).

    Every method but ``target`` and ``describe`` may be awaited on the
    service's loop: blocking work runs on threads or on an async driver.
    """

    async def entries(self) -> list[Entry]:
        """Every crawl of the index, by id."""
        ...

    async def insert(
        self,
        seeds: list[str],
        settings: dict[str, Any],
        now: float,
        definition_id: int | None = None,
    ) -> Entry:
        """A new queued crawl, under an id never handed out before."""
        ...

    async def definitions(self) -> list[Definition]:
        """Every crawl definition, by id."""
        ...

    async def insert_definition(
        self, spec: dict[str, Any], now: float, next_run_at: float | None
    ) -> Definition:
        """A new definition, under an id never handed out before."""
        ...

    async def update_definition(self, definition: Definition) -> None:
        """Record its spec, update time and schedule position."""
        ...

    async def delete_definition(self, definition_id: int) -> None:
        """Remove the definition and its deliveries (its runs are deleted first)."""
        ...

    async def deliveries(self) -> list[Delivery]:
        """Every webhook delivery, by id."""
        ...

    async def insert_delivery(self, delivery: Delivery) -> Delivery:
        """Record a new delivery (its ``id`` is ignored) and return it with its id."""
        ...

    async def update_delivery(self, delivery: Delivery) -> None:
        """Record its state, attempts, next attempt and last answer."""
        ...

    async def update(self, entry: Entry) -> None:
        """Record the entry's state, queue order, times and error."""
        ...

    async def finish(self, entry: Entry, delivery: Delivery | None) -> Delivery | None:
        """Record the entry (as ``update``) and insert the delivery (its ``id`` is
        ignored) in one transaction; the delivery with its id."""
        ...

    async def mark_seeded(self, crawl_id: int, now: float) -> None:
        """The crawl's frontier holds its seeds: other processes may join it."""
        ...

    async def delete(self, crawl_id: int) -> None:
        """Remove the crawl's data, its entry and its deliveries (its workers have left)."""
        ...

    async def ping(self) -> None:
        """Raise when the storage cannot be used (the readiness probe)."""
        ...

    def target(self, crawl_id: int) -> CrawlTarget:
        """Where the runner opens or records the crawl."""
        ...

    async def prepare(self, crawl_id: int) -> int | None:
        """None: start the crawl afresh; any half-created data a kill left (no crawl
        row, or no seeds in its frontier) is removed first. A number: resume the
        recorded crawl, where that many leases are held by dead processes."""
        ...

    async def snapshot(self, crawl_id: int) -> Snapshot | None:
        """The crawl's counters and active time; None before it has data."""
        ...

    async def host_totals(self, crawl_id: int) -> dict[str, tuple[int, int]]:
        """host -> (URLs requested, of which no response or 5xx)."""
        ...

    async def workers(self, crawl_id: int) -> list[WorkerRow]:
        """The processes registered on the crawl (dead ones until reclaimed)."""
        ...

    async def crawl_stats(self, crawl_id: int) -> CrawlStats | None:
        """Per-host statistics, exclusion reasons, seeds refused as private
        (``crawl_stats``); None before the crawl has data."""
        ...

    async def load_report(self, crawl_id: int, fmt: str) -> ReportData | None:
        """The crawl's report as format ``fmt`` needs it; None before it has data."""
        ...

    async def load_diff(self, from_crawl: int, to_crawl: int) -> CrawlDiff | None:
        """Two runs of one definition compared; None while either has no data."""
        ...

    def describe(self) -> str:
        """Where the data is, for logs and errors (no password)."""
        ...

    async def close(self) -> None: ...


class CrawlQueue(Protocol):
    """The service's crawls as a ``crawler work --service`` process sees them (PostgreSQL)."""

    async def joinable(self) -> list[int]: ...

    async def state(self, crawl_id: int) -> str | None: ...

    async def close(self) -> None: ...


async def open_crawl_queue(db: str) -> CrawlQueue:
    """The crawl queue of the service whose database is ``db`` (PostgreSQL only)."""
    if not is_postgres_url(db):
        raise UsageError("`crawler work --service` needs --db postgresql://… (the service's)")
    from crawler.store.postgres.service_store import PostgresCrawlQueue  # asyncpg when used

    return await PostgresCrawlQueue.open(db)


async def open_service_store(db: str | None, data_dir: Path) -> ServiceStore:
    """PostgreSQL when ``db`` is a ``postgresql://`` URL, else SQLite files under ``data_dir``."""
    if db is not None and is_postgres_url(db):
        from crawler.store.postgres.service_store import PostgresServiceStore  # asyncpg when used

        return await PostgresServiceStore.open(db)
    from crawler.store.sqlite.service_index import SqliteServiceStore

    return await SqliteServiceStore.open(data_dir)
