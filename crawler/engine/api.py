"""The crawler as a library call: ``crawler.check(url, **options) -> Report``.

The same crawl as ``crawler crawl``: seeds (URLs or a directory of built
HTML), settings by their config-file names (``max_depth=2``,
``timeout_s=5``, ``exclude=["/private/"]``, ``base_url=...``), a database
(a temporary one unless ``db`` is given), and the report data every format
is rendered from. Quiet by default: logs go to stderr at warning level unless
the program has configured structlog itself. Bad options raise
``crawler.errors.UsageError`` naming the option; network failures are
results in the report, never exceptions.

    report = crawler.check("https://example.org/", max_depth=1)
    if not report.ok:
        for link in report.broken:
            print(link.url, link.status, link.sources)
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import structlog

from crawler import aio, log
from crawler.config import CrawlSettings
from crawler.engine import runner
from crawler.errors import CrawlerError, UsageError
from crawler.report.model import ReportData
from crawler.settings_model import SettingsError
from crawler.store import open as store_open

Report = ReportData


def check(*seeds: str | Path, db: str | Path | None = None, **options: Any) -> Report:
    """Crawl from ``seeds`` with these settings and return the report (blocking)."""
    return aio.run(check_async(*seeds, db=db, **options))


async def check_async(*seeds: str | Path, db: str | Path | None = None, **options: Any) -> Report:
    """``check`` for code already running an event loop."""
    settings = settings_from(options)
    if not structlog.is_configured():
        log.configure("warning")
    if db is not None:
        return await _crawl(db, seeds, settings)
    with tempfile.TemporaryDirectory(prefix="crawler-") as folder:
        return await _crawl(Path(folder) / "crawl.db", seeds, settings)


def settings_from(options: dict[str, Any]) -> CrawlSettings:
    """The crawl settings; UsageError naming an unknown or invalid option."""
    unknown = sorted(set(options) - set(CrawlSettings.model_fields))
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}; options are CrawlSettings fields")
    try:
        return CrawlSettings.model_validate(options)
    except SettingsError as exc:
        name = ".".join(str(part) for part in exc.loc) or "options"
        raise UsageError(f"invalid {name}: {exc.message}") from exc


async def _crawl(db: str | Path, seeds: tuple[str | Path, ...], settings: CrawlSettings) -> Report:
    job = runner.start(db, [str(seed) for seed in seeds], settings)
    try:
        finished = await job.run()
    finally:
        job.close()
    if not finished:
        raise CrawlerError(f"crawl {job.crawl_id} was stopped before it finished")
    return store_open.load_report(str(db), job.crawl_id)
