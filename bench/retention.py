#!/usr/bin/env python3
"""Retention: the space a recurring crawl takes stays flat once ``keep_runs`` is reached.

    .venv/bin/python bench/retention.py [--pages 2000] [--runs 6] [--keep 2] [--db postgresql://…]

An in-process service (SQLite files under a temporary data directory, or the
given PostgreSQL database) crawls a generated loopback site of ``--pages``
pages ``--runs`` times as one definition that keeps ``--keep`` runs; the
schedule's clock is moved by hand, so no run waits. After each run it prints
the runs kept and the space used: the data directory's bytes on SQLite (the
runs of the definition are crawls of one file, ``definitions/<id>.db``; a
retired run's rows are deleted in batches and its pages reused by the next
run), the database's size on
PostgreSQL (deleted rows leave free space in the tables that later runs'
rows reuse once vacuumed).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler.service.app import build_app
from crawler.service.config import ServiceConfig
from crawler.service.state import SERVICE
from crawler.store.sqlite import crawl_delete

HOUR = 3600.0


def site(pages: int) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        i = int(request.match_info.get("i", "0"))
        links = "".join(f'<a href="/p/{(i * 7 + k) % pages}">x</a>' for k in range(1, 6))
        return web.Response(
            text=f"<html><body>{links}<a href='/gone/{i % 10}'>b</a></body></html>",
            content_type="text/html",
        )

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/p/{i}", page)
    return app


def used_bytes(data: Path) -> int:
    return sum(f.stat().st_size for f in data.rglob("*") if f.is_file())


def definition_file(path: Path) -> str:
    """The definition's SQLite file: its size (with its WAL) and its free pages."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    size = sum(f.stat().st_size for f in path.parent.glob(path.name + "*"))
    return f" (definition file {size / 1e6:.2f} MB, of which free {free * page / 1e6:.2f} MB)"


async def pg_bytes(store: object) -> int:
    pool = store._pool  # type: ignore[attr-defined]  # a bench may look inside
    async with pool.acquire() as conn:
        return int(await conn.fetchval("SELECT pg_database_size(current_database())"))


DELETES: list[tuple[int, float]] = []  # (batches, seconds) of each retired run (SQLite)


def timed_deletes() -> None:
    """Record how long each retired run's delete takes, and in how many batches."""
    real = crawl_delete.delete_crawl

    def timed(path: Path, crawl_id: int, batch: int | None = None) -> int:
        started = time.perf_counter()
        batches = real(path, crawl_id, batch)
        DELETES.append((batches, time.perf_counter() - started))
        return batches

    crawl_delete.delete_crawl = timed  # a bench may instrument


async def main(args: argparse.Namespace) -> None:
    timed_deletes()
    server = TestServer(site(args.pages), host="127.0.0.1")
    await server.start_server()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        config = ServiceConfig(data_dir=data, db=args.db, no_token=True, allow_private=True)
        app = build_app(config)
        service = app[SERVICE]
        now = [time.time()]
        service.scheduler.clock = lambda: now[0]
        runner = web.AppRunner(app)
        await runner.setup()
        try:
            scheduler, manager = service.scheduler, service.manager
            spec = {
                "name": "bench",
                "seeds": [str(server.make_url("/"))],
                "keep_runs": args.keep,
                "settings": {"max_retries": 0, "max_concurrency": 16},
                "schedule": {"every": "1h", "timezone": "UTC"},
                "webhook": None,
            }
            definition = await scheduler.create(spec)
            for run in range(1, args.runs + 1):
                if run > 1:
                    now[0] += HOUR
                    await scheduler.tick()
                while scheduler.active_run(definition.id) is not None or manager._hooks:  # noqa: ASYNC110 - polls the service
                    await asyncio.sleep(0.05)
                kept = [e.id for e in manager.runs_of(definition.id)]
                size = used_bytes(data) if args.db is None else await pg_bytes(manager.store)
                if args.db is None and run == args.runs:
                    for f in sorted(data.rglob("*")):
                        if f.is_file():
                            print(f"  {f.relative_to(data)}: {f.stat().st_size} bytes")
                where = "data dir" if args.db is None else "database"
                line = f"run {run}: runs kept {kept}, {where} {size / 1e6:.2f} MB"
                if args.db is None:
                    line += definition_file(data / "definitions" / f"{definition.id}.db")
                for batches, seconds in DELETES:
                    line += f"; retired a run in {batches} batches, {seconds:.2f} s"
                DELETES.clear()
                print(line, flush=True)
        finally:
            await runner.cleanup()
    await server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--keep", type=int, default=2)
    parser.add_argument("--db", default=None)
    asyncio.run(main(parser.parse_args()))
