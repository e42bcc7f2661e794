"""Learning that another worker finished the crawl: ``LISTEN``, not a poll.

Near the end of a crawl with several workers, each runs out of rows to lease
while the others still hold the last ones; the worker that completes the last
row marks the crawl finished (``finish_if_quiescent``) and sends
``NOTIFY`` on ``CHANNEL`` with the crawl's id in the same transaction, so the
notification goes out at its commit. The others wait on their own
connection's ``LISTEN`` and return at once, instead of at their next look at
the frontier (a second later). A notification lost with a dropped connection
costs only that second: ``wait`` looks at the crawl's row after it listens.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # asyncpg ships no type information
import structlog

log = structlog.get_logger(__name__)

CHANNEL = "crawler_crawl_finished"
NOTIFY = f"SELECT pg_notify('{CHANNEL}', $1::text)"


class FinishWatch:
    """One connection listening for this crawl's end; on the store's loop."""

    def __init__(self, dsn: str, crawl_id: int) -> None:
        self._dsn = dsn
        self._crawl_id = crawl_id
        self._conn: Any = None
        self._finished = asyncio.Event()  # set by this crawl's NOTIFY, never cleared
        self._looking = asyncio.Lock()

    async def wait(self, timeout_s: float) -> bool:
        """Whether the crawl is marked finished, waiting up to ``timeout_s`` for it."""
        try:
            async with self._looking:  # one statement at a time on the connection
                conn = await self._listening()
                if self._finished.is_set():
                    return True
                if await conn.fetchval(
                    "SELECT state = 'finished' FROM crawl WHERE id = $1", self._crawl_id
                ):
                    return True
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("finish_watch_failed", error=str(exc))
            await self.close()
            await asyncio.sleep(timeout_s)  # as before: the caller looks again after a poll
            return False
        try:
            await asyncio.wait_for(self._finished.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _listening(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn)
            await self._conn.add_listener(CHANNEL, self._on_notify)
        return self._conn

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == str(self._crawl_id):
            self._finished.set()

    async def close(self) -> None:
        """Close the listening connection (the store closes)."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=1.0)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                conn.terminate()
