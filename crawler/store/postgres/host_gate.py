"""Per-host politeness shared by every worker of a PostgreSQL crawl.

``SharedHostGate`` has ``HostGate``'s interface (``try_acquire``, ``release``,
``pause``, ``ready_at``, ``in_flight``), so the engine's dispatcher is the same
code for both backends, but the slots and start times are rows in the
database (``crawler.store.postgres.gate``): a host's concurrency and interval
hold across all workers, on any machine.

``try_acquire`` never blocks and never waits for the database: it spends
slots already granted to this worker. When there are none it asks for them in
the background and says no; once slots arrive the gate calls ``wake`` (the
engine's wake-up), and ``ready_at`` tells the dispatcher when to look again
meanwhile. Releases are sent in batches by the same background task. Slots
granted but not used within ``HOLD_S`` go back, so an idle worker holds none.

A slot released within ``REUSE_S`` of its host's last grant to this worker is
kept for this worker's next request instead (hosts without an interval only):
sending every slot back and asking for it again cost two transactions a
request, and a crawl with one worker waited on them between its requests.
Slots still go back within ``REUSE_S`` of a grant, so the database shares them
between workers as often as that.

``PostgresFrontier.host_gate`` hands it to the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from typing import Protocol

import structlog

from crawler.politeness import PRUNE_ABOVE, Limits
from crawler.store.postgres.gate import Grant, Want

log = structlog.get_logger(__name__)

POLL_S = 0.01  # look again this soon while slots are being asked for
HOLD_S = 0.1  # slots granted but unused this long go back to the database
REUSE_S = 0.1  # a slot released this soon after its host's last grant is used again here
ERROR_BACKOFF_S = 1.0


class SharedGateStore(Protocol):
    """What a store offers when its politeness state is shared between workers."""

    async def acquire_hosts(
        self, owner: str, wants: dict[str, Want], ttl_s: float, now: float
    ) -> dict[str, Grant]: ...

    async def release_hosts(self, owner: str, counts: dict[str, int], now: float) -> None: ...

    async def pause_host(self, host: str, until: float) -> None: ...


class SharedHostGate:
    """``HostGate`` with its state in the database (see module docstring)."""

    def __init__(
        self,
        store: SharedGateStore,
        owner: str,
        limits: Limits,
        *,
        ttl_s: float,
        wake: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._owner = owner
        self._limits = limits
        self._ttl_s = ttl_s
        self._wake = wake
        self._clock = clock
        self._wall = wall
        self._held: Counter[str] = Counter()  # granted, not yet in use
        self._held_since: dict[str, float] = {}
        self._in_use: Counter[str] = Counter()
        self._wanted: set[str] = set()
        self._asking: set[str] = set()  # in the request being made now
        self._not_before: dict[str, float] = {}  # monotonic
        # This worker's own starts, a host's interval apart (monotonic): a grant
        # comes back a moment after the database spaced it, and two grants used
        # as they arrive could start closer than the interval.
        self._spaced_until: dict[str, float] = {}
        self._reuse_until: dict[str, float] = {}  # monotonic, per host: see REUSE_S
        self._releases: Counter[str] = Counter()
        self._pauses: dict[str, float] = {}  # host -> unix time
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.Handle | None = None  # uvloop's call_later gives a plain Handle
        self._timer_at = 0.0
        self._closed = False

    # -- HostGate's interface -------------------------------------------------

    def try_acquire(self, host: str) -> bool:
        """Take a granted slot for ``host`` if this worker holds one; else ask for some."""
        now = self._clock()
        if now < self._spaced_until.get(host, 0.0):
            return False  # granted or not, this worker's last start was too recent
        if self._held[host] > 0 and now >= self._not_before.get(host, 0.0):
            self._space(host, now)
            self._held[host] -= 1
            if not self._held[host]:
                del self._held[host]
                self._held_since.pop(host, None)
            self._in_use[host] += 1
            return True
        if not self._closed:
            self._wanted.add(host)
            self._kick()
        return False

    def release(self, host: str) -> None:
        """Give back a slot taken with ``try_acquire`` (kept, or sent back in a batch)."""
        self._in_use[host] -= 1
        if self._in_use[host] <= 0:
            del self._in_use[host]
        now = self._clock()
        if not self._closed and now < self._reuse_until.get(host, 0.0):
            self._held[host] += 1
            self._held_since.setdefault(host, now)
            self._return_unused()  # arms the timer that sends it back if unused
            if self._wake is not None:
                self._wake()
            return
        self._releases[host] += 1
        self._kick()

    def pause(self, host: str, seconds: float) -> None:
        """No worker starts anything on ``host`` for ``seconds``."""
        until = self._wall() + seconds
        self._pauses[host] = max(self._pauses.get(host, 0.0), until)
        self._not_before[host] = max(self._not_before.get(host, 0.0), self._clock() + seconds)
        self._kick()

    def ready_at(self, host: str) -> float:
        """Monotonic time at which to try ``host`` again."""
        now = self._clock()
        at = max(self._not_before.get(host, 0.0), self._spaced_until.get(host, 0.0))
        if host in self._wanted or host in self._asking:
            at = max(at, now + POLL_S)
        return at

    def in_flight(self, host: str) -> int:
        """Requests to ``host`` this worker is running."""
        return self._in_use[host]

    def _space(self, host: str, now: float) -> None:
        """Remember when this worker may next start on ``host`` (its interval, if any)."""
        interval = self._limits(host)[1]
        if interval > 0:
            if len(self._spaced_until) > PRUNE_ABOVE:
                self._spaced_until = {h: t for h, t in self._spaced_until.items() if t > now}
            self._spaced_until[host] = now + interval

    async def aclose(self) -> None:
        """Stop asking; send back every slot held and released (before the leases go)."""
        self._closed = True
        self._wanted.clear()
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        self._releases.update(self._held)
        self._held.clear()
        if self._releases:
            with contextlib.suppress(Exception):
                await self._flush_releases()

    # -- the background exchange ------------------------------------------------

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._exchange())

    async def _exchange(self) -> None:
        """Send releases, pauses and requests until there is nothing left to say."""
        while self._releases or self._pauses or (self._wanted and not self._closed):
            try:
                await self._flush_releases()
                await self._flush_pauses()
                if self._wanted and not self._closed:
                    await self._ask()
            except Exception:
                log.exception("host_gate_failed")
                await asyncio.sleep(ERROR_BACKOFF_S)
        self._return_unused()

    async def _flush_releases(self) -> None:
        releases, self._releases = self._releases, Counter()
        if not releases:
            return
        try:
            await self._store.release_hosts(self._owner, dict(releases), self._wall())
        except BaseException:
            self._releases.update(releases)  # sent again next time
            raise

    async def _flush_pauses(self) -> None:
        pauses, self._pauses = self._pauses, {}
        for host, until in pauses.items():
            await self._store.pause_host(host, until)

    async def _ask(self) -> None:
        self._asking, self._wanted = self._wanted, set()
        wants = {}
        for host in self._asking:
            concurrency, interval = self._limits(host)
            count = concurrency - self._in_use[host] - self._held[host]
            if count > 0:
                wants[host] = Want(count, concurrency, interval)
        try:
            if not wants:
                return
            grants = await self._store.acquire_hosts(self._owner, wants, self._ttl_s, self._wall())
        finally:
            self._asking = set()
        now, wall = self._clock(), self._wall()
        granted = False
        for host, grant in grants.items():
            if not grant.granted:
                # Ask again then. A granted slot is usable at once: its not_before
                # spaces the next grant (a host's interval), not this one.
                self._not_before[host] = now + max(grant.not_before - wall, 0.0)
            if grant.granted:
                self._held[host] += grant.granted
                self._held_since.setdefault(host, now)
                if self._limits(host)[1] <= 0:  # with an interval, every start is the database's
                    self._keep_reusing(host, now)
                granted = True
        if granted and self._wake is not None:
            self._wake()

    def _keep_reusing(self, host: str, now: float) -> None:
        if len(self._reuse_until) > PRUNE_ABOVE:
            self._reuse_until = {h: t for h, t in self._reuse_until.items() if t > now}
        self._reuse_until[host] = now + REUSE_S

    def _return_unused(self) -> None:
        """Slots held past ``HOLD_S`` go back; look again later for the younger ones."""
        if not self._held or self._closed:
            return
        now = self._clock()
        for host, since in list(self._held_since.items()):
            if now - since >= HOLD_S:
                self._releases[host] += self._held.pop(host, 0)
                del self._held_since[host]
        if self._releases:
            self._kick()
        elif self._held and (self._timer is None or self._timer_at <= now):
            self._timer_at = now + HOLD_S
            self._timer = asyncio.get_running_loop().call_later(HOLD_S, self._return_unused)
