#!/usr/bin/env python3
"""The non-recursive path: checking one page's links must cost what a plain checker costs.

    .venv/bin/python bench/single_page.py [--links 2000] [--concurrency 32] [--repeat 3]

Writes one page linking to ``--links`` pages of the same site (one in 50
missing: 404), serves it on loopback (nginx, else the Python server of
``serve.py``), then runs, in fresh processes, ``--repeat`` rounds of each
tool once (so a change of the machine's load falls on all alike), the median
reported (``--crawler-python PY`` adds another checkout's crawler):

- ``crawler crawl URL --max-depth 0``: the whole CLI (start-up, SQLite,
  report), with ``--max-concurrency N --host-concurrency N``;
- lychee (``bench/.tools/lychee-venv``, installed by ``bench/compare.py``)
  given the page's URL, with ``--max-concurrency N --host-concurrency N
  --host-request-interval 0ms``;
- a plain checker, the floor, twenty lines of aiohttp: GET the page, HEAD
  every link with the same concurrency, keep nothing.

Prints wall time, CPU time (user + system, with the children waited for),
peak RSS summed over the process tree, and each figure as a ratio to lychee's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import compare
import measure
import serve
from measure import VENV_BIN, log

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
MISSING_EVERY = 50


@dataclass(slots=True)
class Figures:
    tool: str
    wall_s: float
    cpu_s: float
    rss_mb: float
    exit: int | None


def write_site(root: Path, links: int) -> int:
    """The page and its targets; returns how many links are broken."""
    (root / "p").mkdir(parents=True)
    anchors = "".join(f'<li><a href="/p/{i}.html">page {i}</a></li>' for i in range(links))
    (root / "index.html").write_text(f"<!DOCTYPE html><html><body><ul>{anchors}</ul></body></html>")
    for i in range(links):
        if i % MISSING_EVERY:
            (root / "p" / f"{i}.html").write_text(f"<!DOCTYPE html><title>{i}</title><p>{i}")
    return len(range(0, links, MISSING_EVERY))


def run_once(tool: str, cmd: list[str], work: Path) -> Figures:
    m = measure.run_measured(
        cmd,
        timeout_s=300,
        stdout=work / f"{tool}.stdout",
        stderr=work / f"{tool}.stderr",
        env=measure.loopback_env(),
        cwd=work,
    )
    return Figures(tool, m.wall_s, m.cpu_s, m.peak_rss_bytes / 1e6, m.returncode)


def median(runs: list[Figures]) -> Figures:
    return Figures(
        runs[0].tool,
        statistics.median(r.wall_s for r in runs),
        statistics.median(r.cpu_s for r in runs),
        statistics.median(r.rss_mb for r in runs),
        runs[-1].exit,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument(
        "--crawler-python",
        help="also run PYTHON -m crawler.cli (another checkout's, for before/after)",
    )
    args = parser.parse_args(argv)
    measure.install_signal_exit()
    measure.compile_package()
    lychee_problem = compare.install_lychee()
    if lychee_problem:
        log(f"lychee skipped: {lychee_problem}")
    n = str(args.concurrency)
    with tempfile.TemporaryDirectory(prefix="single-page-") as tmp:
        work = Path(tmp)
        broken = write_site(work / "site", args.links)
        script = work / "plain.py"
        script.write_text(PLAIN_CHECKER)
        with serve.Server([work / "site"], kind=args.server, workdir=work / "server") as server:
            url = server.origins[0] + "/"
            db = work / "c.db"
            commands = {
                "crawler": [
                    str(VENV_BIN / "crawler"), "crawl", url, "--max-depth", "0", "--db", str(db),
                    "-n", "--no-robots", "--max-retries", "0",
                    "--max-concurrency", n, "--host-concurrency", n,
                ],
                "lychee": compare.lychee_args([url], args.concurrency),
                "plain aiohttp": [str(VENV_BIN / "python"), str(script), url, n],
            }  # fmt: skip
            if lychee_problem:
                del commands["lychee"]
            if args.crawler_python:  # another checkout's crawler, in the same rounds
                commands["crawler (other)"] = [
                    args.crawler_python, "-P", "-m", "crawler.cli", *commands["crawler"][1:]
                ]  # fmt: skip
            # Round by round, every tool once per round: a change of the machine's
            # load falls on all of them alike, so their ratios hold.
            runs: dict[str, list[Figures]] = {tool: [] for tool in commands}
            for _ in range(args.repeat):
                for tool, cmd in commands.items():
                    db.unlink(missing_ok=True)
                    runs[tool].append(run_once(tool, cmd, work))
            results = [median(r) for r in runs.values()]
    lychee = next((r for r in results if r.tool == "lychee"), None)
    print(
        f"\n== one page, {args.links} links to pages of the same site ({broken} broken), "
        f"concurrency {args.concurrency}, server {server.kind}, median of {args.repeat} rounds"
    )
    print(
        f"  {'tool':<15}{'wall s':>8}{'CPU s':>8}{'RSS MB':>8}{'exit':>6}"
        "  vs lychee: time, CPU, RSS"
    )
    for r in results:
        ratios = (
            f"{r.wall_s / lychee.wall_s:.2f}x, {r.cpu_s / lychee.cpu_s:.2f}x, "
            f"{r.rss_mb / lychee.rss_mb:.2f}x"
            if lychee and lychee.wall_s and lychee.cpu_s
            else "-"
        )
        print(
            f"  {r.tool:<15}{r.wall_s:>8.2f}{r.cpu_s:>8.2f}{r.rss_mb:>8.1f}{r.exit!s:>6}  {ratios}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
