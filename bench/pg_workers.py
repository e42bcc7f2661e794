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

Printed per run: pages/s (pages as the server saw them over wall time) and by
tenth of the pages, peak RSS of the crawler's processes, the time from the
last response to the report, the database's size per page, the bytes written
to disk per page by the crawler's processes (``write_bytes``) and by the
PostgreSQL server (``write_bytes`` of the postmaster's process tree, and the
WAL it generated, from ``pg_stat_wal``: both are the whole server's, so other
databases' traffic during the run counts too), CPU per page of the crawler,
the lease latency at the start (first 10% of the crawl) and at the end (last 10%),
duplicate requests, and the queue table's upkeep: dead tuples of ``url`` (the
most sampled, and at the end), the server's autovacuum setting, how often
autovacuum vacuumed ``url`` and how often the crawler did (it vacuums its
queue tables itself when autovacuum is off: ``crawler.store.postgres.vacuum``).
``--markdown FILE`` writes the table (bench/RESULTS-postgres.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import measure
import pgserver
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
        # Progress from the counters the crawl keeps (results written, rows of url
        # as the statistics count them), not a count of every row of the crawl:
        # at 1,000,000 pages that scan would cost the server more than the lease.
        done, total = await conn.fetchrow(
            "SELECT (SELECT COALESCE(sum(n), 0) FROM crawl_count "
            "        WHERE crawl_id = $1 AND name <> 'page'), "
            "(SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'url')",
            crawl_id,
        )
        done, total = int(done), max(int(total or 0), int(done))
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
        "-P",  # the crawler on PYTHONPATH (bench/compiled.py), not the working directory's
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
        args.log_level,
    ]
    if args.private_server:
        asyncio.run(_admin(args.admin_url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
        asyncio.run(_admin(args.admin_url, "SELECT pg_stat_statements_reset()"))
    server_before = asyncio.run(server_writes(args.admin_url))
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
    server_after = asyncio.run(server_writes(args.admin_url))
    server.stop()  # nginx writes out its access log
    entries = list(server.entries())
    stats = measure.log_stats(entries)
    pages = measure.pages_fetched(entries, origin.removeprefix("http://"))
    summary = json.loads(report.read_text())["summary"] if report.exists() else {}
    upkeep = asyncio.run(_upkeep(url))
    if args.private_server:
        statements = asyncio.run(_statements(args.admin_url, max(pages, 1)))
        (run_dir / f"statements-w{workers}.txt").write_text(statements)
        print(statements, flush=True)
    host = origin.removeprefix("http://")
    db_size = asyncio.run(_db_size(args.admin_url, name))
    if not args.keep_databases:  # at 1,000,000 pages each is several GB
        asyncio.run(_admin(args.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    per_page = max(pages, 1)
    server_written = server_after["proc_write_bytes"] - server_before["proc_write_bytes"]
    wal = server_after["wal_bytes"] - server_before["wal_bytes"]
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
        "pages_per_s_by_tenth": measure.page_rate_by_tenth(entries, host),
        "peak_rss_mb": round(m.peak_rss_bytes / 1e6, 1),
        "last_response_to_exit_s": (
            round(m.exited_at - stats.last_at, 3) if stats.last_at is not None else None
        ),
        "db_bytes_per_page": round(db_size / per_page),
        "crawler_written_per_page": round(m.write_bytes / per_page),
        "server_written_per_page": round(server_written / per_page),
        "server_wal_per_page": round(wal / per_page),
        "crawler_cpu_ms_per_page": round(1000 * m.cpu_s / per_page, 2),
        "server_cpu_ms_per_page": round(
            1000 * (server_after["cpu_s"] - server_before["cpu_s"]) / per_page, 2
        ),
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


def _postmaster_pid(data_directory: str) -> int | None:
    try:
        return int(Path(data_directory, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _tree_cpu_s(root: int) -> float:
    """User + system CPU of a live process tree, its reaped children included."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in measure.tree_pids(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # utime stime cutime cstime: fields 14-17 of stat (11-14 after the name)
        total += sum(int(v) for v in fields[11:15]) / tick
    return total


async def server_writes(admin_url: str) -> dict[str, float]:
    """The server's bytes written so far (its process tree's write_bytes), WAL bytes, CPU.

    Cumulative, for the whole server: other databases count too.
    """
    conn = await asyncpg.connect(admin_url)
    try:
        wal = await conn.fetchval("SELECT wal_bytes FROM pg_stat_wal")
        data_directory = await conn.fetchval("SHOW data_directory")
    finally:
        await conn.close()
    pid = _postmaster_pid(data_directory)
    return {
        "wal_bytes": float(wal or 0),
        "proc_write_bytes": float(measure.tree_write_bytes(pid)) if pid else 0.0,
        "cpu_s": _tree_cpu_s(pid) if pid else 0.0,
    }


async def _statements(admin_url: str, pages: int, top: int = 15) -> str:
    """The server's statements by total time (pg_stat_statements), per page."""
    conn = await asyncpg.connect(admin_url)
    try:
        rows = await conn.fetch(
            "SELECT calls, total_exec_time, rows, wal_bytes, query FROM pg_stat_statements "
            "ORDER BY total_exec_time DESC LIMIT $1",
            top,
        )
        total = await conn.fetchval("SELECT sum(total_exec_time) FROM pg_stat_statements")
    finally:
        await conn.close()
    lines = [f"statements: {total:.0f} ms in all; calls and time per page, WAL bytes per page:"]
    for n, ms, _, wal_bytes, query in rows:
        text = " ".join(query.split())[:110]
        lines.append(
            f"  {n / pages:7.2f} calls {ms / pages:7.3f} ms {int(wal_bytes) / pages:8.0f} B  {text}"
        )
    return "\n".join(lines)


async def _db_size(admin_url: str, name: str) -> int:
    conn = await asyncpg.connect(admin_url)
    try:
        return int(await conn.fetchval("SELECT pg_database_size($1)", name))
    finally:
        await conn.close()


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
        "| workers | pages/s | by tenth | wall s | pages | peak RSS MB | last response -> "
        "exit s | DB bytes/page | written/page: crawler, server (WAL) | CPU ms/page: crawler, "
        "server | duplicate requests | lease ms at start "
        "(median, max) | lease ms at end | buffers start / end | max dead tuples "
        "| dead tuples at end | autovacuums (autovacuum) | crawler's vacuums |",
        "| --- " * 19 + "|",
    ]
    for r in results:
        lines.append(
            f"| {r['workers']} | {r['pages_per_s']} "
            f"| {' '.join(map(str, r['pages_per_s_by_tenth']))} "
            f"| {r['elapsed_s']} | {r['pages']} | {r['peak_rss_mb']} "
            f"| {r['last_response_to_exit_s']} | {r['db_bytes_per_page']} "
            f"| {r['crawler_written_per_page']}, {r['server_written_per_page']} "
            f"({r['server_wal_per_page']}) "
            f"| {r['crawler_cpu_ms_per_page']}, {r['server_cpu_ms_per_page']} "
            f"| {r['duplicate_requests']} | {r['lease_ms_start']} | {r['lease_ms_end']} "
            f"| {r['lease_buffers_start']} / {r['lease_buffers_end']} | {r['max_dead_tuples']} "
            f"| {r.get('dead_tuples_end')} | {r.get('autovacuums_of_url')} "
            f"({r.get('autovacuum')}) | {r.get('crawler_vacuums_of_url')} |"
        )
    return "\n".join(lines) + "\n"


def run_all(
    args: argparse.Namespace, site_dir: Path, run_dir: Path
) -> tuple[list[dict[str, Any]], str]:
    """One crawl per worker count, each on a fresh database and a fresh site server."""
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
        print(
            f"{workers} worker(s): {r['pages_per_s']} pages/s "
            f"(by tenth {r['pages_per_s_by_tenth']}), peak RSS {r['peak_rss_mb']} MB, "
            f"last response -> exit {r['last_response_to_exit_s']} s, "
            f"DB {r['db_bytes_per_page']} B/page; written per page: crawler "
            f"{r['crawler_written_per_page']} B, server {r['server_written_per_page']} B "
            f"(WAL {r['server_wal_per_page']} B); CPU per page: crawler "
            f"{r['crawler_cpu_ms_per_page']} ms, server {r['server_cpu_ms_per_page']} ms",
            flush=True,
        )
    return results, kind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--page-size",
        choices=sorted(sitegen.PAGE_SIZES),
        default="normal",
        help="small: ~3.5 KB pages (for 1,000,000 pages on a 24 GB machine)",
    )
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--concurrency", type=int, default=32, help="per worker")
    parser.add_argument("--host-concurrency", type=int, default=64)
    parser.add_argument(
        "--admin-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="a database on the server where the bench databases are created",
    )
    parser.add_argument(
        "--private-server",
        action="store_true",
        help="run a PostgreSQL server of our own (bench/pgserver.py): its writes and CPU "
        "are the crawl's alone",
    )
    # Each sample costs the server an EXPLAIN ANALYZE of a 256-row lease (rolled
    # back: 256 dead rows) and a count of the crawl's rows: every 0.5 s that was
    # more server time than the crawl's own statements (pg_stat_statements,
    # 10,000 pages), which SQLite's benchmark does not pay.
    parser.add_argument("--probe-every-s", type=float, default=5.0)
    parser.add_argument(
        "--timeout-s",
        type=float,
        help="per crawl; default 1800 s, or 20 ms a page when more (1,000,000 pages: 20,000 s)",
    )
    parser.add_argument(
        "--keep-databases",
        action="store_true",
        help="keep each run's database (dropped once measured by default: disk)",
    )
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument(
        "--log-level",
        default="error",
        help="the crawl's (info: its end, phase by phase, in wN.stderr)",
    )
    parser.add_argument("--markdown", type=Path, help="write the figures as a Markdown table")
    args = parser.parse_args(argv)
    if args.timeout_s is None:
        args.timeout_s = max(1800.0, 0.02 * args.pages)
    measure.install_signal_exit()
    site_dir = measure.SITES / sitegen.site_name(args.pages, args.seed, args.page_size)
    run_dir = OUT / f"pg-n{args.pages}-s{args.seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    sitegen.generate(site_dir, args.pages, args.seed, args.page_size)
    with contextlib.ExitStack() as stack:
        if args.private_server:
            args.admin_url = stack.enter_context(pgserver.private())
        results, kind = run_all(args, site_dir, run_dir)
    table = markdown(results, args, kind)
    print(table)
    if args.markdown is not None:
        args.markdown.write_text(table)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2))
    return 0 if all(r["returncode"] in (0, 2) and not r["timed_out"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
