#!/usr/bin/env python3
"""The non-recursive path: checking one page's links must cost what a plain checker costs.

    .venv/bin/python bench/single_page.py [--links 2000] [--concurrency 32]

Serves one page linking to ``--links`` resources on loopback (aiohttp), then
times, in fresh processes: ``crawler crawl URL --max-depth 0`` (the whole
CLI: start, SQLite, report) and a plain checker, the floor, written here in
twenty lines of aiohttp: GET the page, HEAD every link with the same
concurrency, keep nothing. Prints both wall times, their ratio and peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from aiohttp import web

VENV_BIN = Path(__file__).resolve().parents[1] / ".venv" / "bin"

PLAIN_CHECKER = textwrap.dedent("""
    import asyncio, re, sys, aiohttp
    async def main(url, concurrency):
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as page:
                html = await page.text()
            links = sorted(set(re.findall(r'(?:href|src)="([^"]+)"', html)))
            gate = asyncio.Semaphore(concurrency)
            async def check(link):
                async with gate, session.head(url.rstrip("/") + link) as response:
                    return response.status
            statuses = await asyncio.gather(*(check(link) for link in links))
        print(sum(s >= 400 for s in statuses), "broken of", len(statuses))
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


def serve(links: int) -> tuple[str, threading.Thread, asyncio.AbstractEventLoop]:
    body = (
        "<html><body>"
        + "".join(
            f'<a href="/r/{i}.png">{i}</a>' if i % 2 else f'<img src="/r/{i}.png">'
            for i in range(links)
        )
        + "</body></html>"
    )

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/html")

    async def resource(request: web.Request) -> web.Response:
        number = int(request.match_info["n"])
        return web.Response(status=404 if number % 50 == 0 else 200, body=b"")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_route("*", "/r/{n}.png", resource)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{port}/", thread, loop


def timed(command: list[str]) -> tuple[float, float, str]:
    started = time.monotonic()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    elapsed = time.monotonic() - started
    rss_kb = int(re.findall(r"^(\d+)$", done.stderr, re.M)[-1])
    return elapsed, rss_kb / 1024, done.stdout.strip().splitlines()[0] if done.stdout else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    url, _, loop = serve(args.links)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "plain.py"
        script.write_text(PLAIN_CHECKER)
        db = Path(tmp) / "c.db"
        crawler = [
            str(VENV_BIN / "crawler"),
            "crawl",
            url,
            "--max-depth",
            "0",
            "--db",
            str(db),
            "-n",
            "--no-robots",
            "--max-retries",
            "0",
            "--max-concurrency",
            str(args.concurrency),
            "--host-concurrency",
            str(args.concurrency),
        ]
        plain = [sys.executable, str(script), url, str(args.concurrency)]
        crawl_s, crawl_mb, crawl_out = timed(crawler)
        plain_s, plain_mb, plain_out = timed(plain)
    loop.call_soon_threadsafe(loop.stop)
    print(f"links on the page        {args.links}")
    print(f"crawler --max-depth 0    {crawl_s:.2f} s, {crawl_mb:.0f} MB  ({crawl_out[:60]})")
    print(f"plain aiohttp checker    {plain_s:.2f} s, {plain_mb:.0f} MB  ({plain_out})")
    print(f"ratio                    {crawl_s / plain_s:.2f}x time")
    os._exit(0)  # the server thread's loop is left running; nothing to clean


if __name__ == "__main__":
    raise SystemExit(main())
