"""The service index's rows as its models, one mapping for both backends.

The SQLite index and PostgreSQL's ``service_crawl``/``service_delivery``
tables hold the same columns; only the placeholders of their statements
differ (``?`` against ``$n``), so the column orders and the conversions
between a row and an ``Entry`` or a ``Delivery`` live here once.
"""

from __future__ import annotations

import json
from typing import Any

from crawler.store.service import Delivery, Entry

# A delivery's columns as ``delivery_from_row`` reads them.
DELIVERY_COLUMNS = (
    "id, definition_id, crawl_id, url, body, state, attempts, created_at, next_attempt_at, "
    "last_status, last_error, finished_at"
)
# What an insert writes (the id comes from the database), in this order.
DELIVERY_INSERT_COLUMNS = (
    "definition_id, crawl_id, url, body, state, attempts, created_at, next_attempt_at, "
    "last_status, last_error, finished_at"
)


def entry_from_row(row: Any) -> Entry:
    """A ``service_crawl`` row: id, state, seeds and settings (JSON text), times, error, run of."""
    return Entry(
        id=int(row[0]),
        state=str(row[1]),
        seeds=json.loads(row[2]),
        settings=json.loads(row[3]),
        created_at=float(row[4]),
        queued_at=float(row[5]),
        started_at=None if row[6] is None else float(row[6]),
        finished_at=None if row[7] is None else float(row[7]),
        error=row[8],
        definition_id=None if row[9] is None else int(row[9]),
    )


def delivery_from_row(row: Any) -> Delivery:
    """A ``service_delivery`` row in ``DELIVERY_COLUMNS``' order."""
    return Delivery(
        id=int(row[0]),
        definition_id=int(row[1]),
        crawl_id=int(row[2]),
        url=row[3],
        body=bytes(row[4]),
        state=row[5],
        attempts=int(row[6]),
        created_at=float(row[7]),
        next_attempt_at=float(row[8]),
        last_status=row[9],
        last_error=row[10],
        finished_at=None if row[11] is None else float(row[11]),
    )


def delivery_insert_values(d: Delivery) -> tuple[Any, ...]:
    """A delivery's values in ``DELIVERY_INSERT_COLUMNS``' order."""
    return (
        d.definition_id,
        d.crawl_id,
        d.url,
        d.body,
        d.state,
        d.attempts,
        d.created_at,
        d.next_attempt_at,
        d.last_status,
        d.last_error,
        d.finished_at,
    )


def delivery_update_values(d: Delivery) -> tuple[Any, ...]:
    """What an update of its progress sets (state, attempts, next attempt, last status and
    error, finish), then the delivery's id."""
    return (
        d.state,
        d.attempts,
        d.next_attempt_at,
        d.last_status,
        d.last_error,
        d.finished_at,
        d.id,
    )
