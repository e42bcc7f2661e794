"""Running a crawl from code: what the CLI, the service and the tests share.

``start`` opens the database and records a new crawl with its seeds (one
transaction), ``open_existing`` prepares one for resuming, and ``CrawlJob.run``
drives it with an engine until it finishes or ``stop`` is called. A run first
completes the crawl's seeding when it is not complete (the sitemaps' pages,
or the seeds of a crawl an older version recorded without them).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crawler import urls
from crawler.config import CrawlSettings, Durability
from crawler.engine.loop import Engine
from crawler.engine.membudget import PageMemory
from crawler.engine.render_step import Renders
from crawler.errors import InvalidURLError, StoreError, UsageError
from crawler.models import CrawlRecord, Discovered, ResultClass, UrlKind
from crawler.net import documents, localsite, sitemaps
from crawler.net.fetch import Fetcher
from crawler.net.render import process as browsers
from crawler.net.robots import Robots
from crawler.scope import Scope
from crawler.store import open as store_open
from crawler.store.contract import FrontierStore

# How often a run adds its active time to the crawl (what a SIGKILL may lose).
ELAPSED_EVERY_S = 2.0


@dataclass
class CrawlJob:
    """One crawl ready to run: its frontier, settings, scope and classified seeds."""

    frontier: FrontierStore
    settings: CrawlSettings
    scope: Scope
    seeds: list[Discovered] = field(default_factory=list)
    local_root: Path | None = None
    engine: Engine | None = None
    on_seeded: Callable[[], None] | None = None  # called once the frontier holds the seeds
    on_seeding: Callable[[], None] | None = None  # called before a run enqueues them again
    records_elapsed: bool = True  # False for extra workers: the main process counts time
    browser: str | None = None  # the Chromium to render with, when pages are rendered
    _stopped: bool = False

    @property
    def crawl_id(self) -> int:
        return self.frontier.crawl_id

    def stop(self) -> None:
        """Ask the running engine to stop gracefully."""
        self._stopped = True
        if self.engine is not None:
            self.engine.stop()

    async def run(
        self,
        *,
        shutdown_timeout_s: float = 10.0,
        parse_helpers: int = 0,
        parse_helpers_after: int | None = None,
        memory: PageMemory | None = None,
    ) -> bool:
        """Crawl until finished (True) or stopped (False); records active time as it goes.

        Active time is added to the crawl every ``ELAPSED_EVERY_S`` and at the
        end, each addition committed: a crawl killed with SIGKILL loses at most
        the last few seconds of it, so its rates stay true after a resume.
        """
        clock = _ActiveTime(self.frontier) if self.records_elapsed else None
        ticker = asyncio.create_task(clock.tick_forever()) if clock is not None else None
        renderer = self._renderer()
        try:
            async with Fetcher(self.settings, local_root=self.local_root) as fetcher:
                # One Robots per crawl: it finds the sitemaps and the engine obeys it.
                robots = Robots(fetcher, self.frontier, self.settings.user_agent)
                if not await self.frontier.is_seeded():
                    if self.on_seeding is not None:
                        self.on_seeding()
                    await self._seed(robots, fetcher)
                if self.on_seeded is not None:
                    self.on_seeded()
                if self._stopped:
                    return False
                self.engine = Engine(
                    self.frontier,
                    fetcher,
                    self.scope,
                    self.settings,
                    robots=robots if self.settings.robots else None,
                    shutdown_timeout_s=shutdown_timeout_s,
                    parse_helpers=parse_helpers,
                    parse_helpers_after=parse_helpers_after,
                    memory=memory,
                    renderer=renderer,
                )
                return await self.engine.run()
        finally:
            if renderer is not None:
                await renderer.aclose()
            if ticker is not None:
                ticker.cancel()
                await asyncio.gather(ticker, return_exceptions=True)
            if clock is not None:
                # On a full disk this write fails too; the error on its way says so.
                with contextlib.suppress(StoreError):
                    await clock.add()

    def _renderer(self) -> Renders | None:
        if self.browser is None:
            return None
        from crawler.net.render.renderer import Renderer, RenderLimits  # aiohttp's client

        settings = self.settings
        limits = RenderLimits(
            timeout_s=settings.render_timeout_s,
            concurrency=settings.render_concurrency,
            restart_pages=settings.render_restart_pages,
            max_rss_bytes=settings.render_max_rss_mb * 1024 * 1024,
            block_media=not settings.render_media,
        )
        return Renderer(self.browser, settings.user_agent, limits)

    async def _seed(self, robots: Robots, fetcher: Fetcher) -> None:
        """Complete what the crawl starts from, then mark it seeded.

        The seeds again (already there when this version recorded the crawl;
        enqueuing is idempotent), then the pages its sitemaps list. A run
        killed before ``mark_seeded`` leaves this to the next one, so pages
        only a sitemap lists are never lost.
        """
        await self.frontier.enqueue(self.seeds, time.time())
        wanted = list(self.settings.sitemaps)
        if self.settings.use_sitemaps:
            for seed in self.seeds:
                if seed.host:
                    wanted.extend(await robots.sitemaps(seed.url, seed.host))
        limit = self.settings.max_urls or sitemaps.MAX_URLS
        async for pages in sitemaps.collect(fetcher, wanted, limit):  # one file at a time
            found = [self.scope.classify(page, element="sitemap", depth=0) for page in pages]
            await self.frontier.enqueue(found, time.time())
        await self.frontier.mark_seeded(time.time())

    def close(self) -> None:
        """Close the database connection and the writer thread."""
        self.frontier.close()


class _ActiveTime:
    """Adds the time since its last addition to the crawl's active time."""

    def __init__(self, frontier: FrontierStore) -> None:
        self._frontier = frontier
        self._since = time.monotonic()

    async def add(self) -> None:
        now = time.monotonic()
        elapsed, self._since = now - self._since, now
        await self._frontier.add_elapsed(elapsed)

    async def tick_forever(self) -> None:
        while True:
            await asyncio.sleep(ELAPSED_EVERY_S)
            with contextlib.suppress(StoreError):  # the engine reports a broken store
                await self.add()


def prepare_seeds(
    raw_seeds: list[str], settings: CrawlSettings | None = None
) -> tuple[list[str], list[str], Path | None]:
    """(seeds to record, normalized seed URLs, local root); UsageError for a bad seed.

    A seed naming a directory (or ``--root-dir``) is the local site, served at
    its home URL (``--base-url``, else ``http://local.invalid/``); a seed naming
    a file is that file's page of the site (``localsite.site_root``). Both are
    recorded as absolute paths so a resume from elsewhere finds them.
    """
    recorded, keys = [], []
    root_dir = settings.root_dir if settings is not None else None
    if root_dir is not None and not Path(root_dir).is_dir():
        raise UsageError(f"--root-dir {root_dir!r}: no such directory")
    local_root = localsite.site_root(raw_seeds, root_dir)
    home = localsite.home_url(settings.base_url if settings is not None else None)
    for seed in raw_seeds:
        if local_root is not None and localsite.is_local_seed(seed):
            folder = Path(seed).resolve()
            recorded.append(str(folder))
            keys.extend(_directory_seeds(local_root, folder, home, settings))
            continue
        if local_root is not None and localsite.is_local_file_seed(seed):
            file = Path(seed).resolve()
            recorded.append(str(file))
            keys.append(urls.normalize(localsite.file_url(home, local_root, file))[0])
            continue
        if not urls.is_http(seed):
            scheme = urls.scheme_of(seed)
            if not scheme and "://" not in seed:
                raise UsageError(f"seed {seed!r}: not an http(s) URL, a directory or a file")
            raise UsageError(f"seed {seed!r}: unsupported scheme {scheme!r}")
        try:
            key, _ = urls.normalize(seed)
        except InvalidURLError as exc:
            raise UsageError(f"seed {seed!r}: {exc}") from exc
        recorded.append(seed)
        keys.append(key)
    if not raw_seeds and local_root is not None:
        recorded.append(str(local_root))
        keys.extend(_directory_seeds(local_root, local_root, home, settings))
    return recorded, keys, local_root


def _directory_seeds(
    root: Path, folder: Path, home: str, settings: CrawlSettings | None
) -> list[str]:
    """Where a crawl of ``folder`` (the site's ``root`` or a folder in it) starts: its
    home page, or else every document in it.

    A built site starts at its index file and is followed link by link; a
    repository of Markdown (``crawler crawl .`` beside a ``README.md``) has no
    home page, so each HTML and Markdown file is a seed, as lychee checks it.
    """
    index_files = settings.index_files if settings is not None else localsite.INDEX_FILES
    if localsite.has_index(folder, index_files):
        if folder == root:
            return [home]
        return [urls.normalize(localsite.file_url(home, root, folder) + "/")[0]]
    unread = localsite.unread_patterns(settings.exclude_path if settings is not None else [])
    files = documents.documents(folder, unread, root)
    if not files:  # a crawl of nothing is never green
        raise UsageError(f"{str(folder)!r}: no index file, and no HTML or Markdown file in it")
    return [urls.normalize(localsite.file_url(home, root, file))[0] for file in files]


def start(
    db_path: str | Path,
    raw_seeds: list[str],
    settings: CrawlSettings,
    *,
    durability: Durability = "normal",
    crawl_id: int | None = None,
    previous_crawl_id: int | None = None,
) -> CrawlJob:
    """Record a new crawl in the database (keeping any earlier ones), as ``crawl_id`` if given.

    With ``previous_crawl_id`` the new crawl is a re-crawl of that crawl: pages
    it stored validators for are asked conditionally, and a page answered
    ``304 Not Modified`` takes its links from what that crawl stored
    (``crawler.recrawl``).
    """
    if not raw_seeds and settings.root_dir is None:
        raise UsageError("no seed URL given (a URL, a directory, or --root-dir DIR)")
    if settings.root_dir is not None:  # stored with the crawl: a resume from elsewhere finds it
        settings = settings.model_copy(update={"root_dir": str(Path(settings.root_dir).resolve())})
    recorded, keys, local_root = prepare_seeds(raw_seeds, settings)
    browser = find_browser(settings)  # before anything is recorded: exit 3 without one
    scope = Scope.build(settings, keys)
    seeds = classified_seeds(scope, keys)
    # Recorded with its seeds in one transaction; its sitemaps, if any, come later.
    store = store_open.create_crawl(
        db_path,
        recorded,
        settings,
        seeds=seeds,
        seeded=not wants_sitemaps(settings),
        durability=durability,
        crawl_id=crawl_id,
        previous_crawl_id=previous_crawl_id,
    )
    return CrawlJob(store, settings, scope, seeds, local_root, browser=browser)


def find_browser(settings: CrawlSettings) -> str | None:
    """The browser's path when the crawl renders pages; UsageError saying how to get one."""
    return browsers.find_browser(settings.browser) if settings.may_render() else None


def start_recrawl(
    db_path: str | Path,
    overrides: dict[str, object] | None = None,
    *,
    crawl_id: int | None = None,
    durability: Durability = "normal",
    add_exclude: Sequence[str] = (),
) -> CrawlJob:
    """A re-crawl of ``crawl_id`` (else the latest): its seeds and settings, with
    ``overrides``, and the patterns of ``add_exclude`` its ``exclude`` lacks."""
    if (
        not store_open.is_postgres_url(db_path)
        and not Path(store_open.sqlite_path(db_path)).exists()
    ):
        raise UsageError(f"{db_path}: no such database; start a crawl with `crawler crawl URL`")
    record = store_open.load_record(db_path, crawl_id)
    values = {**record.config, **(overrides or {})}
    if add_exclude:
        exclude = list(values.get("exclude") or [])
        values["exclude"] = [*exclude, *(p for p in add_exclude if p not in exclude)]
    try:
        settings = CrawlSettings.model_validate(values)
    except ValueError as exc:
        raise UsageError(f"crawl {record.id}: its settings are not valid here: {exc}") from exc
    return start(
        db_path, list(record.seeds), settings, durability=durability, previous_crawl_id=record.id
    )


def classified_seeds(scope: Scope, keys: list[str]) -> list[Discovered]:
    """The seeds as the frontier takes them.

    A seed on a private address (with ``--exclude-all-private``) is not quietly
    excluded as a link to one would be: it is crawled, so the guard refuses its
    request and the seed is recorded broken (``outcome.build_outcome``). A crawl
    that could not start is never a clean crawl of nothing.
    """
    seeds = []
    for key in keys:
        seed = scope.classify(key, element="seed", depth=0)
        if seed.result == ResultClass.EXCLUDED and (seed.reason or "").startswith("private"):
            seed = seed._replace(kind=UrlKind.PAGE, result=None, reason=None)
        seeds.append(seed)
    return seeds


def wants_sitemaps(settings: CrawlSettings) -> bool:
    """Does the crawl start from sitemaps too (fetched by its first run, not at creation)?"""
    return bool(settings.sitemaps) or settings.use_sitemaps


def open_existing(
    db_path: str | Path, crawl_id: int | None = None, *, durability: Durability = "normal"
) -> tuple[CrawlJob, CrawlRecord]:
    """Prepare a recorded crawl for resuming: the given one, else the latest unfinished."""
    if (
        not store_open.is_postgres_url(db_path)
        and not Path(store_open.sqlite_path(db_path)).exists()
    ):
        raise UsageError(f"{db_path}: no such database; start a crawl with `crawler crawl URL`")
    store, record = store_open.open_crawl(db_path, crawl_id, durability=durability)
    try:
        settings = CrawlSettings.model_validate(record.config)
        _, keys, local_root = prepare_seeds(record.seeds, settings)
        browser = find_browser(settings)
    except BaseException:
        store.close()
        raise
    scope = Scope.build(settings, keys)
    job = CrawlJob(
        store, settings, scope, classified_seeds(scope, keys), local_root, browser=browser
    )
    return job, record


def normalize_seeds(raw_seeds: list[str]) -> list[str]:
    """Normalized seed URLs; UsageError naming a bad one."""
    return prepare_seeds(raw_seeds)[1]
