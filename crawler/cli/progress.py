"""Live progress on a terminal: crawled, pending, broken, pages/s.

Shown only when stderr is a TTY and not turned off; it reads counters from the
engine every half second and asks the database for the frontier size every
two seconds, so it costs the crawl nothing measurable.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from rich.console import Console
from rich.live import Live
from rich.text import Text

from crawler.engine.loop import Engine
from crawler.engine.runner import CrawlJob
from crawler.models import Counts

REFRESH_S = 0.5
COUNTS_EVERY_S = 2.0


async def show(job: CrawlJob, console: Console) -> None:
    """Render progress until cancelled."""
    frontier = job.frontier
    counts: Counts | None = None
    last_counts = 0.0
    with Live(console=console, transient=True, auto_refresh=False) as live:
        while True:
            now = time.monotonic()
            if now - last_counts >= COUNTS_EVERY_S:
                with contextlib.suppress(Exception):
                    counts = await frontier.counts()
                last_counts = now
            if job.engine is not None:
                live.update(_line(job.engine, counts), refresh=True)
            await asyncio.sleep(REFRESH_S)


def stderr_console() -> Console:
    """The terminal the progress display draws on."""
    return Console(stderr=True)


def _line(engine: Engine, counts: Counts | None) -> Text:
    stats = engine.stats
    elapsed = max(time.monotonic() - stats.started_at, 1e-6)
    text = Text()
    text.append(f"{stats.pages} pages", style="bold")
    text.append(f", {stats.fetched} checked")
    if counts is not None:
        text.append(f", {counts.pending} pending, {counts.done} done")
    text.append(f", {stats.broken} broken", style="red" if stats.broken else "")
    text.append(f", {stats.in_flight} in flight, {stats.pages / elapsed:.1f} pages/s")
    return text
