#!/usr/bin/env python3
"""Our DevTools client against Playwright, side by side on the same client-rendered site.

    .venv/bin/python bench/render_clients.py [--pages 100] [--concurrency 4]
    (Playwright in its own venv: python -m venv bench/.tools/pw &&
     bench/.tools/pw/bin/pip install playwright aiohttp)

Each client renders the same ``--pages`` pages of bench/render.py's site, at
the same concurrency, with the system Chromium, every request of a page
answered by the client's Python side through aiohttp (as ``--render`` does:
Fetch.requestPaused for ours, ``page.route`` for Playwright), settled at
network idle (500 ms, Playwright's ``networkidle``), then the DOM read. The
parent samples every 0.2 s the processes under each run (Python, Playwright's
Node driver, the browser): wall seconds, pages/s, CPU seconds of all
processes, peak PSS of all. One JSON line per client; the runs alternate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import render as site_bench

ROOT = Path(__file__).resolve().parent.parent
PLAYWRIGHT_PYTHON = ROOT / "bench" / ".tools" / "pw" / "bin" / "python"
CHROMIUM = "/usr/bin/chromium"


async def ours(base: str, pages: int, concurrency: int) -> int:
    sys.path.insert(0, str(ROOT))
    from crawler.config import CrawlSettings
    from crawler.net.fetch import Fetcher
    from crawler.net.render.renderer import Renderer, RenderLimits

    limits = RenderLimits(timeout_s=10, concurrency=concurrency, restart_pages=10**6,
                          max_rss_bytes=1 << 40)  # fmt: skip
    links = 0
    async with Fetcher(CrawlSettings(max_concurrency=64)) as fetcher:
        renderer = Renderer(CHROMIUM, "bench", limits)

        async def load(url: str, method: str, headers: dict[str, str]):  # type: ignore[no-untyped-def]
            return await fetcher.fetch_resource(url, method, headers)

        async def one(n: int) -> int:
            url = f"{base}/p/{n}"
            document = await fetcher.fetch_page(url)
            rendered = await renderer.render(url, document, load)
            return (rendered.html or "").count("<a ")

        try:
            links = sum(await asyncio.gather(*(one(n) for n in range(pages))))
        finally:
            await renderer.aclose()
    return links


async def playwright(base: str, pages: int, concurrency: int) -> int:
    import aiohttp
    from playwright.async_api import Route, async_playwright

    slots = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = await browser.new_context()  # one, as ours uses the default one

        async def answer(route: Route) -> None:
            request = route.request
            if request.resource_type in ("image", "media", "font"):
                await route.abort("blockedbyclient")
                return
            async with session.get(request.url, allow_redirects=False) as response:
                body = await response.read()
                headers = {"content-type": response.headers.get("Content-Type", "text/plain")}
                await route.fulfill(status=response.status, headers=headers, body=body)

        async def one(n: int) -> int:
            async with slots:
                page = await context.new_page()
                try:
                    await page.route("**/*", answer)
                    await page.goto(f"{base}/p/{n}", wait_until="networkidle", timeout=10_000)
                    return (await page.content()).count("<a ")
                finally:
                    await page.close()

        try:
            return sum(await asyncio.gather(*(one(n) for n in range(pages))))
        finally:
            await browser.close()


def measure(command: list[str]) -> dict[str, object]:
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    peak = 0
    cpu: dict[int, int] = {}
    while proc.poll() is None:
        tree = site_bench._tree(proc.pid)
        peak = max(peak, sum(site_bench._pss(pid) for pid in tree))
        for pid, (_, _, _, ticks) in tree.items():
            cpu[pid] = max(cpu.get(pid, 0), ticks)
        time.sleep(site_bench.SAMPLE_S)
    wall = time.monotonic() - started
    out, _ = proc.communicate()
    return {
        "links": int((out.strip().splitlines() or ["0"])[-1]),
        "wall_s": round(wall, 1),
        "cpu_s": round(sum(cpu.values()) / site_bench.TICKS, 1),
        "peak_pss_all_mb": round(peak / 2**20),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--client", choices=("ours", "playwright"), help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client is not None:
        run = ours if args.client == "ours" else playwright
        print(asyncio.run(run(args.base, args.pages, args.concurrency)))
        return 0
    port_file = Path(tempfile.gettempdir()) / f"bench-render-clients-{os.getpid()}.port"
    server = subprocess.Popen(
        [sys.executable, site_bench.__file__, "--pages", str(args.pages), "--serve", str(port_file)]
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline:
                raise SystemExit("the site did not start")
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port_file.read_text()}"
        pythons = {"ours": sys.executable, "playwright": str(PLAYWRIGHT_PYTHON)}
        for _ in range(args.rounds):
            for client, python in pythons.items():
                command = [
                    python, __file__, "--client", client, "--base", base,
                    "--pages", str(args.pages), "--concurrency", str(args.concurrency),
                ]  # fmt: skip
                figures = measure(command)
                pages_per_s = round(args.pages / float(figures["wall_s"]), 2)  # type: ignore[arg-type]
                print(json.dumps({"client": client, "pages": args.pages,
                                  "concurrency": args.concurrency, "pages_per_s": pages_per_s,
                                  **figures}), flush=True)  # fmt: skip
    finally:
        server.kill()
        server.wait()
        port_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
