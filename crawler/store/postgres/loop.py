"""The PostgreSQL store's own event loop, on a thread of its own.

An asyncpg pool belongs to the event loop it was made on. The store is built
before the crawl's loop runs (``runner.start`` is synchronous), closed after
it ends (``FrontierStore.close`` is synchronous), and used from whichever loop
drives the engine. So the pool lives on a private loop in a daemon thread, as
the SQLite store's connection lives on its writer thread; callers on any loop
await its futures, and synchronous callers block on them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from crawler import aio

T = TypeVar("T")
STOP_TIMEOUT_S = 10.0


class BackgroundLoop:
    """An event loop running in a daemon thread until ``close``."""

    def __init__(self, name: str = "crawler-postgres") -> None:
        factory = aio.loop_factory()  # uvloop: asyncpg's protocol runs at about twice the speed
        self._loop = factory() if factory is not None else asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop; awaitable from any other loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and block this thread until it is done."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("BackgroundLoop.run called from its own thread")
        return self.submit(coro).result()

    def close(self) -> None:
        """Stop the loop and its thread (run any cleanup with ``run`` first)."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            self.submit(self._loop.shutdown_asyncgens()).result(STOP_TIMEOUT_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()
