"""Benchmark: one PostgreSQL crawl with 1, 2 and 4 worker processes, and the lease query.

    .venv/bin/python bench/pg_workers.py --pages 10000              # 1, 2, 4 workers
    .venv/bin/python bench/pg_workers.py --pages 100000 --workers 4

For each worker count the synthetic site (bench/sitegen.py) is served by nginx
(bench/serve.py), a fresh database is created on the server named by
``--admin-url``, and ``crawler crawl --db postgresql://… --workers N`` runs to
the end (the main process plus N-1 ``crawler work`` processes). Meanwhile a
probe samples, every ``--probe-every-s``:

- the lease statement itself (``crawler.store.postgres.frontier._LEASE``, a
  batch of 256) under ``EXPLAIN (ANALYZE, BUFFERS)`` in a transaction that is
  rolled back, so it leases nothing: its execution time, buffers touched;
- the crawl's progress (rows done / rows) and ``n_dead_tup`` of ``url``.

Printed per run: pages/s (pages as the server saw them over wall time), the
lease latency at the start (first 10% of the crawl) and at the end (last 10%),
duplicate requests, and the queue table's upkeep: dead tuples of ``url`` (the
most sampled, and at the end), the server's autovacuum setting, how often
autovacuum vacuumed ``url`` and how often the crawler did (it vacuums its
queue tables itself when autovacuum is off: ``crawler.store.postgres.vacuum``).
``--markdown FILE`` writes the table (bench/RESULTS-postgres.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import measure
import serve
import sitegen
from measure import OUT, log

sys.path.insert(0, str(measure.ROOT))
from crawler.store.postgres.frontier import _LEASE, LEASE_PLAN

LEASE_BATCH = 256
START_FRACTION = 0.10
END_FRACTION = 0.90


@dataclass
class Sample:
    at: float
    done: int
    total: int
    lease_ms: float
    buffers: int
    dead_tuples: int


@dataclass
class Probe:
    """Samples the lease query and the table while a crawl runs."""

    url: str
    every_s: float
    samples: list[Sample] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    error: str | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._loop())
        except Exception as exc:  # the crawl goes on; the figures say what is missing
            self.error = repr(exc)

    async def _loop(self) -> None:
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = await asyncpg.connect(self.url)
                sample = await self._sample(conn)
                if sample is not None:
                    self.samples.append(sample)
            except (asyncpg.UndefinedTableError, asyncpg.InvalidCatalogNameError, OSError):
                pass  # not created yet
            await asyncio.sleep(self.every_s)
        if conn is not None:
            await conn.close()

    async def _sample(self, conn: Any) -> Sample | None:
        crawl_id = await conn.fetchval("SELECT max(id) FROM crawl")
        if crawl_id is None:
            return None
        done, total = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE state = 2), count(*) FROM url WHERE crawl_id = $1",
            crawl_id,
        )
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute(LEASE_PLAN)
            plan = await conn.fetchval(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + _LEASE,
                crawl_id,
                time.time(),
                LEASE_BATCH,
                "bench-probe",
                time.time() + 60,
            )
        finally:
            await tx.rollback()
        top = json.loads(plan)[0]
        dead = await conn.fetchval(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'url'"
        )
        buffers = top["Plan"].get("Shared Hit Blocks", 0) + top["Plan"].get("Shared Read Blocks", 0)
        return Sample(time.monotonic(), done, total, top["Execution Time"], buffers, dead or 0)


async def _admin(admin_url: str, sql: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def phase(samples: list[Sample], lo: float, hi: float) -> list[Sample]:
    return [s for s in samples if s.total and lo <= s.done / s.total <= hi]


def ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} (max {max(values):.2f})"


def run_one(
    args: argparse.Namespace, workers: int, origin: str, server: serve.Server, run_dir: Path
) -> dict[str, Any]:
    name = f"crawler_bench_w{workers}"
    asyncio.run(_admin(args.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    asyncio.run(_admin(args.admin_url, f"CREATE DATABASE {name} TEMPLATE template0"))
    url = args.admin_url.rsplit("/", 1)[0] + "/" + name
    report = run_dir / f"report-w{workers}.json"
    cmd = [
        sys.executable,
        "-m",
        "crawler.cli",
        "crawl",
        origin + "/",
        "--db",
        url,
        "-n",
        "-f",
        "json",
        "-o",
        str(report),
        "--workers",
        str(workers),
        "--max-concurrency",
        str(args.concurrency),
        "--host-concurrency",
        str(args.host_concurrency),
        "--log-level",
        "error",
    ]
    probe = Probe(url, args.probe_every_s)
    thread = threading.Thread(target=probe.run, daemon=True)
    thread.start()
    log(f"{workers} worker(s): crawling {origin}/")
    m = measure.run_measured(
        cmd,
        timeout_s=args.timeout_s,
        stdout=run_dir / f"w{workers}.stdout",
        stderr=run_dir / f"w{workers}.stderr",
        watch_file=None,
        env=measure.loopback_env(),
    )
    probe.stop.set()
    thread.join(30)
    server.stop()  # nginx writes out its access log
    entries = list(server.entries())
    stats = measure.log_stats(entries)
    pages = measure.pages_fetched(entries, origin.removeprefix("http://"))
    summary = json.loads(report.read_text())["summary"] if report.exists() else {}
    upkeep = asyncio.run(_upkeep(url))
    start, end = phase(probe.samples, 0, START_FRACTION), phase(probe.samples, END_FRACTION, 1)
    return {
        "workers": workers,
        "returncode": m.returncode,
        "timed_out": m.timed_out,
        "pages": pages,
        "crawler_pages": summary.get("pages"),
        "broken": summary.get("broken"),
        "elapsed_s": round(m.wall_s, 1),
        "pages_per_s": round(pages / m.wall_s, 1) if m.wall_s else 0.0,
        "requests": stats.requests,
        "duplicate_requests": stats.duplicate_requests,
        "lease_ms_start": ms([s.lease_ms for s in start]),
        "lease_ms_end": ms([s.lease_ms for s in end]),
        "lease_buffers_start": max((s.buffers for s in start), default=None),
        "lease_buffers_end": max((s.buffers for s in end), default=None),
        "max_dead_tuples": max((s.dead_tuples for s in probe.samples), default=None),
        **upkeep,
        "samples": len(probe.samples),
        "probe_error": probe.error,
    }


async def _upkeep(url: str) -> dict[str, Any]:
    """The queue table's dead tuples and vacuums at the end of a run."""
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT n_dead_tup, n_live_tup, autovacuum_count, vacuum_count "
            "FROM pg_stat_user_tables WHERE relname = 'url'"
        )
        autovacuum = await conn.fetchval("SELECT current_setting('autovacuum')")
    finally:
        await conn.close()
    if row is None:
        return {"autovacuum": autovacuum}
    return {
        "autovacuum": autovacuum,
        "dead_tuples_end": int(row[0]),
        "live_tuples_end": int(row[1]),
        "autovacuums_of_url": int(row[2]),
        "crawler_vacuums_of_url": int(row[3]),
    }


def markdown(results: list[dict[str, Any]], args: argparse.Namespace, kind: str) -> str:
    lines = [
        f"## PostgreSQL: {args.pages:,} pages, 1 host, workers x {args.concurrency} "
        f"concurrent requests, host concurrency {args.host_concurrency} ({kind} server)",
        "",
        "| workers | pages/s | wall s | pages | duplicate requests | lease ms at start "
        "(median, max) | lease ms at end | buffers start / end | max dead tuples "
        "| dead tuples at end | autovacuums (autovacuum) | crawler's vacuums |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['workers']} | {r['pages_per_s']} | {r['elapsed_s']} | {r['pages']} "
            f"| {r['duplicate_requests']} | {r['lease_ms_start']} | {r['lease_ms_end']} "
            f"| {r['lease_buffers_start']} / {r['lease_buffers_end']} | {r['max_dead_tuples']} "
            f"| {r.get('dead_tuples_end')} | {r.get('autovacuums_of_url')} "
            f"({r.get('autovacuum')}) | {r.get('crawler_vacuums_of_url')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--concurrency", type=int, default=32, help="per worker")
    parser.add_argument("--host-concurrency", type=int, default=64)
    parser.add_argument(
        "--admin-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="a database on the server where the bench databases are created",
    )
    parser.add_argument("--probe-every-s", type=float, default=0.5)
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument("--markdown", type=Path, help="write the figures as a Markdown table")
    args = parser.parse_args(argv)
    measure.install_signal_exit()
    site_dir = OUT / f"site-n{args.pages}-s{args.seed}"
    run_dir = OUT / f"pg-n{args.pages}-s{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    sitegen.generate(site_dir, args.pages, args.seed)
    results = []
    kind = ""
    for workers in (int(w) for w in args.workers.split(",")):
        with serve.Server(
            [site_dir / "site", site_dir / "ext"], kind=args.server, workdir=run_dir / "server"
        ) as server:
            origin, ext_origin = server.origins
            sitegen.set_ext_origin(site_dir, ext_origin)
            results.append(run_one(args, workers, origin, server, run_dir))
            kind = server.kind
        print(json.dumps(results[-1], indent=2), flush=True)
        r = results[-1]
        print(
            f"{workers} worker(s): url dead tuples max {r['max_dead_tuples']}, "
            f"at end {r.get('dead_tuples_end')}; autovacuum {r.get('autovacuum')}: "
            f"{r.get('autovacuums_of_url')} autovacuum(s), "
            f"{r.get('crawler_vacuums_of_url')} vacuum(s) by the crawler",
            flush=True,
        )
    table = markdown(results, args, kind)
    print(table)
    if args.markdown is not None:
        args.markdown.write_text(table)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2))
    return 0 if all(r["returncode"] in (0, 2) and not r["timed_out"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
