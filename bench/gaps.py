#!/usr/bin/env python3
"""Where a crawl stopped sending requests: the gaps in a benchmark server's access log.

    .venv/bin/python bench/run.py --pages 10000 --keep
    .venv/bin/python bench/gaps.py bench/out/run-n10000-s1-*/server/access.log

A crawl whose requests stop for a while is waiting on something (its writer,
a merge, a full backlog): the time is in the wall clock but in no profile of
CPU. The log's lines (``bench/serve.py``: seconds, client, method, path,
status) are read in order of time; printed: the span from first to last
request, how much of it went in gaps longer than each threshold, and the
longest gaps with the requests on either side and how many came after.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

THRESHOLDS_S = (0.01, 0.02, 0.05, 0.1, 0.2)


def read(log: Path) -> list[tuple[float, str]]:
    """(time, "METHOD path status") per request, in order of time."""
    entries = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 5:
            entries.append((float(parts[0]), " ".join(parts[2:5])))
    return sorted(entries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="an access log of bench/serve.py")
    parser.add_argument("--top", type=int, default=10, help="longest gaps to list")
    args = parser.parse_args(argv)
    entries = read(args.log)
    if len(entries) < 2:
        print("fewer than two requests")
        return 1
    start = entries[0][0]
    gaps = [
        (later[0] - earlier[0], i)
        for i, (earlier, later) in enumerate(itertools.pairwise(entries), start=1)
    ]
    print(f"{len(entries)} requests over {entries[-1][0] - start:.2f} s")
    for threshold in THRESHOLDS_S:
        over = [gap for gap, _ in gaps if gap > threshold]
        print(f"  gaps over {threshold * 1000:>4.0f} ms: {len(over):>6}, {sum(over):7.2f} s in all")
    print("longest gaps (s after the first request, length, before -> after, requests left):")
    for gap, i in sorted(gaps, reverse=True)[: args.top]:
        at = entries[i - 1][0] - start
        around = f"{entries[i - 1][1]} -> {entries[i][1]}"
        print(f"  {at:8.3f} s  {gap:6.3f} s  {around}, {len(entries) - i} left")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
