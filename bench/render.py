#!/usr/bin/env python3
"""``--render`` on a synthetic client-rendered site: pages/s and peak RSS at several concurrencies.

    .venv/bin/python bench/render.py [--pages 1000] [--concurrency 1 4 8]

The site (served by this script in a child process, on 127.0.0.1) has
``--pages`` pages; each sends an empty shell and ``/app.js``, which writes the
page's links (three children in a tree, and home) after load. A plain crawl
finds one page. For each concurrency, ``crawler crawl --render`` runs to the
end while this script samples every 0.2 s the resident memory of the crawler
and of every process under it (the browser and its helpers): printed are
pages crawled, wall seconds, pages/s, CPU seconds (user+sys, all processes),
peak RSS of the crawler alone, peak PSS of everything (the browser's
processes share most pages: a sum of their RSS counts them several times),
and the browser's PSS in each fifth of the run (flat when restarts bound
it). One JSON line per run.
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

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
SAMPLE_S = 0.2
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")

APP_JS = """
const n = Number(location.pathname.split('/').pop() || 0);
function add(href) {
  const a = document.createElement('a'); a.href = href; a.textContent = href;
  document.body.appendChild(a);
}
window.addEventListener('load', () => {
  for (const c of [3 * n + 1, 3 * n + 2, 3 * n + 3]) if (c < PAGES) add('/p/' + c);
  add('/p/0');
});
"""


def serve(pages: int, port_file: Path) -> None:
    """The site, until killed (runs in the child process)."""
    from aiohttp import web

    shell = (
        "<!doctype html><html><head><title>app</title>"
        '<script src="/app.js"></script></head><body><main>loading</main></body></html>'
    )

    async def page(request: web.Request) -> web.Response:
        if int(request.match_info["n"]) >= pages:
            raise web.HTTPNotFound()
        return web.Response(text=shell, content_type="text/html")

    async def app_js(_: web.Request) -> web.Response:
        body = f"const PAGES = {pages};\n{APP_JS}"
        return web.Response(text=body, content_type="application/javascript")

    app = web.Application()
    app.router.add_get("/p/{n:\\d+}", page)
    app.router.add_get("/app.js", app_js)

    async def run() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_file.write_text(str(runner.addresses[0][1]))  # noqa: ASYNC240 - once, tiny
        await asyncio.Event().wait()

    asyncio.run(run())


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, pgrp, rss bytes, cpu ticks) of a process, or None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    rss, ticks = int(fields[21]) * PAGE_SIZE, int(fields[11]) + int(fields[12])
    return int(fields[1]), int(fields[2]), rss, ticks


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree(root: int) -> dict[int, tuple[int, int, int, int]]:
    """Every process under ``root`` (by parent, or in a group led by one of them)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            found = _stat(int(entry))
            if found is not None:
                table[int(entry)] = found
    members = {root}
    changed = True
    while changed:
        changed = False
        for pid, (ppid, pgrp, _, _) in table.items():
            if pid not in members and (ppid in members or pgrp in members - {root}):
                members.add(pid)
                changed = True
    return {pid: table[pid] for pid in members if pid in table}


def run_once(base: str, pages: int, concurrency: int, workdir: Path) -> dict[str, object]:
    db = workdir / f"render-{concurrency}.db"
    command = [
        str(PYTHON), "-P", "-m", "crawler.cli", "crawl", f"{base}/p/0", "--db", str(db),
        "--render", "--render-concurrency", str(concurrency), "-n", "-f", "json",
        "--max-retries", "0", "--no-robots",
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak_all = peak_crawler = 0
    cpu: dict[int, int] = {}
    browser: list[tuple[float, int]] = []
    while proc.poll() is None:
        tree = _tree(proc.pid)
        total = sum(_pss(pid) for pid in tree)  # PSS: shared pages counted once
        own = tree.get(proc.pid, (0, 0, 0, 0))[2]
        peak_all, peak_crawler = max(peak_all, total), max(peak_crawler, own)
        for pid, (_, _, _, ticks) in tree.items():
            cpu[pid] = max(cpu.get(pid, 0), ticks)
        browser.append((time.monotonic() - started, total - own))
        time.sleep(SAMPLE_S)
    wall = time.monotonic() - started
    out, _ = proc.communicate()
    report = json.loads(out)
    crawled = report["summary"]["pages"]
    fifths = []
    for i in range(5):
        part = [rss for t, rss in browser if i * wall / 5 <= t < (i + 1) * wall / 5]
        fifths.append(round(max(part) / 2**20) if part else 0)
    return {
        "concurrency": concurrency,
        "pages": crawled,
        "wall_s": round(wall, 1),
        "pages_per_s": round(crawled / wall, 2),
        "cpu_s": round(sum(cpu.values()) / TICKS, 1),
        "peak_rss_crawler_mb": round(peak_crawler / 2**20),
        "peak_pss_all_mb": round(peak_all / 2**20),
        "browser_pss_mb_by_fifth": fifths,
        "exit": proc.returncode,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.pages, args.serve)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-render-") as folder:
        workdir = Path(folder)
        port_file = workdir / "port"
        server = subprocess.Popen(
            [sys.executable, __file__, "--pages", str(args.pages), "--serve", str(port_file)]
        )
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists() or not port_file.read_text():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the site did not start")
                time.sleep(0.05)
            base = f"http://127.0.0.1:{port_file.read_text()}"
            for concurrency in args.concurrency:
                print(json.dumps(run_once(base, args.pages, concurrency, workdir)), flush=True)
        finally:
            server.kill()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
