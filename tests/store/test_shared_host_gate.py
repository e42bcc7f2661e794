"""``SharedHostGate`` against a store that counts what it is asked: a slot released soon
after its grant is used again without a round trip; later, or on a host with an interval,
it goes back to the database."""

from __future__ import annotations

import asyncio

from crawler.store.postgres import host_gate
from crawler.store.postgres.gate import Grant, Want
from crawler.store.postgres.host_gate import SharedHostGate

from kit.sitekit import wait_until

HOST = "h.test"


class CountingStore:
    """Grants what is asked up to the host's concurrency, as the database does for one worker."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.asked = 0
        self.released = 0

    async def acquire_hosts(
        self, owner: str, wants: dict[str, Want], ttl_s: float, now: float
    ) -> dict[str, Grant]:
        self.asked += 1
        want = wants[HOST]
        granted = max(0, min(want.count, want.concurrency - self.in_flight))
        self.in_flight += granted
        return {HOST: Grant(granted, 0.0)}

    async def release_hosts(self, owner: str, counts: dict[str, int], now: float) -> None:
        self.released += counts.get(HOST, 0)
        self.in_flight -= counts.get(HOST, 0)

    async def pause_host(self, host: str, until: float) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def granted_gate(interval_s: float) -> tuple[SharedHostGate, CountingStore, Clock]:
    store, clock = CountingStore(), Clock()
    gate = SharedHostGate(
        store, "w", lambda host: (2, interval_s), ttl_s=60.0, clock=clock, wall=clock
    )
    assert not gate.try_acquire(HOST)  # none held: asked for in the background
    await wait_until(lambda: store.in_flight == 2, timeout=10)
    return gate, store, clock


async def test_a_slot_released_soon_after_its_grant_is_used_again_without_asking() -> None:
    gate, store, clock = await granted_gate(0.0)
    assert gate.try_acquire(HOST)
    assert gate.try_acquire(HOST)
    asked = store.asked
    for _ in range(50):  # request after request within REUSE_S of the grant
        gate.release(HOST)
        assert gate.try_acquire(HOST)
    await asyncio.sleep(0)
    assert (store.asked, store.released, gate.in_flight(HOST)) == (asked, 0, 2)
    clock.now += host_gate.REUSE_S  # past it: released slots go back
    gate.release(HOST)
    gate.release(HOST)
    await wait_until(lambda: store.released == 2, timeout=10)
    assert store.in_flight == 0
    await gate.aclose()


async def test_a_host_with_an_interval_gives_every_slot_back() -> None:
    gate, store, _ = await granted_gate(0.5)
    assert gate.try_acquire(HOST)
    gate.release(HOST)
    await wait_until(lambda: store.released == 1, timeout=10)
    await gate.aclose()


async def test_closing_gives_kept_slots_back() -> None:
    gate, store, _ = await granted_gate(0.0)
    assert gate.try_acquire(HOST)
    gate.release(HOST)  # kept
    await gate.aclose()
    assert store.in_flight == 0
