#!/usr/bin/env python3
"""CPU time and database bytes per page of one crawl of the synthetic site, for A/B runs.

    .venv/bin/python bench/cpu_db.py --pages 10000 [--code DIR] [--label NAME]

Wall time is noisy on a shared machine; CPU time (user + sys of the crawler
and its parse helpers, which it waits for) and the database's size are not
(much). ``--code DIR`` runs the ``crawler`` package found in DIR instead of
this checkout's (e.g. ``git archive OLD crawler migrations | tar -x -C DIR``),
so two versions are compared on the same site, one after the other. Prints
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import time
from pathlib import Path

import measure
import serve
import sitegen

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=10000)
    parser.add_argument("--code", default=str(ROOT), help="directory holding the crawler package")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    site_dir = measure.OUT / f"site-n{args.pages}-s1"
    sitegen.generate(site_dir, args.pages, 1)
    run_dir = measure.OUT / f"cpu-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    db = run_dir / "crawl.db"
    roots = [site_dir / "site", site_dir / "ext"]
    with serve.Server(roots, kind="auto", workdir=run_dir / "server") as server:
        env = {**measure.loopback_env(), "PYTHONPATH": args.code}
        cmd = [
            str(measure.VENV_BIN / "python"), "-P", "-m", "crawler.cli",
            "crawl", server.origins[0] + "/",
            "--db", str(db), "-n", "-f", "json", "-o", str(run_dir / "report.json"),
            "--max-concurrency", "32", "--host-concurrency", "32",
        ]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        with (run_dir / "stderr").open("w") as stderr:
            proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads((run_dir / "report.json").read_text())["summary"]
    pages = summary["pages"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = measure.db_bytes(db)
    figures = {
        "label": args.label,
        "returncode": proc.returncode,
        "pages": pages,
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_page": round(cpu * 1000 / pages, 3),
        "db_bytes": size,
        "db_bytes_per_page": round(size / pages, 1),
        "wall_s": round(wall, 1),
        "db": str(db),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
