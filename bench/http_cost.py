#!/usr/bin/env python3
"""What one HTTP request costs the client: aiohttp as the crawler sets it up, and a bare protocol.

    .venv/bin/python bench/http_cost.py [--requests 20000] [--concurrency 32]

nginx serves one page of the synthetic site's size on loopback. Each client
runs in a process of its own on uvloop and sends the same requests over
keep-alive connections, ``--concurrency`` at a time; the figure is that
process's CPU time per request (and wall time per request: nginx runs on the
other core, so the two are equal when the client is the bottleneck):

- ``aiohttp``: a ``ClientSession`` configured as ``crawler.net.fetch`` configures
  it (no cookie jar, no redirects followed, a total timeout), for GET with the
  body read, HEAD, and a conditional GET answered 304 (a re-crawl's request);
- ``crawler``: the crawler's ``Fetcher`` as a crawl uses it (``fetch_page``,
  ``check``, ``fetch_page`` with an ETag): its own HTTP/1.1 client
  (``crawler.net.http1``) with everything around a request (headers, cookies'
  check, the answer's fields, the body's cap);
- ``bare``: an ``asyncio.Protocol`` writing the request bytes and parsing the
  answer with httptools (llhttp, the parser aiohttp's C extension wraps too).

The bare client is the floor under any request path in Python.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import measure
import serve
from measure import VENV_BIN

PAGE = (
    "<!doctype html><html><head><title>p</title></head><body>"
    + "".join(f'<p><a href="/x{i}.html">link {i}</a></p>' for i in range(50))
    + "</body></html>"
)

AIOHTTP_CLIENT = """
import asyncio, json, sys, time, aiohttp, uvloop
url, mode, n, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
async def main():
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=0, ttl_dns_cache=300)
    async with aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
        timeout=aiohttp.ClientTimeout(total=30), headers={"User-Agent": "crawler-bench"},
    ) as session:
        async with session.get(url) as response:
            etag = response.headers["ETag"]
        todo = iter(range(n))
        async def worker():
            for _ in todo:
                if mode == "get":
                    async with session.get(url, allow_redirects=False) as response:
                        await response.read()
                elif mode == "head":
                    async with session.head(url, allow_redirects=False) as response:
                        pass
                else:
                    headers = {"If-None-Match": etag}
                    async with session.get(url, allow_redirects=False, headers=headers) as r:
                        assert r.status == 304, r.status
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        print(json.dumps([time.process_time() - cpu, time.monotonic() - wall]))
uvloop.run(main())
"""

CRAWLER_CLIENT = """
import asyncio, json, sys, time, uvloop
from crawler.config import CrawlSettings
from crawler.net.fetch import Fetcher
url, mode, n, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
async def main():
    settings = CrawlSettings(max_concurrency=concurrency, user_agent="crawler-bench")
    async with Fetcher(settings) as fetcher:
        etag = (await fetcher.fetch_page(url)).etag
        todo = iter(range(n))
        async def worker():
            for _ in todo:
                if mode == "get":
                    fetched = await fetcher.fetch_page(url)
                    assert fetched.body, fetched
                elif mode == "head":
                    fetched = await fetcher.check(url)
                    assert fetched.status == 200, fetched
                else:
                    fetched = await fetcher.fetch_page(url, etag=etag)
                    assert fetched.status == 304, fetched
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        print(json.dumps([time.process_time() - cpu, time.monotonic() - wall]))
uvloop.run(main())
"""

BARE_CLIENT = """
import asyncio, json, sys, time, uvloop, httptools
host, port, path, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
n, concurrency = int(sys.argv[5]), int(sys.argv[6])
method = b"HEAD" if mode == "head" else b"GET"
class Client(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
    def ask(self, request):
        self.body, self.headers = [], []
        self.parser = httptools.HttpResponseParser(self)
        self.done = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.done
    def on_header(self, name, value):
        self.headers.append((name, value))
    def on_headers_complete(self):
        if method == b"HEAD":  # no body follows, whatever Content-Length says
            self.done.set_result(self.parser.get_status_code())
    def on_body(self, chunk):
        self.body.append(chunk)
    def on_message_complete(self):
        if not self.done.done():
            self.done.set_result(self.parser.get_status_code())
    def data_received(self, data):
        if not self.done.done():
            self.parser.feed_data(data)
def request(extra=b""):
    return (method + b" " + path.encode() + b" HTTP/1.1\\r\\nHost: " + f"{host}:{port}".encode()
            + b"\\r\\nUser-Agent: crawler-bench\\r\\nAccept: */*\\r\\n"
            + b"Accept-Encoding: gzip, deflate\\r\\n" + extra + b"\\r\\n")
async def main():
    loop = asyncio.get_running_loop()
    transport, first = await loop.create_connection(Client, host, port)
    await first.ask(request())
    etag = dict(first.headers)[b"ETag"]
    transport.close()
    extra = b"If-None-Match: " + etag + b"\\r\\n" if mode == "conditional" else b""
    wanted = 304 if mode == "conditional" else 200
    payload = request(extra)
    todo = iter(range(n))
    async def worker():
        transport, client = await loop.create_connection(Client, host, port)
        for _ in todo:
            status = await client.ask(payload)
            assert status == wanted, status
            b"".join(client.body)
        transport.close()
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    print(json.dumps([time.process_time() - cpu, time.monotonic() - wall]))
uvloop.run(main())
"""


def run_client(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    done = subprocess.run(
        [str(VENV_BIN / "python"), "-P", "-c", *argv],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"client failed: {done.stderr.strip()[-2000:]}")
    cpu, wall = json.loads(done.stdout)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="nginx")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="http-cost-") as tmp:
        root = Path(tmp) / "site"
        root.mkdir()
        (root / "p.html").write_text(PAGE, encoding="utf-8")
        with serve.Server([root], kind=args.server) as server:
            origin = server.origins[0]
            host, port = origin.rsplit("//", 1)[1].rsplit(":", 1)
            env = measure.loopback_env()
            n, c = str(args.requests), str(args.concurrency)
            print(f"== {args.requests} requests of a {len(PAGE)}-byte page, {c} at a time, "
                  f"{server.kind} on loopback: client CPU per request")  # fmt: skip
            print(f"  {'request':<12} {'aiohttp us':>11} {'crawler us':>11} {'bare us':>8}"
                  f" {'aiohttp/crawler':>16} {'crawler/bare':>13}")  # fmt: skip
            per = 1e6 / args.requests
            for mode in ("get", "head", "conditional"):
                a_cpu, _ = run_client([AIOHTTP_CLIENT, origin + "/p.html", mode, n, c], env)
                c_cpu, _ = run_client([CRAWLER_CLIENT, origin + "/p.html", mode, n, c], env)
                b_cpu, _ = run_client([BARE_CLIENT, host, port, "/p.html", mode, n, c], env)
                print(
                    f"  {mode:<12} {a_cpu * per:>11.1f} {c_cpu * per:>11.1f} {b_cpu * per:>8.1f}"
                    f" {a_cpu / c_cpu:>15.1f}x {c_cpu / b_cpu:>12.1f}x"
                )
    sys.exit(0)


if __name__ == "__main__":
    main()
