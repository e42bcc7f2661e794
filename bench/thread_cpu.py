#!/usr/bin/env python3
"""CPU time by process and thread of one command, read from /proc while it runs.

    .venv/bin/python bench/thread_cpu.py -- .venv/bin/crawler crawl URL --db /tmp/c.db -n -f json

Which of a crawl's threads is the busy one (the event loop's, the store's
writer, a parse helper) decides what to make cheaper next: a thread busy for
most of the wall time is the one the crawl waits on. A profile says where a
thread's time goes; this says which thread to profile. Each thread's
user + system time is read from ``/proc/PID/task/TID/stat`` every
``--interval`` seconds, the command's children included; the last reading
of each thread is printed (a thread that ends between two readings loses at
most one interval). Linux only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import measure

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def read_tree(pid: int, role: str, seen: dict[tuple[str, int, int, str], float]) -> None:
    """Each thread's CPU seconds of ``pid`` and of its children, into ``seen``."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        for task in tasks.iterdir():
            stat = (task / "stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            ticks = int(fields[11]) + int(fields[12])  # utime + stime
            seen[(role, pid, int(task.name), name)] = ticks / TICKS_PER_S
        children = (tasks / str(pid) / "children").read_text().split()
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return  # it ended between two reads
    for child in children:
        read_tree(int(child), "child", seen)


def main() -> int:
    interval, command = measure.sampler_args(__doc__.split("\n", 1)[0], 0.05, "readings")
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    seen: dict[tuple[str, int, int, str], float] = {}
    while process.poll() is None:
        read_tree(process.pid, "main", seen)
        time.sleep(interval)
    wall = time.monotonic() - started
    print(f"wall {wall:.2f} s, CPU {sum(seen.values()):.2f} s, exit {process.returncode}")
    for (role, pid, tid, name), cpu in sorted(seen.items(), key=lambda item: -item[1]):
        if cpu >= 0.01:
            thread = "main thread" if pid == tid else f"thread {tid}"
            print(f"  {cpu:7.2f} s  {cpu / wall:4.0%} of the wall  {role} {pid} {thread} ({name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
