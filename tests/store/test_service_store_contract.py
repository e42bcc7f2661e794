"""The service's store on both backends: a run's end and its webhook delivery are one
transaction, and a run's deliveries go with it (``crawler.store.service``)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from crawler.store.service import Delivery, ServiceStore, open_service_store

from kit.pgkit import BACKENDS, create_database, drop_database, require_postgres

SEED = "http://127.0.0.1:9/"  # never connected to: rows only


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ServiceStore]:
    url = None
    if request.param != "sqlite":
        require_postgres()
        url = create_database()
    opened = await open_service_store(url, tmp_path / "data")
    try:
        yield opened
    finally:
        await opened.close()
        if url is not None:
            drop_database(url)


def _delivery(crawl_id: int, **changes: Any) -> Delivery:
    delivery = Delivery(0, 1, crawl_id, "http://127.0.0.1:9/hook", b"{}", "pending", 0, 5.0, 5.0)
    return dataclasses.replace(delivery, **changes)


async def _running_run(store: ServiceStore) -> Any:
    entry = await store.insert([SEED], {}, 1.0, definition_id=1)
    entry.state, entry.started_at = "running", 2.0
    await store.update(entry)
    return entry


async def test_finish_records_the_end_and_the_delivery_together(store: ServiceStore) -> None:
    entry = await _running_run(store)
    entry.state, entry.finished_at = "finished", 3.0
    recorded = await store.finish(entry, _delivery(entry.id))
    assert recorded is not None
    assert recorded.id > 0
    assert await store.deliveries() == [recorded]
    (stored,) = await store.entries()
    assert (stored.state, stored.finished_at) == ("finished", 3.0)


async def test_finish_without_a_delivery_records_the_end_only(store: ServiceStore) -> None:
    entry = await _running_run(store)
    entry.state, entry.error = "failed", "boom"
    assert await store.finish(entry, None) is None
    (stored,) = await store.entries()
    assert (stored.state, stored.error) == ("failed", "boom")
    assert await store.deliveries() == []


async def test_a_delivery_that_cannot_be_recorded_leaves_the_run_unfinished(
    store: ServiceStore,
) -> None:
    entry = await _running_run(store)
    entry.state, entry.finished_at = "finished", 3.0
    broken = _delivery(entry.id, url=None)  # NOT NULL: the insert fails
    with pytest.raises(Exception):  # noqa: B017, PT011 - each driver's own error
        await store.finish(entry, broken)
    (stored,) = await store.entries()
    assert (stored.state, stored.finished_at) == ("running", None)
    assert await store.deliveries() == []


async def test_deleting_a_run_deletes_its_deliveries_only(store: ServiceStore) -> None:
    older, newer = await _running_run(store), await _running_run(store)
    for entry in (older, newer):
        entry.state = "finished"
        await store.finish(entry, _delivery(entry.id))
    await store.delete(older.id)
    assert [e.id for e in await store.entries()] == [newer.id]
    assert [d.crawl_id for d in await store.deliveries()] == [newer.id]


async def test_a_version_2_index_drops_the_deliveries_of_runs_deleted_before(
    tmp_path: Path,
) -> None:
    """SQLite's index upgrade (PostgreSQL's is migration 0019): versions before 3 left a
    retired run's deliveries behind."""
    data = tmp_path / "data"
    store = await open_service_store(None, data)
    try:
        kept = await _running_run(store)
        kept.state = "finished"
        await store.finish(kept, _delivery(kept.id))
        await store.insert_delivery(_delivery(kept.id + 100))  # its run is long gone
        assert len(await store.deliveries()) == 2
    finally:
        await store.close()
    with sqlite3.connect(data / "service.db") as conn:
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    store = await open_service_store(None, data)
    try:
        assert [d.crawl_id for d in await store.deliveries()] == [kept.id]
    finally:
        await store.close()
