#!/usr/bin/env python3
"""Real latency: the crawler against a site whose every response takes 50 ms.

    .venv/bin/python bench/latency.py [--pages 2000] [--delay-ms 50] [--concurrency 8,64]

nginx serves the synthetic site on loopback; between it and the crawler sits a
delaying proxy, also on loopback, made and removed by this script: a TCP
relay (asyncio, in a thread of this process) that holds each response until
``--delay-ms`` after the request that asked for it arrived, as a distant
server would. For each ``--host-concurrency`` C (``--max-concurrency`` C too)
the bound is C / delay requests per second: C requests in flight, each taking
the delay. The figures are the server's: requests/s and pages/s between the
first and the last request in nginx's access log, against that bound (target:
90% of it), then the whole run's wall time, start-up and exit included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import measure
import serve
import sitegen
from measure import OUT, log
from run import crawler_command

READ_CHUNK = 64 * 1024
# The set-up's floor: a minimal aiohttp client sending the same number of
# requests through the same proxy with the same concurrency, nothing else.
FLOOR_CLIENT = """
import asyncio, sys, time, aiohttp, uvloop
async def main(origin, paths, concurrency):
    todo = list(reversed(paths))
    async with aiohttp.ClientSession() as session:
        async def worker():
            while todo:
                async with session.head(origin + todo.pop(), allow_redirects=False) as r:
                    await r.read()
        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        print(len(paths) / (time.monotonic() - started))
paths = sys.stdin.read().split()
uvloop.run(main(sys.argv[1], paths, int(sys.argv[2])))
"""


class DelayProxy:
    """A TCP relay on 127.0.0.1 whose responses arrive ``delay_s`` after their request.

    It runs in a process of its own (``latency.py --proxy``, on uvloop when
    installed): in a thread of this one it would wait for the GIL behind the
    sampler, adding its own latency to the delay.
    """

    def __init__(self, upstream: tuple[str, int], delay_s: float) -> None:
        self.upstream = upstream
        self.delay_s = delay_s
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> DelayProxy:
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "--proxy", f"{self.upstream[0]}:{self.upstream[1]}",
             "--delay-ms", str(self.delay_s * 1000)],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self._proc.stdout is not None
        self.port = int(self._proc.stdout.readline())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)

    def cpu_s(self) -> float:
        """The proxy's CPU time so far (user + system)."""
        assert self._proc is not None
        fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"


async def serve_proxy(upstream: tuple[str, int], delay_s: float) -> None:
    """Relay 127.0.0.1:<free port> to ``upstream``, each response ``delay_s`` late."""

    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*upstream)
        except OSError:
            client_w.close()
            return
        asked_at = [0.0]  # when the request being answered arrived (HTTP/1.1: no pipelining)

        async def requests() -> None:
            while chunk := await client_r.read(READ_CHUNK):
                asked_at[0] = time.monotonic()
                up_w.write(chunk)
                await up_w.drain()
            up_w.write_eof()

        async def responses() -> None:
            while chunk := await up_r.read(READ_CHUNK):
                wait = asked_at[0] + delay_s - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                client_w.write(chunk)
                await client_w.drain()
            client_w.close()

        tasks = [asyncio.create_task(requests()), asyncio.create_task(responses())]
        try:
            await asyncio.gather(*tasks)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            up_w.close()
            client_w.close()

    server = await asyncio.start_server(relay, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def run_proxy(upstream: str, delay_ms: float) -> int:
    host, _, port = upstream.rpartition(":")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve_proxy((host, int(port)), delay_ms / 1000))
    return 0


def measure_one(
    site_dir: Path, run_dir: Path, concurrency: int, delay_s: float, args: argparse.Namespace
) -> dict[str, object]:
    work = run_dir / f"c{concurrency}"
    work.mkdir(parents=True)
    with serve.Server(
        [site_dir / "site", site_dir / "ext"], kind=args.server, workdir=work / "server"
    ) as server:
        upstream_addr, upstream_port = server.addresses[0]
        with DelayProxy((upstream_addr, upstream_port), delay_s) as proxy:
            db = work / "crawl.db"
            cmd = crawler_command(
                proxy.origin + "/",
                db,
                work / "report.json",
                concurrency,
                args.crawler_arg,
                args.crawler_python,
            )
            log(f"crawling via the proxy: C={concurrency}, delay {delay_s * 1000:.0f} ms")
            m = measure.run_measured(
                cmd,
                timeout_s=args.timeout_s,
                stdout=work / "crawler.stdout",
                stderr=work / "crawler.stderr",
                env=measure.loopback_env(),
                cwd=work,  # `python -m` puts its cwd first: not this checkout's crawler
            )
            proxy_cpu = proxy.cpu_s()
            floor_started = time.time()  # the floor's requests are not the crawl's
            floor = (
                0.0
                if args.no_floor
                else floor_rate(proxy.origin, concurrency, requests=2 * args.pages)
            )
        server.stop()
        entries = [e for e in server.entries() if e.at < floor_started]
    host = f"{upstream_addr}:{upstream_port}"
    main = [e for e in entries if e.host == host]
    stats = measure.log_stats(main)
    pages = measure.pages_fetched(entries, host)
    span = (stats.last_at or 0.0) - (stats.first_at or 0.0)
    bound = concurrency / delay_s
    req_rate = stats.requests / span if span > 0 else 0.0
    return {
        "concurrency": concurrency,
        "delay_ms": round(delay_s * 1000),
        "returncode": m.returncode,
        "pages": pages,
        "requests": stats.requests,
        "duplicates": stats.duplicate_requests,
        "span_s": round(span, 2),
        "wall_s": round(m.wall_s, 2),
        "cpu_s": m.cpu_s,
        "bound_requests_per_s": round(bound, 1),
        "requests_per_s": round(req_rate, 1),
        "of_bound": round(req_rate / bound, 3),
        "pages_per_s": round(pages / span, 1) if span > 0 else 0.0,
        "pages_per_s_wall": round(pages / m.wall_s, 1) if m.wall_s else 0.0,
        "bound_pages_per_s": round(bound * pages / stats.requests, 1) if stats.requests else 0.0,
        "proxy_cpu_s": round(proxy_cpu, 2),
        "floor_requests_per_s": round(floor, 1),
        "of_floor": round(req_rate / floor, 3) if floor else None,
        "requests_per_s_by_tenth": _rate_by_tenth([e.at for e in main]),
        "peak_rss_mb": round(m.peak_rss_bytes / 1e6, 1),
    }


def floor_rate(origin: str, concurrency: int, *, requests: int) -> float:
    """Requests/s of a minimal aiohttp client through the proxy (the set-up's own limit)."""
    paths = [sitegen.page_path(i % max(requests // 2, 1)) for i in range(requests)]
    done = subprocess.run(
        [sys.executable, "-c", FLOOR_CLIENT, origin, str(concurrency)],
        input="\n".join(paths),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=measure.loopback_env(),
    )
    try:
        return float(done.stdout.strip())
    except ValueError:
        log(f"floor client failed: {done.stderr.strip()[-300:]}")
        return 0.0


def _rate_by_tenth(times: list[float]) -> list[int]:
    """Requests/s over each tenth of the requests: the start (one page known) is slower."""
    times.sort()
    if len(times) < 20:
        return []
    rates = []
    for k in range(10):
        start, end = k * len(times) // 10, (k + 1) * len(times) // 10 - 1
        span = times[end] - times[start]
        rates.append(round((end - start) / span) if span > 0 else 0)
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", default="8,64", help="comma-separated host concurrencies")
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the crawl databases and logs")
    parser.add_argument("--crawler-arg", action="append", default=[], help="extra crawler flag")
    parser.add_argument(
        "--crawler-python",
        help="run the crawler as PYTHON -m crawler.cli (another checkout's, for before/after)",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the bare client's run")
    parser.add_argument("--proxy", metavar="HOST:PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.proxy:  # the delaying proxy's own process (DelayProxy)
        return run_proxy(args.proxy, args.delay_ms)
    measure.install_signal_exit()
    site_dir = measure.SITES / sitegen.site_name(args.pages, args.seed)
    sitegen.generate(site_dir, args.pages, args.seed)
    run_dir = OUT / f"latency-n{args.pages}-{os.getpid()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    rows = []
    try:
        for c in (int(x) for x in args.concurrency.split(",")):
            rows.append(measure_one(site_dir, run_dir, c, args.delay_ms / 1000, args))
    except KeyboardInterrupt:
        return 130
    finally:
        if args.keep:
            log(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    print(f"\n== {args.pages} pages, every response {args.delay_ms:.0f} ms late (delaying proxy)")
    print(
        f"  {'C':>4}{'bound req/s':>13}{'req/s':>9}{'of bound':>10}{'pages/s':>9}"
        f"{'page bound':>12}{'wall s':>8}{'CPU s':>7}{'requests':>10}{'dup':>5}"
    )
    for r in rows:
        print(
            f"  {r['concurrency']:>4}{r['bound_requests_per_s']:>13}{r['requests_per_s']:>9}"
            f"{r['of_bound']:>10.0%}{r['pages_per_s']:>9}{r['bound_pages_per_s']:>12}"
            f"{r['wall_s']:>8}{r['cpu_s']:>7}{r['requests']:>10}{r['duplicates']:>5}"
        )
        print(
            f"      req/s by tenth: {r['requests_per_s_by_tenth']}; proxy CPU {r['proxy_cpu_s']} s"
        )
        print(
            f"      floor (a bare aiohttp client, same proxy, same C): {r['floor_requests_per_s']}"
            f" req/s; the crawler at {r['of_floor'] or 0:.0%} of it"
        )
    print(
        "  req/s and pages/s between the server's first and last request; bound: C / delay\n"
        "  requests/s (pages: the same times pages per request); target: 90% of the bound"
    )
    measure.append_result(
        {"bench": "latency", "n": args.pages, "rows": rows, "rev": measure.git_rev(),
         "crawler_python": args.crawler_python,
         "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
