"""Benchmark: open links inserted by target as they come, or appended then merged sorted.

    .venv/bin/python bench/pg_linkpaths.py --preload 2000000 --links 200000

On a scratch database of the server named by ``--admin-url``: a table keyed
as ``link_open`` (and its two other indexes) is filled with ``--preload``
links, then ``--links`` more with random targets are written in
transactions of ``--batch`` (as completions write them), either straight
into it (``direct``: the layout before migration 0017) or appended to an
unindexed table and moved in one sorted ``INSERT … SELECT`` (``merge``: the
layout since, as ``crawler.store.postgres.links`` does it). A ``CHECKPOINT``
comes before each pass, so both pay their full-page images. Printed per
pass: server time and WAL bytes per link.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

import asyncpg

_COLUMNS = (
    "target_id bigint NOT NULL, source_id bigint NOT NULL, fragment text NOT NULL DEFAULT '', "
    "element text NOT NULL, line int, col int"
)
_INSERT = (
    "INSERT INTO {table} (target_id, source_id, fragment, element, line, col) "
    "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::int[], "
    "$6::int[]) {conflict}"
)
_MERGE = (
    "WITH moved AS (DELETE FROM lf RETURNING *) INSERT INTO lo SELECT * FROM moved "
    "ORDER BY target_id, source_id, fragment ON CONFLICT DO NOTHING"
)


async def _setup(conn: Any, preload: int) -> None:
    key = "PRIMARY KEY (target_id, source_id, fragment)"
    await conn.execute(f"CREATE TABLE lo ({_COLUMNS}, {key})")
    await conn.execute("CREATE INDEX lo_source ON lo (source_id)")
    await conn.execute("CREATE INDEX lo_fragment ON lo (target_id) WHERE fragment <> ''")
    await conn.execute(f"CREATE TABLE lf ({_COLUMNS})")
    await conn.execute(
        "INSERT INTO lo SELECT (random() * $1)::bigint, g / 20, '', 'a', 1, 1 "
        "FROM generate_series(1, $2) g ON CONFLICT DO NOTHING",
        preload // 10,
        preload,
    )
    await conn.execute("VACUUM ANALYZE lo")


async def _write(conn: Any, table: str, rows: list[tuple[Any, ...]], batch: int) -> None:
    conflict = "ON CONFLICT DO NOTHING" if table == "lo" else ""
    for i in range(0, len(rows), batch):
        chunk = sorted(set(rows[i : i + batch]))
        async with conn.transaction():
            columns = [list(c) for c in zip(*chunk, strict=True)]
            await conn.execute(_INSERT.format(table=table, conflict=conflict), *columns)


async def run(args: argparse.Namespace) -> None:
    admin = await asyncpg.connect(args.admin_url)
    name = "crawler_bench_linkpaths"
    await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await admin.execute(f"CREATE DATABASE {name}")
    url = args.admin_url.rsplit("/", 1)[0] + "/" + name
    conn = await asyncpg.connect(url, server_settings={"jit": "off", "synchronous_commit": "off"})
    try:
        await _setup(conn, args.preload)
        source = args.preload // 20 + 1
        for _ in range(args.rounds):
            for mode in ("direct", "merge"):
                targets = (args.preload + args.links) // 10
                rows = [
                    (random.randint(1, targets), source + i // 20, "", "a", 1, 1)
                    for i in range(args.links)
                ]
                source += args.links // 20
                await admin.execute("CHECKPOINT")
                lsn = "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn"
                wal, started = await conn.fetchval(lsn), time.perf_counter()
                await _write(conn, "lo" if mode == "direct" else "lf", rows, args.batch)
                if mode == "merge":
                    async with conn.transaction():
                        await conn.execute("SET LOCAL work_mem = '256MB'")
                        await conn.execute(_MERGE)
                    await conn.execute("VACUUM lf")
                took = time.perf_counter() - started
                wal = await conn.fetchval(lsn) - wal
                print(
                    f"{mode:6}: {1e6 * took / args.links:6.1f} us/link, "
                    f"WAL {wal / args.links:6.0f} B/link ({took:.2f} s)",
                    flush=True,
                )
    finally:
        await conn.close()
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--preload", type=int, default=2_000_000)
    parser.add_argument("--links", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
