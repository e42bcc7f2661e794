"""Per-host politeness: concurrency, minimum interval and pauses, kept apart from the frontier.

The frontier says what to do next and lives on disk; this says how much may
run at once per host, and when the next request may start, and lives in
memory. Mixing the two (one bounded queue for both) is the deadlock other
checkers hit. ``try_acquire`` never blocks: a host that is not ready is simply
skipped, and ``ready_at`` tells the dispatcher when to look again.

Memory is bounded: entries for hosts with nothing in flight and no pending
wait are dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# (concurrency, minimum interval in seconds) for a host.
Limits = Callable[[str], tuple[int, float]]
PRUNE_ABOVE = 10_000


class Gate(Protocol):
    """The dispatcher's view of a gate. A store hands the engine its own
    (``FrontierStore.host_gate``): ``HostGate`` in memory for one process, or
    one whose slots are shared by every worker of a crawl."""

    def try_acquire(self, host: str) -> bool: ...

    def release(self, host: str) -> None: ...

    def pause(self, host: str, seconds: float) -> None: ...

    def ready_at(self, host: str) -> float: ...

    def in_flight(self, host: str) -> int: ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class _HostState:
    in_flight: int = 0
    next_start_at: float = 0.0  # monotonic time before which no request may start


class HostGate:
    """Counts requests in flight per host and spaces their starts."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self._limits = limits
        self._clock = clock
        self._hosts: dict[str, _HostState] = {}

    def try_acquire(self, host: str) -> bool:
        """Take a slot for ``host`` if one is free and its interval has passed."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _HostState()
            if len(self._hosts) > PRUNE_ABOVE:
                self._prune()
        concurrency, interval = self._limits(host)
        now = self._clock()
        if state.in_flight >= concurrency or now < state.next_start_at:
            return False
        state.in_flight += 1
        state.next_start_at = now + interval
        return True

    def release(self, host: str) -> None:
        """Give back a slot taken with ``try_acquire``."""
        state = self._hosts[host]
        state.in_flight -= 1
        if state.in_flight == 0 and state.next_start_at <= self._clock():
            del self._hosts[host]

    def pause(self, host: str, seconds: float) -> None:
        """Start nothing on ``host`` for ``seconds`` (a 429 or 503 with Retry-After)."""
        state = self._hosts.setdefault(host, _HostState())
        state.next_start_at = max(state.next_start_at, self._clock() + seconds)

    def ready_at(self, host: str) -> float:
        """Monotonic time at which ``host``'s interval or pause is over."""
        state = self._hosts.get(host)
        return 0.0 if state is None else state.next_start_at

    def in_flight(self, host: str) -> int:
        """Requests to ``host`` now running."""
        state = self._hosts.get(host)
        return 0 if state is None else state.in_flight

    async def aclose(self) -> None:
        """Nothing to give back: the state lives in this process only."""

    def _prune(self) -> None:
        now = self._clock()
        for host in [
            h for h, s in self._hosts.items() if not s.in_flight and s.next_start_at <= now
        ]:
            del self._hosts[host]
