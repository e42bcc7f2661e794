"""Connections kept alive, names looked up once, TLS: what ``crawler.net.http1`` needs around it.

``ConnectionPool.exchange`` sends one request and yields its ``Answer``;
leaving it gives the connection back when its answer ended cleanly and
closes it otherwise (a body left unread, an error, a timeout). It keeps what
aiohttp's connector gave the crawl:

- at most ``limit`` requests at once, and as many idle connections, the
  least recently used closed first; an idle one is not reused after
  ``KEEPALIVE_S`` (servers close theirs about then);
- a request whose reused connection turns out closed before a byte of the
  answer came back (the server's keep-alive timeout raced ours) is sent
  again once, on a new connection: GET and HEAD are safe to repeat;
- names resolved through the crawl's resolver (the private-address guard
  and the memo of missing names wrap it), answers kept ``DNS_TTL_S``,
  concurrent lookups of one name made once; an IP literal is not looked up;
- each resolved address tried in turn; TLS verified with the system's CA
  store (loaded at the first TLS connection), or not at all (``--insecure``).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import OrderedDict, deque
from types import TracebackType

from crawler.net.failures import ConnectFailed, Disconnected, NameNotResolved
from crawler.net.http1 import Answer, Connection
from crawler.net.resolver import Address, Resolver
from crawler.netguard import ip_literal

KEEPALIVE_S = 15.0
DNS_TTL_S = 300.0
# Names whose answers are kept at most; the memo is emptied when full (forgetting costs a lookup).
MAX_NAMES = 10_000

Key = tuple[str, str, int]  # (scheme, host, port)
Name = tuple[str, int]  # (host, port)


class ConnectionPool:
    """Keep-alive HTTP/1.1 connections by (scheme, host, port); see the module docstring."""

    def __init__(self, resolver: Resolver, *, limit: int, verify_tls: bool) -> None:
        self._resolver = resolver
        self._limit = max(1, limit)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_use = 0
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._verify_tls = verify_tls
        self._tls: ssl.SSLContext | None = None
        self._idle: dict[Key, list[Connection]] = {}
        self._idle_order: OrderedDict[Connection, Key] = OrderedDict()
        self._names: dict[Name, tuple[float, list[Address]]] = {}
        self._lookups: dict[Name, asyncio.Future[list[Address]]] = {}
        self._busy: set[Connection] = set()

    def clock(self) -> float:
        """The event loop's time, which deadlines are on (the loop is looked up once:
        ``asyncio.get_running_loop`` asks the kernel for the process id each call)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop.time()

    def exchange(self, key: Key, request: bytes, *, head: bool, deadline: float) -> Exchange:
        """Send ``request`` to ``key``'s origin: ``async with`` gives the answer, headers read.

        ``deadline`` (the loop's clock) bounds the whole exchange: the wait for a
        slot, connecting, the answer, and reading its body until the block ends.
        """
        return Exchange(self, key, request, head, deadline)

    async def close(self) -> None:
        for connection in [*self._idle_order, *self._busy]:
            connection.close()
        self._idle.clear()
        self._idle_order.clear()
        self._busy.clear()

    async def _take_slot(self, deadline: float) -> None:
        """One of ``limit`` slots (a plain counter: asyncio's Semaphore costs more per request)."""
        waiters = self._slot_waiters
        while waiters and waiters[0].done():
            waiters.popleft()  # a wait that ended (its deadline) before a slot came
        if self._in_use < self._limit and not waiters:
            self._in_use += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._give_slot()  # handed over as the wait ended: pass it on
            raise

    def _give_slot(self) -> None:
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes to the next waiter as it is
                return
        self._in_use -= 1

    async def _answered(
        self, key: Key, request: bytes, *, head: bool, deadline: float
    ) -> Connection:
        """A connection whose answer's headers came (sent again once after a keep-alive race)."""
        connection, reused = self._reuse(key), True
        while True:
            if connection is None:
                async with asyncio.timeout_at(deadline):
                    connection = await self._connect(key)
                reused = False
            self._busy.add(connection)
            connection.arm(deadline)
            try:
                connection.send(request, head=head)
                await connection.answer()
                return connection
            except Disconnected as exc:
                self._drop(connection)
                if not reused or exc.answered:
                    raise
            except BaseException:
                self._drop(connection)
                raise
            connection = None

    def _drop(self, connection: Connection) -> None:
        connection.disarm()
        self._busy.discard(connection)
        connection.close()

    def _release(self, key: Key, connection: Connection) -> None:
        connection.disarm()
        self._busy.discard(connection)
        if connection.reusable:
            self._keep(key, connection)
        else:
            connection.close()
        self._give_slot()

    def _reuse(self, key: Key) -> Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            del self._idle_order[connection]
            if not connection.closed and now - connection.idle_since < KEEPALIVE_S:
                return connection
            connection.close()
        return None

    def _keep(self, key: Key, connection: Connection) -> None:
        connection.idle_since = time.monotonic()
        self._idle.setdefault(key, []).append(connection)
        self._idle_order[connection] = key
        if len(self._idle_order) > self._limit:
            oldest, its_key = self._idle_order.popitem(last=False)
            idle = self._idle[its_key]
            idle.remove(oldest)
            if not idle:
                del self._idle[its_key]
            oldest.close()

    async def _connect(self, key: Key) -> Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        last: OSError | None = None
        for address in await self._addresses(host, port):
            try:
                _, connection = await loop.create_connection(
                    lambda: Connection(loop),
                    str(address["host"]),
                    int(address["port"]),
                    family=address["family"],
                    proto=address["proto"],
                    flags=address["flags"],
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
            except ssl.SSLError:
                raise  # a certificate the next address would present too
            except OSError as exc:
                last = exc
                continue
            return connection
        raise ConnectFailed(host, port, last or OSError("no address"))

    async def _addresses(self, host: str, port: int) -> list[Address]:
        literal = ip_literal(host)
        if literal is None:
            return await self._resolve(host, port)
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        return [Address(hostname=host, host=host, port=port, family=family, proto=0, flags=0)]

    async def _resolve(self, host: str, port: int) -> list[Address]:
        name: Name = (host, port)
        known = self._names.get(name)
        if known is not None and time.monotonic() < known[0]:
            return known[1]
        lookup = self._lookups.get(name)
        if lookup is None:
            lookup = asyncio.ensure_future(self._resolver.resolve(host, port, socket.AF_UNSPEC))
            self._lookups[name] = lookup
            lookup.add_done_callback(lambda done: self._looked_up(name, done))
        try:
            return await asyncio.shield(lookup)  # a waiter's timeout ends its wait, not the lookup
        except socket.gaierror as exc:
            raise NameNotResolved(host, exc) from exc

    def _looked_up(self, name: Name, lookup: asyncio.Future[list[Address]]) -> None:
        """Keep a lookup's answer (a failure is retrieved here, and not kept)."""
        self._lookups.pop(name, None)
        if not lookup.cancelled() and lookup.exception() is None:
            if len(self._names) >= MAX_NAMES:
                self._names.clear()
            self._names[name] = (time.monotonic() + DNS_TTL_S, lookup.result())

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            if self._verify_tls:
                self._tls = ssl.create_default_context()
            else:
                self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                self._tls.check_hostname = False
                self._tls.verify_mode = ssl.CERT_NONE
        return self._tls


class Exchange:
    """One request's use of the pool (``ConnectionPool.exchange``): an async context manager."""

    __slots__ = ("_connection", "_deadline", "_head", "_key", "_pool", "_request")

    def __init__(
        self, pool: ConnectionPool, key: Key, request: bytes, head: bool, deadline: float
    ) -> None:
        self._pool = pool
        self._key = key
        self._request = request
        self._head = head
        self._deadline = deadline
        self._connection: Connection | None = None

    async def __aenter__(self) -> Answer:
        pool = self._pool
        await pool._take_slot(self._deadline)
        try:
            connection = await pool._answered(
                self._key, self._request, head=self._head, deadline=self._deadline
            )
        except BaseException:
            pool._give_slot()
            raise
        self._connection = connection
        return Answer(connection, head=self._head)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._connection is not None:
            self._pool._release(self._key, self._connection)
            self._connection = None
