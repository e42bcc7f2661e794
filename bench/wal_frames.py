#!/usr/bin/env python3
"""Where a SQLite crawl's writes go: its WAL frames counted per table and index.

    .venv/bin/python bench/wal_frames.py --pages 10000

Crawls the synthetic site in this process with the WAL never checkpointed
(so every frame the crawl wrote is still in the log), copies the log before
the store closes, then names the B-tree of each frame's page (``dbstat``) and
prints frames per B-tree. Each frame is one page written whole by one commit;
the checkpoints write each distinct page once more. Frames of pages freed
since (a batch of ``link_fresh`` moved) are counted as ``?``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import shutil
import sqlite3
import struct
import sys
from pathlib import Path

import measure
import serve
import sitegen

sys.path.insert(0, str(measure.ROOT))
from crawler.cli.main import main as crawler_main
from crawler.store.sqlite import db as sqlite_db
from crawler.store.sqlite import store as sqlite_store

WAL_HEADER = 32
FRAME_HEADER = 24


def frames_by_btree(db: Path, wal: Path) -> tuple[collections.Counter[str], int, int]:
    """(frames per B-tree name, commits, page size) of a copied WAL."""
    conn = sqlite3.connect(db)
    names = dict((page, name) for name, page in conn.execute("SELECT name, pageno FROM dbstat"))
    conn.close()
    data = wal.read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    counts: collections.Counter[str] = collections.Counter()
    commits = 0
    offset = WAL_HEADER
    while offset + FRAME_HEADER + page_size <= len(data):
        page, commit = struct.unpack(">II", data[offset : offset + 8])
        counts[names.get(page, "?")] += 1
        commits += 1 if commit else 0
        offset += FRAME_HEADER + page_size
    return counts, commits, page_size


class _NoCheckpoint(sqlite3.Connection):
    """A connection whose explicit checkpoints do nothing (a merge of open links asks for one)."""

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.lstrip().upper().startswith("PRAGMA WAL_CHECKPOINT"):
            return super().execute("SELECT 0, 0, 0")
        return super().execute(sql, *args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    site = measure.OUT / f"site-n{args.pages}-s{args.seed}"
    sitegen.generate(site, args.pages, args.seed)
    run_dir = measure.OUT / "wal-frames"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    db, kept = run_dir / "crawl.db", run_dir / "crawl.db-wal.copy"
    # Never checkpoint: the log keeps every frame.
    sqlite_db.AUTOCHECKPOINT_BYTES = 1 << 40
    sqlite_store.WAL_LIMIT_BYTES = 1 << 40
    connect = sqlite3.connect  # the store's and the merges' explicit checkpoints too
    sqlite3.connect = functools.partial(connect, factory=_NoCheckpoint)  # restored below
    close = sqlite_store.AsyncFrontier.close

    def keep_wal(self: sqlite_store.AsyncFrontier) -> None:
        shutil.copy(f"{db}-wal", kept)
        close(self)

    sqlite_store.AsyncFrontier.close = keep_wal  # type: ignore[method-assign]
    with serve.Server([site / "site", site / "ext"], workdir=run_dir / "server") as server:
        origin = server.origins[0]
        crawler_main(
            ["crawl", f"{origin}/", "--db", str(db), "-n", "-f", "json", "-o",
             str(run_dir / "report.json"), "--max-concurrency", "32",
             "--host-concurrency", "32", "--log-level", "error"]
        )  # fmt: skip
    sqlite3.connect = connect
    counts, commits, page_size = frames_by_btree(db, kept)
    total = sum(counts.values())
    print(
        f"{total} frames of {page_size} B ({total * page_size / 1e6:.1f} MB) in {commits} commits"
    )
    print(f"{total * page_size / args.pages:.0f} B of WAL per page")
    for name, n in counts.most_common(20):
        print(f"{n:9d} {100 * n / total:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
