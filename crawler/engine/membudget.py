"""A byte budget shared by the crawls of one process: pages wait for memory, not for luck.

A page's memory is mostly what its body becomes: the bytes, their text, the
links found and the frontier rows they turn into. ``ByteBudget`` is a
first-come first-served counting semaphore in bytes. The engine reserves a
page's worst case before it fetches it (outside the request's timeout, so a
page waiting for memory never times out), shrinks the reservation once the
body's real size, and then the links' real number, are known (shrinking never
waits), and releases it when the page's outcome is committed.

No deadlock: a page reserves once, before it holds anything; every later
change only gives bytes back. A reservation larger than the whole budget
waits until it is alone and then takes it all.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from crawler.page_cost import PageCost as PageCost  # re-exported: the engine's view of it


@dataclass(eq=False, slots=True)
class Reservation:
    """Bytes held by one page until it is committed."""

    budget: ByteBudget
    size: int

    def shrink(self, size: int) -> None:
        """Hold ``size`` bytes now, if less than before (never waits)."""
        if 0 <= size < self.size:
            self.budget.give_back(self.size - size)
            self.size = size

    def release(self) -> None:
        self.shrink(0)


class ByteBudget:
    """``total`` bytes shared by every engine given it; see the module docstring."""

    def __init__(self, total: int) -> None:
        self.total = max(int(total), 1)
        self.used = 0
        self.peak = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        """Reservations waiting for bytes."""
        return sum(1 for _, future in self._waiting if not future.done())

    async def reserve(self, size: int) -> Reservation:
        """Wait until ``size`` bytes (at most the whole budget) are free, in arrival order."""
        size = min(max(int(size), 0), self.total)
        if not self._waiting and self.used + size <= self.total:
            self._take(size)
            return Reservation(self, size)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, future)
        self._waiting.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.give_back(size)  # granted as it was cancelled
            else:
                self._waiting.remove(entry)
                self._grant()
            raise
        return Reservation(self, size)

    def give_back(self, size: int) -> None:
        self.used = max(self.used - size, 0)
        self._grant()

    def _take(self, size: int) -> None:
        self.used += size
        self.peak = max(self.peak, self.used)

    def _grant(self) -> None:
        while self._waiting:
            size, future = self._waiting[0]
            if future.done():
                self._waiting.popleft()
                continue
            if self.used + size > self.total:
                return
            self._waiting.popleft()
            self._take(size)
            future.set_result(None)


@dataclass(frozen=True, slots=True)
class PageMemory:
    """What an engine is given to keep its pages within a shared budget."""

    budget: ByteBudget
    cost: PageCost
