"""Running a crawl from code: what the CLI, the service and the tests share.

``start`` opens the database and records a new crawl, ``open_existing``
prepares one for resuming, and ``run`` drives it with an engine until it
finishes or ``stop`` is called.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from crawler import urls
from crawler.config import CrawlSettings
from crawler.engine import Engine
from crawler.errors import InvalidURLError, UsageError
from crawler.fetch import Fetcher
from crawler.models import Discovered, UrlKind
from crawler.scope import Scope
from crawler.store import crawls, db
from crawler.store.async_store import AsyncFrontier


@dataclass
class CrawlJob:
    """One crawl ready to run: its frontier, settings and scope."""

    frontier: AsyncFrontier
    settings: CrawlSettings
    scope: Scope
    seeds: list[Discovered] = field(default_factory=list)
    engine: Engine | None = None

    @property
    def crawl_id(self) -> int:
        return self.frontier.crawl_id

    def stop(self) -> None:
        """Ask the running engine to stop gracefully."""
        if self.engine is not None:
            self.engine.stop()

    async def run(self, *, shutdown_timeout_s: float = 10.0) -> bool:
        """Crawl until finished (True) or stopped (False); records active time."""
        started = time.monotonic()
        try:
            if self.seeds:
                await self.frontier.enqueue(self.seeds, time.time())
                self.seeds = []
            async with Fetcher(self.settings) as fetcher:
                self.engine = Engine(
                    self.frontier,
                    fetcher,
                    self.scope,
                    self.settings,
                    shutdown_timeout_s=shutdown_timeout_s,
                )
                return await self.engine.run()
        finally:
            elapsed = time.monotonic() - started
            crawl_id = self.crawl_id
            await self.frontier.call(lambda conn: crawls.add_elapsed(conn, crawl_id, elapsed))

    def close(self) -> None:
        """Close the database connection and the writer thread."""
        self.frontier.close()


def normalize_seeds(raw_seeds: list[str]) -> list[str]:
    """Seeds as normalized keys; a bad one is a usage error naming it."""
    keys = []
    for seed in raw_seeds:
        if not urls.is_http(seed):
            scheme = urls.scheme_of(seed)
            problem = f"unsupported scheme {scheme!r}" if scheme else "not an http(s) URL"
            raise UsageError(f"seed {seed!r}: {problem}")
        try:
            key, _ = urls.normalize(seed)
        except InvalidURLError as exc:
            raise UsageError(f"seed {seed!r}: {exc}") from exc
        keys.append(key)
    return keys


def start(
    db_path: str | Path,
    raw_seeds: list[str],
    settings: CrawlSettings,
    *,
    durability: db.Durability = "normal",
) -> CrawlJob:
    """Record a new crawl in the database (keeping any earlier ones)."""
    if not raw_seeds:
        raise UsageError("no seed URL given")
    seed_keys = normalize_seeds(raw_seeds)
    conn = db.open_database(db_path, durability=durability)
    try:
        crawl_id = crawls.create(conn, raw_seeds, settings.model_dump(), time.time())
    except BaseException:
        conn.close()
        raise
    seeds = [
        Discovered(url=key, host=urls.host_of(key), kind=UrlKind.PAGE, element="seed")
        for key in seed_keys
    ]
    frontier = AsyncFrontier(conn, crawl_id, max_urls=settings.max_urls)
    return CrawlJob(frontier, settings, Scope.build(settings, seed_keys), seeds)


def open_existing(
    db_path: str | Path, crawl_id: int | None = None, *, durability: db.Durability = "normal"
) -> tuple[CrawlJob, crawls.CrawlRecord]:
    """Prepare a recorded crawl for resuming: the given one, else the latest unfinished."""
    conn = db.open_database(db_path, durability=durability)
    try:
        if crawl_id is not None:
            record = crawls.get(conn, crawl_id)
        else:
            found = crawls.latest_unfinished(conn)
            record = found if found is not None else crawls.get(conn)
        settings = CrawlSettings.model_validate(record.config)
        seed_keys = normalize_seeds(record.seeds)
    except BaseException:
        conn.close()
        raise
    frontier = AsyncFrontier(conn, record.id, max_urls=settings.max_urls)
    return CrawlJob(frontier, settings, Scope.build(settings, seed_keys)), record
