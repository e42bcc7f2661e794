"""Resident memory of a process and its descendants, read from /proc, sampled on a thread."""

from __future__ import annotations

import os
import threading
from pathlib import Path

SAMPLE_EVERY_S = 0.02


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from each /proc/*/stat's parent pid)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss_bytes(pid: int) -> tuple[int, int]:
    """(resident bytes summed over the tree, processes in it)."""
    pids = descendants(pid)
    return sum(rss_bytes(p) for p in pids), len(pids)


class PeakSampler:
    """The highest summed RSS of a process tree while running (a context manager)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.most_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            total, count = tree_rss_bytes(self.pid)
            self.peak = max(self.peak, total)
            self.most_processes = max(self.most_processes, count)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
