"""The store's one writer thread against aiosqlite, on the frontier's write pattern.

Why the SQLite store runs each call on a thread of its own instead of using
aiosqlite: a page's completion is many small statements (its children's
upserts with RETURNING, its edges, its row, its result). aiosqlite sends each
awaited statement to its connection's thread and back; the store sends a whole
group commit there once. Both sides here run the same statements on the same
schema, in the same transactions (one per batch of pages); only the number of
thread hops differs. A ticker on the event loop records how late it wakes: the
loop's lag is what a crawl's fetches would feel.

    .venv/bin/python bench/writer_thread.py [--pages 5000] [--links 50] [--batch 128]

aiosqlite is installed into bench/.tools/aiosqlite when missing (a bench-only
dependency, like LinkChecker for bench/compare.py).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent / ".tools" / "aiosqlite"

SCHEMA = """
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE url (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, depth INTEGER NOT NULL,
                  state INTEGER NOT NULL DEFAULT 0);
CREATE TABLE link (target_id INTEGER NOT NULL, source_id INTEGER NOT NULL,
                   PRIMARY KEY (target_id, source_id)) WITHOUT ROWID;
CREATE TABLE result (url_id INTEGER PRIMARY KEY, status INTEGER, checked_at REAL);
"""
UPSERT = (
    "INSERT INTO url (url, depth) VALUES (?, ?) ON CONFLICT (url) DO UPDATE "
    "SET depth = MIN(depth, excluded.depth) RETURNING id"
)
EDGE = "INSERT OR IGNORE INTO link (target_id, source_id) VALUES (?, ?)"
DONE = "UPDATE url SET state = 2 WHERE id = ?"
RESULT = "INSERT OR REPLACE INTO result (url_id, status, checked_at) VALUES (?, ?, ?)"

Page = tuple[int, list[str]]  # (url id, its links)


def workload(pages: int, links: int, seed: int) -> list[Page]:
    """Pages whose links repeat as a site's do: a few navigation links, the rest spread out."""
    rng = random.Random(seed)
    nav = [f"http://site.test/nav{i}" for i in range(10)]
    return [
        (n + 1, nav + [f"http://site.test/p{rng.randrange(pages * 4)}" for _ in range(links - 10)])
        for n in range(pages)
    ]


def open_db(path: Path, pages: int, *, same_thread: bool = True) -> sqlite3.Connection:
    """The schema, with the pages' own rows (leased, as the crawl holds them)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=same_thread)
    conn.executescript(SCHEMA)
    conn.executemany(
        "INSERT INTO url (id, url, depth, state) VALUES (?, ?, 0, 1)",
        [(n, f"http://site.test/page{n}") for n in range(1, pages + 1)],
    )
    return conn


def complete_batch(conn: sqlite3.Connection, batch: list[Page]) -> None:
    """One group commit, on the writer thread: every statement without a hop."""
    conn.execute("BEGIN IMMEDIATE")
    for page_id, links in batch:
        for link in links:
            (target,) = conn.execute(UPSERT, (link, 1)).fetchone()
            conn.execute(EDGE, (target, page_id))
        conn.execute(DONE, (page_id,))
        conn.execute(RESULT, (page_id, 200, time.time()))
    conn.execute("COMMIT")


async def run_writer_thread(path: Path, batches: list[list[Page]]) -> None:
    conn = open_db(path, sum(len(b) for b in batches), same_thread=False)
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="writer")
    loop = asyncio.get_running_loop()
    try:
        for batch in batches:
            await loop.run_in_executor(pool, complete_batch, conn, batch)
    finally:
        pool.shutdown()
        conn.close()


async def run_aiosqlite(path: Path, batches: list[list[Page]]) -> None:
    import aiosqlite  # type: ignore[import-not-found]  # a bench-local install

    open_db(path, sum(len(b) for b in batches)).close()
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        for batch in batches:
            await conn.execute("BEGIN IMMEDIATE")
            for page_id, links in batch:
                for link in links:
                    async with conn.execute(UPSERT, (link, 1)) as cursor:
                        (target,) = await cursor.fetchone()
                    await conn.execute(EDGE, (target, page_id))
                await conn.execute(DONE, (page_id,))
                await conn.execute(RESULT, (page_id, 200, time.time()))
            await conn.execute("COMMIT")


async def measure(
    runner: Callable[[Path, list[list[Page]]], Awaitable[None]],
    path: Path,
    batches: list[list[Page]],
) -> dict[str, float]:
    """Wall time, and how late a 10 ms ticker on the loop woke at worst and on average."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            due = time.perf_counter() + 0.01
            await asyncio.sleep(0.01)
            lags.append(max(time.perf_counter() - due, 0.0))

    tick = asyncio.create_task(ticker())
    cpu0, started = time.process_time(), time.perf_counter()
    await runner(path, batches)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    stop.set()
    await tick
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "lag_max_ms": max(lags, default=0.0) * 1000,
        "lag_mean_ms": sum(lags) / max(len(lags), 1) * 1000,
    }


def ensure_aiosqlite() -> None:
    sys.path.insert(0, str(TOOLS))
    try:
        import aiosqlite  # noqa: F401
    except ImportError:
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(TOOLS)]
        subprocess.run([*pip, "aiosqlite"], check=True)
        importlib.invalidate_caches()  # the folder did not exist when first looked in


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--links", type=int, default=50)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    ensure_aiosqlite()
    import aiosqlite

    pages = workload(args.pages, args.links, seed=1)
    batches = [pages[i : i + args.batch] for i in range(0, len(pages), args.batch)]
    statements = args.pages * (2 * args.links + 2)
    print(
        f"{args.pages} pages x {args.links} links, {statements:,} statements, "
        f"group commits of {args.batch} pages; aiosqlite {aiosqlite.__version__}"
    )
    runners: dict[str, Callable[[Path, list[list[Page]]], Awaitable[None]]] = {
        "writer thread": run_writer_thread,
        "aiosqlite": run_aiosqlite,
    }
    for round_no in range(args.rounds):
        for name, runner in runners.items():
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "w.db"
                figures: dict[str, Any] = asyncio.run(measure(runner, path, batches))
            print(
                f"round {round_no + 1}  {name:<13} {figures['wall_s']:6.2f} s wall  "
                f"{args.pages / figures['wall_s']:8,.0f} pages/s  "
                f"{figures['cpu_s']:6.2f} s CPU  loop lag max {figures['lag_max_ms']:6.1f} ms "
                f"mean {figures['lag_mean_ms']:5.2f} ms"
            )


if __name__ == "__main__":
    main()
