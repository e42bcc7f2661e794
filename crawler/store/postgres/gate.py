"""Per-host politeness as shared rows: request slots and start times for every worker.

A host's concurrency and minimum interval hold across all the workers of a
database, not per process (``crawler.politeness_pg`` is the engine's side):

- ``host_gate``: one row per host with ``next_allowed_at``, the earliest unix
  time the next request may start. ``acquire`` claims the rows of the hosts
  asked for with ``FOR UPDATE SKIP LOCKED``: a host another worker is
  claiming right now is simply not granted this time, nobody waits.
- ``host_slot``: per (host, worker), the requests in flight (granted, not yet
  released). A slot row expires with its owner's leases, renewed with them, so
  a worker killed mid-request stops counting once its leases would expire;
  ``reclaim`` drops the slots of workers found dead at once.

A worker's grant on a host is capped by its fair share of the host's
concurrency among the workers that want it (rows with nothing in flight are
"waiting" marks that expire after ``WAITING_TTL_S``), so one busy worker
cannot keep a host's slots from the others.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

WAITING_TTL_S = 2.0

_LOCK_GATES = """
SELECT g.host_id, h.name, g.next_allowed_at
FROM host_gate g JOIN host h ON h.id = g.host_id
WHERE h.name = ANY($1::text[])
ORDER BY g.host_id
FOR UPDATE OF g SKIP LOCKED
"""

_ADD_SLOTS = """
INSERT INTO host_slot (host_id, owner, in_flight, expires_at)
SELECT x.host_id, $1, x.n, x.expires_at
FROM unnest($2::bigint[], $3::integer[], $4::double precision[]) AS x (host_id, n, expires_at)
ORDER BY x.host_id
ON CONFLICT (host_id, owner) DO UPDATE SET
    in_flight = CASE WHEN host_slot.expires_at > $5 THEN host_slot.in_flight ELSE 0 END
                + excluded.in_flight,
    expires_at = GREATEST(excluded.expires_at,
                          CASE WHEN host_slot.expires_at > $5 AND host_slot.in_flight > 0
                               THEN host_slot.expires_at ELSE 0 END)
"""

_RELEASE_SLOTS = """
UPDATE host_slot s SET
    in_flight = GREATEST(s.in_flight - x.n, 0),
    expires_at = CASE WHEN s.in_flight - x.n <= 0 THEN LEAST(s.expires_at, $4)
                      ELSE s.expires_at END
FROM unnest($2::text[], $3::integer[]) AS x (name, n)
JOIN host h ON h.name = x.name
WHERE s.host_id = h.id AND s.owner = $1
"""


@dataclass(frozen=True, slots=True)
class Want:
    """What a worker asks of a host: how many slots, under which limits."""

    count: int
    concurrency: int
    interval_s: float


@dataclass(frozen=True, slots=True)
class Grant:
    """What it got: slots, and the unix time before which no more will be granted."""

    granted: int
    not_before: float


async def acquire(
    conn: Any, owner: str, wants: dict[str, Want], ttl_s: float, now: float
) -> dict[str, Grant]:
    """Grant slots on the hosts in ``wants`` that are free, spaced and not being claimed."""
    names = sorted(wants)
    locked = list(await conn.fetch(_LOCK_GATES, names))
    absent = set(names) - {r[1] for r in locked}
    if absent:
        locked += await _create_gates(conn, sorted(absent))
    grants = {name: Grant(0, now) for name in names}  # claimed by someone else: try soon
    if not locked:
        return grants
    host_ids = [int(r[0]) for r in locked]
    slots: defaultdict[int, list[tuple[str, int]]] = defaultdict(list)
    for host_id, slot_owner, in_flight in await conn.fetch(
        "SELECT host_id, owner, in_flight FROM host_slot "
        "WHERE host_id = ANY($1::bigint[]) AND expires_at > $2",
        host_ids,
        now,
    ):
        slots[int(host_id)].append((slot_owner, int(in_flight)))
    spaced: list[tuple[int, float]] = []
    added: list[tuple[int, int, float]] = []
    for host_id, name, next_allowed_at in locked:
        want = wants[name]
        granted = _grant(want, slots[host_id], owner, now, next_allowed_at)
        not_before = float(next_allowed_at)
        if granted and want.interval_s > 0:
            not_before = now + want.interval_s
            spaced.append((host_id, not_before))
        grants[name] = Grant(granted, max(not_before, now))
        expires_at = now + ttl_s if granted else now + WAITING_TTL_S
        added.append((host_id, granted, expires_at))
    if spaced:
        await conn.execute(
            "UPDATE host_gate g SET next_allowed_at = x.at "
            "FROM unnest($1::bigint[], $2::double precision[]) AS x (host_id, at) "
            "WHERE g.host_id = x.host_id",
            [s[0] for s in spaced],
            [s[1] for s in spaced],
        )
    await conn.execute(
        _ADD_SLOTS, owner, [a[0] for a in added], [a[1] for a in added], [a[2] for a in added], now
    )
    return grants


def _grant(
    want: Want, slots: list[tuple[str, int]], owner: str, now: float, next_allowed_at: float
) -> int:
    """Slots to grant: within the host's free slots, its interval, and our fair share."""
    if now < next_allowed_at:
        return 0
    total = sum(n for _, n in slots)
    mine = sum(n for o, n in slots if o == owner)
    workers = {o for o, _ in slots} | {owner}
    share = math.ceil(want.concurrency / len(workers))
    granted = min(want.count, want.concurrency - total, share - mine)
    if want.interval_s > 0:
        granted = min(granted, 1)
    return max(granted, 0)


async def _create_gates(conn: Any, names: list[str]) -> list[Any]:
    """Rows for hosts never gated before (or being claimed: those stay unlocked)."""
    await conn.execute(
        "INSERT INTO host (name) SELECT unnest($1::text[]) ORDER BY 1 ON CONFLICT DO NOTHING",
        names,
    )
    await conn.execute(
        "INSERT INTO host_gate (host_id) SELECT id FROM host WHERE name = ANY($1::text[]) "
        "ORDER BY id ON CONFLICT DO NOTHING",
        names,
    )
    return list(await conn.fetch(_LOCK_GATES, names))


async def release(conn: Any, owner: str, counts: dict[str, int], now: float) -> None:
    """Give back ``counts[host]`` slots of ``owner`` on each host."""
    names = sorted(counts)
    await conn.execute(
        _RELEASE_SLOTS, owner, names, [counts[n] for n in names], now + WAITING_TTL_S
    )


async def pause(conn: Any, host: str, until: float) -> None:
    """Start nothing on ``host`` before ``until``, whoever asks (429 / 503 Retry-After)."""
    await conn.execute("INSERT INTO host (name) VALUES ($1) ON CONFLICT DO NOTHING", host)
    await conn.execute(
        "INSERT INTO host_gate (host_id, next_allowed_at) SELECT id, $2 FROM host WHERE name = $1 "
        "ON CONFLICT (host_id) DO UPDATE SET "
        "next_allowed_at = GREATEST(host_gate.next_allowed_at, excluded.next_allowed_at)",
        host,
        until,
    )


async def renew_slots(conn: Any, owner: str, expires_at: float) -> None:
    """Keep ``owner``'s slots alive with its leases."""
    await conn.execute(
        "UPDATE host_slot SET expires_at = $2 WHERE owner = $1 AND in_flight > 0",
        owner,
        expires_at,
    )


async def drop_slots(conn: Any, owners: list[str]) -> None:
    """Forget every slot of these workers (stopped, or found dead)."""
    await conn.execute("DELETE FROM host_slot WHERE owner = ANY($1::text[])", owners)


async def expire_slots(conn: Any, now: float) -> None:
    """Delete slot rows that no longer count, so the table stays small."""
    await conn.execute("DELETE FROM host_slot WHERE expires_at < $1", now - WAITING_TTL_S)
