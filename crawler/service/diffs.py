"""The diff of two runs of a crawl definition, whichever backend keeps them.

One function, ``diff_of``, so that the API, the dashboard and the webhooks
take the diff from one place: ``ServiceStore.load_diff``, which reads both
runs in one snapshot of the database that holds them (PostgreSQL, or the
definition's SQLite file) and compares them with ``crawler.report.diff``, as
``crawler diff`` does. Runs of a directory under ``--local-root`` name files
from it, as their reports do.
"""

from __future__ import annotations

import asyncio

from crawler.net import locations
from crawler.report.diff import CrawlDiff
from crawler.store.service import Entry, ServiceStore


async def diff_of(store: ServiceStore, before: Entry, after: Entry) -> CrawlDiff | None:
    """What changed from run ``before`` to run ``after``; None while either has no data."""
    diff = await store.load_diff(before.id, after.id)
    if diff is None:
        return None
    return await asyncio.to_thread(locations.diff_named, diff, after.seeds, after.settings)
