"""Per-host concurrency gate, kept apart from the frontier.

The frontier says what to do next and lives on disk; this says how much may
run at once per host and lives in memory. Mixing the two (one bounded queue
for both) is the deadlock other checkers hit. Memory is bounded: a host's
entry is dropped when nothing of it is in flight.
"""

from __future__ import annotations


class HostGate:
    """Counts requests in flight per host against a fixed limit."""

    def __init__(self, per_host: int) -> None:
        self._limit = per_host
        self._in_flight: dict[str, int] = {}

    def try_acquire(self, host: str) -> bool:
        """Take a slot for ``host`` if one is free."""
        count = self._in_flight.get(host, 0)
        if count >= self._limit:
            return False
        self._in_flight[host] = count + 1
        return True

    def release(self, host: str) -> None:
        """Give back a slot taken with ``try_acquire``."""
        count = self._in_flight[host] - 1
        if count:
            self._in_flight[host] = count
        else:
            del self._in_flight[host]

    def in_flight(self, host: str) -> int:
        """Requests to ``host`` now running."""
        return self._in_flight.get(host, 0)
