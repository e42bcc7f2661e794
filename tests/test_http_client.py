"""The crawl's own HTTP/1.1 client (crawler.net.http1, pool, heads) against scripted servers.

Each server below answers with bytes written by hand, so the answers a
library server would never send (a body after a HEAD answer, an early hint,
a close in the middle of a body, a keep-alive race) are sent exactly; the
server counts connections and requests, so a test sees what went on the wire.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import gzip
import ssl
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path

import brotli
import pytest
import trustme

from crawler.config import CrawlSettings
from crawler.errors import FailureKind
from crawler.net.fetch import Fetcher
from crawler.net.heads import RequestHeads
from crawler.net.http1 import Answer
from crawler.net.pool import ConnectionPool, Key
from crawler.net.resolver import SystemResolver

PAGE = b"<!doctype html><title>t</title><a href='/next'>next</a>"

Handler = Callable[[int, int, bytes, asyncio.StreamWriter], Awaitable[bool]]


class ScriptedServer:
    """A loopback server calling ``handler(connection, request_no, request, writer)``.

    The handler writes the answer and returns whether to keep the connection
    open; ``requests`` holds every request's first line, ``connections`` the
    number of connections accepted.
    """

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self._handler = handler
        self._tls = tls
        self.requests: list[str] = []
        self.heads: list[bytes] = []
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.ended = 0  # connections the client closed (or the handler ended)
        self.one_ended = asyncio.Event()

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._tls)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open:
            writer.close()
        await self._server.wait_closed()

    def url(self, path: str = "/") -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._open.add(writer)
        connection = self.connections
        number = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                number += 1
                self.requests.append(head.split(b"\r\n", 1)[0].decode())
                self.heads.append(head)
                if not await self._handler(connection, number, head, writer):
                    return
                await writer.drain()
        finally:
            self._open.discard(writer)
            writer.close()
            self.ended += 1
            self.one_ended.set()


def answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def html(body: bytes = PAGE, *headers: str) -> bytes:
    return answer(body, "Content-Type: text/html", *headers)


async def test_requests_to_one_origin_share_one_connection() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html(PAGE + str(n).encode()))
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        for n in range(1, 6):
            page = await client.fetch_page(server.url(f"/p{n}"))
            assert page.status == 200
            assert page.body == PAGE + str(n).encode()
        head = await client.check(server.url("/checked"))
        assert head.status == 200
    assert server.connections == 1
    assert server.requests[-1] == "HEAD /checked HTTP/1.1"


async def test_a_request_meeting_a_closed_keep_alive_connection_is_sent_again_once() -> None:
    # Each connection answers one request and closes at the next one unanswered:
    # the server's keep-alive timeout won the race against the client's reuse.
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        if n > 1:
            return False
        writer.write(html())
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        results = [await client.fetch_page(server.url(f"/p{n}")) for n in range(3)]
    assert [r.status for r in results] == [200, 200, 200]
    assert all(r.failure is None for r in results)
    assert server.connections == 3


async def test_an_answer_cut_short_fails_and_is_not_sent_again() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9999\r\n\r\n")
        writer.write(PAGE)
        return False

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        page = await client.fetch_page(server.url("/cut"))
    assert page.failure is FailureKind.CONNECTION
    assert page.body is None
    assert server.requests == ["GET /cut HTTP/1.1"]


async def test_a_head_answer_ends_with_its_headers_and_its_connection_is_reused() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        if head.startswith(b"HEAD"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n")
        else:
            writer.write(html())
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        checked = await client.check(server.url("/file"))
        page = await client.fetch_page(server.url("/"))
    assert (checked.status, checked.size, checked.failure) == (200, 5000, None)
    assert page.body == PAGE
    assert server.connections == 1


async def test_a_body_sent_after_a_head_answer_costs_its_connection_not_the_next_request() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        if head.startswith(b"HEAD"):
            writer.write(answer(b"a body nobody asked for"))
        else:
            writer.write(html())
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        checked = await client.check(server.url("/file"))
        page = await client.fetch_page(server.url("/"))
    assert checked.status == 200
    assert page.body == PAGE
    assert server.connections == 2


async def test_informational_answers_are_skipped() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        writer.write(html(PAGE, 'ETag: "final"'))
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        page = await client.fetch_page(server.url("/"))
        again = await client.fetch_page(server.url("/again"))
    assert (page.status, page.etag, page.body) == (200, '"final"', PAGE)
    assert again.body == PAGE
    assert server.connections == 1


async def test_a_body_delimited_by_the_close_is_read_whole() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE * 100)
        return False

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        page = await client.fetch_page(server.url("/"))
        again = await client.fetch_page(server.url("/"))
    assert page.body == PAGE * 100
    assert again.body == PAGE * 100
    assert server.connections == 2


def _deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(wbits=wbits)
    return packer.compress(data) + packer.flush()


ENCODED = {
    "gzip": gzip.compress(PAGE * 50),
    "deflate": _deflate(PAGE * 50, zlib.MAX_WBITS),
    "raw-deflate": _deflate(PAGE * 50, -zlib.MAX_WBITS),
    "br": brotli.compress(PAGE * 50),
}


@pytest.mark.parametrize("name", sorted(ENCODED))
async def test_compressed_bodies_are_decoded(name: str) -> None:
    encoding = name.removeprefix("raw-")

    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html(ENCODED[name], f"Content-Encoding: {encoding}"))
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        page = await client.fetch_page(server.url("/"))
    assert page.body == PAGE * 50
    assert b"accept-encoding: gzip, deflate, br" in server.heads[0].lower()


async def test_a_compressed_body_cut_short_is_an_invalid_response() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html(ENCODED["gzip"][:-12], "Content-Encoding: gzip"))
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        page = await client.fetch_page(server.url("/"))
    assert page.failure is FailureKind.INVALID_RESPONSE
    assert "invalid response" in (page.error or "")


async def test_a_compression_bomb_is_read_to_the_cap_only() -> None:
    bomb = gzip.compress(b"<p>" + b" " * 50_000_000)

    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html(bomb, "Content-Encoding: gzip"))
        return True

    async with (
        ScriptedServer(handler) as server,
        Fetcher(CrawlSettings(max_body_bytes=100_000)) as client,
    ):
        page = await client.fetch_page(server.url("/"))
    assert page.truncated
    assert len(page.body or b"") == 100_000


async def test_the_crawls_headers_and_a_requests_own_are_sent_once_each() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer(b"", status="304 Not Modified"))
        return True

    settings = CrawlSettings(user_agent="probe/1", headers={"accept": "text/html", "X-A": "1"})
    async with ScriptedServer(handler) as server, Fetcher(settings) as client:
        page = await client.fetch_page(server.url("/p?q=1#frag"), etag='"v1"')
        origin = server.url().split("//")[1].rstrip("/")
    assert page.status == 304
    lines = server.heads[0].decode().split("\r\n")
    assert lines[0] == "GET /p?q=1 HTTP/1.1"
    names = [line.split(":", 1)[0].lower() for line in lines[1:] if line]
    assert sorted(names) == sorted(
        ["host", "user-agent", "accept", "accept-encoding", "x-a", "if-none-match"]
    )
    assert "accept: text/html" in [line.lower() for line in lines]
    assert f"Host: {origin}" in lines
    assert 'If-None-Match: "v1"' in lines


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def _tls_server(authority: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return context


async def _tls_page(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
    writer.write(html())
    return True


async def test_tls_is_verified_against_the_ca_store(
    authority: trustme.CA, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ScriptedServer(_tls_page, _tls_server(authority)) as server:
        async with Fetcher(CrawlSettings()) as client:
            refused = await client.fetch_page(server.url("/"))
        authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        async with Fetcher(CrawlSettings()) as client:
            trusted = await client.fetch_page(server.url("/"))
        async with Fetcher(CrawlSettings(insecure=True)) as client:
            monkeypatch.delenv("SSL_CERT_FILE")
            unverified = await client.fetch_page(server.url("/"))
    assert refused.failure is FailureKind.TLS
    assert "certificate" in (refused.error or "")
    assert (trusted.status, trusted.body) == (200, PAGE)
    assert (unverified.status, unverified.body) == (200, PAGE)
    assert server.requests == ["GET / HTTP/1.1", "GET / HTTP/1.1"]


async def test_credentials_in_the_url_are_sent_as_basic_authorization() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html())
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        url = server.url("/private").replace("http://", "http://al%20ice:s%3Acret@")
        page = await client.fetch_page(url)
    assert page.status == 200
    lines = server.heads[0].decode().split("\r\n")
    assert lines[0] == "GET /private HTTP/1.1"
    assert "Authorization: Basic " + base64.b64encode(b"al ice:s:cret").decode() in lines


async def test_an_answer_with_bare_line_feeds_is_read_as_browsers_read_it() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: %d\n\n" % len(PAGE)
        )
        writer.write(PAGE)
        return True

    async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
        page = await client.fetch_page(server.url("/"))
    assert (page.status, page.content_type, page.body) == (200, "text/html", PAGE)


async def test_idle_connections_beyond_the_limit_are_closed_least_recently_used_first() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html())
        return True

    async with (
        ScriptedServer(handler) as first,
        ScriptedServer(handler) as second,
        ScriptedServer(handler) as third,
        Fetcher(CrawlSettings(max_concurrency=2)) as client,
    ):
        for server in (first, second, third):
            assert (await client.fetch_page(server.url("/"))).status == 200
        await asyncio.wait_for(first.one_ended.wait(), 10)
        again = await client.fetch_page(third.url("/again"))
        assert (first.ended, second.ended, third.ended) == (1, 0, 0)
    assert again.status == 200
    assert third.connections == 1  # still kept: the most recently used


async def _exchange_until(pool: ConnectionPool, key: Key, request: bytes, deadline: float) -> None:
    async with pool.exchange(key, request, head=False, deadline=deadline):
        pass


async def test_a_wait_for_a_slot_ends_at_its_deadline_and_the_slot_stays_usable() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html())
        return True

    async with ScriptedServer(handler) as server:
        pool = ConnectionPool(SystemResolver(), limit=1, verify_tls=True)
        port = int(server.url().rsplit(":", 1)[1].rstrip("/"))
        key: Key = ("http", "127.0.0.1", port)
        request = RequestHeads({}).build("GET", "/", f"127.0.0.1:{port}")
        try:
            async with pool.exchange(key, request, head=False, deadline=pool.clock() + 30) as held:
                assert held.status == 200
                with pytest.raises(TimeoutError):
                    await _exchange_until(pool, key, request, pool.clock() + 0.2)
            async with pool.exchange(key, request, head=False, deadline=pool.clock() + 30) as then:
                assert (then.status, await then.read()) == (200, PAGE)
        finally:
            await pool.close()
    assert server.requests == ["GET / HTTP/1.1", "GET / HTTP/1.1"]


async def test_a_cookie_header_given_is_sent_with_the_cookies_the_site_set() -> None:
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html(PAGE, "Set-Cookie: session=abc; Path=/"))
        return True

    settings = CrawlSettings(headers={"Cookie": "given=1"})
    async with ScriptedServer(handler) as server, Fetcher(settings) as client:
        await client.fetch_page(server.url("/login"))
        await client.fetch_page(server.url("/next"))
    cookies = [
        [line for line in head.decode().split("\r\n") if line.lower().startswith("cookie:")]
        for head in server.heads
    ]
    assert cookies == [["Cookie: given=1"], ["Cookie: given=1; session=abc"]]


async def test_answers_read_are_freed_without_the_garbage_collector() -> None:
    # An answer in a reference cycle outlives its request until a collection
    # finds it: two a page, with what they hold.
    async def handler(conn: int, n: int, head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(html())
        return True

    def answers_alive() -> int:
        return sum(isinstance(o, Answer) for o in gc.get_objects())

    gc.collect()
    before = answers_alive()
    gc.disable()
    try:
        async with ScriptedServer(handler) as server, Fetcher(CrawlSettings()) as client:
            for n in range(20):
                assert (await client.fetch_page(server.url(f"/p{n}"))).status == 200
            assert (await client.check(server.url("/checked"))).status == 200
            assert answers_alive() == before
    finally:
        gc.enable()
