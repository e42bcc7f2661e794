#!/usr/bin/env python3
"""A py-spy raw profile split by process, thread and component: where a page's CPU goes.

    .venv/bin/python bench/profile_split.py PROFILE.txt     # bench/run.py --profile --keep

``bench/run.py --profile`` records with ``--subprocesses --threads`` (and
``--native`` when asked), so every stack names its process (the crawler, a
parse helper) and thread (the event loop's MainThread, the store's writer).
Each sample is charged to one component, decided by the frame nearest the
leaf that belongs to one (a regex called from ``urls.py`` is URL handling):

    fetch     aiohttp, yarl, multidict, crawler/net/
    parse     selectolax, crawler/extract*.py, the body's decoding
    url       crawler/urls.py, crawler/scope.py (resolve, normalize, classify)
    storage   crawler/store/, sqlite3
    hand-off  the parse helpers' pipes and pickles (parse_pool, parse_child)
    loop      the event loop itself (asyncio, uvloop) and the engine
    wait      a thread blocked (epoll, futex, a semaphore): not CPU
    other     the rest (gc, interpreter start, imports, the report)

Shares are of the samples that are not ``wait``.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wait", ("epoll_wait", "epoll_pwait", "futex", "sem_wait", "sem_timedwait", "pthread_cond",
              "take_gil", "poll (libc", "select (libc", "__GI___poll",
              "do_futex_wait", "clock_nanosleep", "PyThread_acquire_lock_timed")),
    ("storage", ("crawler/store/", "sqlite3", "libsqlite3", "_sqlite3")),
    ("url", ("crawler/urls.py", "crawler/scope.py")),
    ("parse", ("selectolax", "lexbor", "crawler/extract", "decode_html")),
    ("hand-off", ("crawler/engine/parse_pool.py", "crawler/engine/parse_child.py", "pickle")),
    ("fetch", ("aiohttp", "yarl", "multidict", "crawler/net/", "_http_parser", "_websocket")),
    ("loop", ("asyncio", "uvloop", "crawler/engine/", "crawler/outcome.py", "crawler/politeness")),
)  # fmt: skip
ORDER = ("fetch", "parse", "url", "storage", "hand-off", "loop", "other")


def component(frames: list[str]) -> str:
    """The component of a sample: the leaf-most frame that belongs to one."""
    # A thread waiting for the GIL or a lock shows pthread_cond_*wait just above
    # an unnamed libc frame: the last few frames decide "wait".
    if any(marker in frame for frame in frames[-3:] for marker in COMPONENTS[0][1]):
        return "wait"
    if frames[-1].startswith("read (") and any("_read_frame" in frame for frame in frames):
        return "wait"  # a parse helper blocked on its pipe, waiting for the next page
    for frame in reversed(frames):
        for name, markers in COMPONENTS[1:]:
            if any(marker in frame for marker in markers):
                return name
    return "other"


def _process_label(header: str) -> str:
    command = header.partition(":")[2].strip('"')
    if "parse_child" in command:
        return "parse helper"
    if " crawl " in command or "crawler" in command:
        return "crawler"
    return command[:40]


def split(path: Path) -> dict[str, dict[str, float]]:
    """{"process / thread": {component: % of all CPU samples}, plus a total row}."""
    by_place: dict[str, Counter[str]] = defaultdict(Counter)
    cpu = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        process, thread = "crawler", "?"
        while frames and frames[0].startswith(("process ", "thread (")):
            head = frames.pop(0)
            if head.startswith("process "):
                process = _process_label(head)
            else:
                thread = head.partition(": ")[2] or "unnamed"
                thread = thread.rstrip("0123456789").rstrip("_-") or thread
        if not frames:
            continue
        kind = component(frames)
        if kind == "wait":
            continue
        count = int(count_text)
        cpu += count
        by_place[f"{process} / {thread}"][kind] += count
        by_place["all processes"][kind] += count
    if not cpu:
        return {}
    return {
        place: {kind: round(100 * counts[kind] / cpu, 1) for kind in ORDER if counts[kind]}
        | {"total": round(100 * sum(counts.values()) / cpu, 1)}
        for place, counts in sorted(by_place.items(), key=lambda kv: -sum(kv[1].values()))
    }


def top_own(path: Path, n: int = 12) -> dict[str, list[tuple[str, float]]]:
    """Per process, the functions with the most samples of their own (not waiting)."""
    own: dict[str, Counter[str]] = defaultdict(Counter)
    totals: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        process = "crawler"
        while frames and frames[0].startswith(("process ", "thread (")):
            head = frames.pop(0)
            if head.startswith("process "):
                process = _process_label(head)
        if not frames or component(frames) == "wait":
            continue
        leaf = frames[-1].partition(" (")
        where = leaf[2].rstrip(")").rsplit(":", 1)[0]
        for marker in ("site-packages/", "/lib/python3", "h16-speed/"):
            where = where.split(marker, 1)[-1]
        own[process][f"{leaf[0]} ({where})"] += int(count_text)
        totals[process] += int(count_text)
    return {
        process: [(name, round(100 * c / totals[process], 1)) for name, c in counts.most_common(n)]
        for process, counts in own.items()
    }


def print_split(path: Path) -> None:
    table = split(path)
    if not table:
        print("  (no samples)")
        return
    print(f"  CPU samples by process / thread and component (% of all CPU samples): {path.name}")
    print(f"    {'where':<34}" + "".join(f"{k:>9}" for k in (*ORDER, "total")))
    for place, row in table.items():
        print(f"    {place:<34}" + "".join(f"{row.get(k, 0.0):>9.1f}" for k in (*ORDER, "total")))
    for process, entries in top_own(path).items():
        print(f"  top own time, {process} (% of its CPU samples):")
        for name, pct in entries:
            print(f"    {pct:5.1f}%  {name}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print_split(Path(arg))
