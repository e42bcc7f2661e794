"""One HTTP/1.1 client connection: a request written, its answer parsed by llhttp (httptools).

The crawler's requests went through aiohttp, which spends several times
the CPU of a bare protocol on each one (``bench/http_cost.py``): on a site
that answers fast, that was the event loop's largest cost. This connection
does only what a link checker's GET and HEAD need, with the parser aiohttp's
C extension wraps too: keep-alive, bodies delimited by length, by chunks or
by the connection's close, informational (1xx) answers skipped, flow control
while a body waits to be read, and a bound on the header block (llhttp has
none of its own). Decoding and the reader's side are in ``Answer``; pooling,
DNS and TLS in ``crawler.net.pool``.

A HEAD answer ends with its headers whatever ``Content-Length`` says; bytes
a server sends after it, or while the connection is idle, make the
connection unusable (it is closed, never reused).
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from collections.abc import AsyncIterator
from typing import Protocol, cast

import brotli
import httptools

from crawler.net.failures import Disconnected, ResponseError

# The status line and headers of one answer, 1xx answers included: aiohttp's
# parser refuses a line over 8 KiB; a header block of many lines is bounded here.
MAX_HEAD_BYTES = 256 * 1024
# A body waiting to be read stops the socket's reading above this, resumes below half.
HIGH_WATER = 256 * 1024
# The most bytes one decoding step produces: a small compressed chunk can hold a
# huge body, which is read in pieces of this size, never inflated at once.
DECODE_STEP = 64 * 1024


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; one request at a time (``send``, then the reader's calls)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._head = False
        self._received = 0
        self._error: BaseException | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._headers_done = False
        self._complete = False
        self._keep_alive = False
        self._stray = False
        self.status = 0
        self.reason: str | None = None
        self.headers: dict[str, str] = {}
        self.set_cookies: list[str] = []

    # -- the reader's side ------------------------------------------------------

    def send(self, request: bytes, *, head: bool) -> None:
        """Write a request; the answer's state starts afresh."""
        assert self.transport is not None
        if self.closed:  # closed by the server since it was kept: nothing was sent
            raise Disconnected(answered=False)
        if self._parser is None or self._head:
            # After a HEAD answer llhttp still waits for the body Content-Length
            # announced; otherwise it is at the start of the next answer.
            self._parser = _parser(self)
        self._head = head
        self._received = 0
        self._error = None
        self._headers_done = self._complete = self._keep_alive = False
        self._chunks.clear()
        self._buffered = 0
        self.status = 0
        self.reason = None
        self.headers = {}
        self.set_cookies = []
        self.transport.write(request)

    async def answer(self) -> None:
        """Wait for the answer's status and headers (raises what went wrong)."""
        while not self._headers_done:
            if self._error is not None:
                raise self._error
            await self._wait()

    async def next_chunk(self) -> bytes:
        """The next piece of the raw (still encoded) body; b"" at its end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._complete:
                return b""
            await self._wait()
        chunk = self._chunks.popleft()
        self._buffered -= len(chunk)
        if self._paused and self._buffered < HIGH_WATER // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return chunk

    def arm(self, deadline: float) -> None:
        """Fail the exchange with ``TimeoutError`` at ``deadline`` (the loop's clock).

        One timer a request, cancelled by ``disarm``: cheaper than a timeout
        context around each wait.
        """
        self.disarm()
        self._timer = self._loop.call_at(deadline, self._expire)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        self._fail(TimeoutError("timed out"))

    @property
    def reusable(self) -> bool:
        """Can the next request go over this connection? (The answer ended cleanly.)"""
        return self._complete and self._keep_alive and not self._stray and not self.closed

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wake()
        self.close()

    # -- asyncio.Protocol ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._parser is not None and not self._complete and self._error is None:
            if self._headers_done and self._until_close():
                self._complete = True  # a body delimited by the connection's close
            else:
                self._error = Disconnected(answered=self._received > 0)
        self._wake()

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None or self._complete:
            self._stray = True  # nobody asked: the connection's state is unknown
            self.close()
            return
        self._received += len(data)
        if not self._headers_done and self._received > MAX_HEAD_BYTES:
            self._fail(ResponseError(f"header block larger than {MAX_HEAD_BYTES} bytes"))
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._complete = True  # a 101 we never asked for: the connection is done for
            self._keep_alive = False
            self._wake()
        except httptools.HttpParserError as exc:
            self._fail(ResponseError(str(exc) or type(exc).__name__))

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost ends a close-delimited body

    # -- httptools callbacks -------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self.reason = status.decode("utf-8", "surrogateescape")

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("utf-8", "surrogateescape")
        if key == "set-cookie":
            self.set_cookies.append(text)
        if key not in self.headers:  # the first of repeated headers, as aiohttp's get() gives
            self.headers[key] = text

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.headers = {}  # 100 Continue, 103 Early Hints: the answer follows
            self.set_cookies = []
            self.reason = None
            return
        self.status = status
        self._headers_done = True
        if self._head:  # no body follows a HEAD answer, whatever Content-Length says
            self._complete = True
            self._keep_alive = self._parser.should_keep_alive()
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self._complete:
            self._stray = True  # a body after a HEAD answer
            return
        self._chunks.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        assert self._parser is not None
        if not self._headers_done:
            return  # the end of an informational answer
        if not self._complete:
            self._complete = True
            self._keep_alive = self._parser.should_keep_alive()
        self._wake()

    def _until_close(self) -> bool:
        """Is the body delimited by the connection's close (no length, not chunked)?"""
        return (
            "content-length" not in self.headers
            and "chunked" not in self.headers.get("transfer-encoding", "").lower()
        )


def _parser(connection: Connection) -> httptools.HttpResponseParser:
    """llhttp as aiohttp sets it up for answers: lenient where real servers stray.

    A header line with a stray character, a bare LF where CRLF belongs, spaces
    after a chunk's size: a browser reads those pages, so a link checker must
    not call them broken. Lengths, chunking and framing stay strict.
    """
    parser = httptools.HttpResponseParser(connection)
    parser.set_dangerous_leniencies(
        lenient_headers=True,
        lenient_optional_cr_before_lf=True,
        lenient_spaces_after_chunk_size=True,
    )
    return parser


class Decoder(Protocol):
    def decode(self, data: bytes) -> bytes: ...
    def more(self) -> bytes: ...
    def finish(self) -> bytes: ...


class _Inflate:
    """gzip or deflate (zlib-wrapped, or raw as some servers send it), a step at a time."""

    def __init__(self, encoding: str) -> None:
        gzip = encoding in ("gzip", "x-gzip")
        self._z: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None

    def decode(self, data: bytes) -> bytes:
        if self._z is None:  # deflate: a zlib header says which of the two it is
            wrapped = len(data) > 0 and data[0] & 0x0F == 8
            self._z = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return self._z.decompress(data, DECODE_STEP)

    def more(self) -> bytes:
        if self._z is None or not self._z.unconsumed_tail:
            return b""
        return self._z.decompress(self._z.unconsumed_tail, DECODE_STEP)

    def finish(self) -> bytes:
        if self._z is None:
            return b""
        tail = self._z.flush()
        if not self._z.eof:
            raise ResponseError("the compressed body ends before its end")
        return tail


class _Brotli:
    """brotli, a step at a time: a few bytes of it can inflate to gigabytes in one call."""

    def __init__(self) -> None:
        self._d = brotli.Decompressor()
        self._full = False  # the last step reached the limit: output may be held back

    def decode(self, data: bytes) -> bytes:
        return self._step(data)

    def more(self) -> bytes:
        # Held back: output past a full step, or input the decoder did not take yet.
        if not self._full and self._d.can_accept_more_data():
            return b""
        return self._step(b"")

    def _step(self, data: bytes) -> bytes:
        out = bytes(self._d.process(data, output_buffer_limit=DECODE_STEP))
        self._full = len(out) >= DECODE_STEP
        return out

    def finish(self) -> bytes:
        if not self._d.is_finished():
            raise ResponseError("the compressed body ends before its end")
        return b""


def decoder_for(encoding: str | None) -> Decoder | None:
    """The decoder of a ``Content-Encoding`` (an unknown one is read as it came)."""
    name = (encoding or "").strip().lower()
    if name in ("gzip", "x-gzip", "deflate"):
        return _Inflate(name)
    if name == "br":
        return _Brotli()
    return None


class Answer:
    """The answer the fetcher reads: status, headers, and its body decoded as it is read."""

    def __init__(self, connection: Connection, *, head: bool) -> None:
        self._connection = connection
        self.status = connection.status
        self.reason = connection.reason
        self.headers = connection.headers
        self.set_cookies = connection.set_cookies
        self._decoder = None if head else decoder_for(self.headers.get("content-encoding"))
        self._pending = b""
        self._eof = False

    @property
    def content(self) -> Answer:
        """Itself: the reading calls aiohttp's ``response.content`` offers.

        A property, not an attribute holding ``self``: that reference cycle
        left every answer, two a page, for the garbage collector to find.
        """
        return self

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length", "")
        return int(value) if value.isdigit() else None

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes of the decoded body (all of it for -1); b"" at its end."""
        try:
            while not self._pending and not self._eof:
                self._pending = await self._next()
        except (zlib.error, brotli.error) as exc:
            raise ResponseError(f"cannot decode the body: {exc}") from exc
        if n < 0:
            chunks = [self._pending]
            self._pending = b""
            while chunk := await self.read(DECODE_STEP):
                chunks.append(chunk)
            return b"".join(chunks)
        chunk, self._pending = self._pending[:n], self._pending[n:]
        return chunk

    def at_eof(self) -> bool:
        return self._eof and not self._pending

    def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
        return _Chunks(self, n)

    async def _next(self) -> bytes:
        """The next decoded piece; b"" with ``_eof`` set at the end."""
        decoder = self._decoder
        if decoder is not None and (step := decoder.more()):
            return step
        raw = await self._connection.next_chunk()
        if not raw:
            self._eof = True
            return decoder.finish() if decoder is not None else b""
        return decoder.decode(raw) if decoder is not None else raw


class _Chunks:
    """``Answer.iter_chunked``: a class, not an async generator, which mypyc cannot compile."""

    def __init__(self, answer: Answer, n: int) -> None:
        self._answer = answer
        self._n = n

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._answer.read(self._n)
        if not chunk:
            raise StopAsyncIteration
        return chunk
