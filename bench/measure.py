"""Measuring a crawl from outside: a process tree's peak RSS, a file's peak size, time.

``run_measured`` starts a command in its own session, samples every 100 ms the
resident memory summed over its process tree (from /proc), the bytes it has
written to disk so far and the size of a file (the SQLite WAL), and kills the
whole tree on a hard timeout. Its exit time is taken by a thread blocked in
``wait4``, so it is exact, not sampled; so are its CPU time and the bytes it
wrote (``write_bytes`` of /proc/PID/io: what the process sent to the storage
layer), both summed over the child and every descendant it reaped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from serve import LogEntry

SAMPLE_S = 0.1
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
OUT = BENCH / "out"
# Where the synthetic sites are generated (bench/sitegen.py). BENCH_SITES=/dev/shm
# keeps a 1,000,000-page site in memory: a machine that pages out file cache
# left idle for a minute (DAMON's reclaim, on this project's virtual machines)
# has nginx read each page from disk, one at a time, and the crawl then waits
# on the disk, not on the crawler.
SITES = Path(os.environ.get("BENCH_SITES") or OUT)
VENV_BIN = ROOT / ".venv" / "bin"
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy")


@dataclass(slots=True)
class Measurement:
    """What ``run_measured`` saw."""

    returncode: int | None
    wall_s: float
    peak_rss_bytes: int
    max_file_bytes: int
    started_at: float  # unix time
    exited_at: float  # unix time
    timed_out: bool
    samples: int
    timeline: list[tuple[float, int, int]] = field(default_factory=list)  # (s, rss, file)
    write_bytes: int = 0  # written to disk by the tree (rusage: reaped descendants too)
    cpu_s: float = 0.0  # user + system, the process and the descendants it waited for
    writes: list[tuple[float, int]] = field(default_factory=list)  # (s, written so far)

    def rss_by_quarter(self) -> list[float]:
        """Peak RSS (MB) within each quarter of the run: flat memory means flat figures."""
        if not self.timeline:
            return []
        end = self.timeline[-1][0] or 1.0
        quarters = [0] * 4
        for t, rss, _ in self.timeline:
            k = min(int(4 * t / end), 3)
            quarters[k] = max(quarters[k], rss)
        return [round(q / 1e6, 1) for q in quarters]


@dataclass(slots=True)
class LogStats:
    """What the server's access log says about a run."""

    requests: int = 0
    by_host: dict[str, int] = field(default_factory=dict)
    by_status: dict[int, int] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)  # "METHOD uri" -> count
    duplicate_requests: int = 0  # requests beyond the first of each (method, uri)
    first_at: float | None = None
    last_at: float | None = None


def compile_package(root: Path = ROOT) -> None:
    """Byte-compile the crawler's package, as ``pip install`` leaves an installed one.

    An editable checkout run with PYTHONDONTWRITEBYTECODE=1 (as on the
    benchmark machines) compiles its ~80 modules from source at every start,
    ~0.1-0.3 s of CPU that no installed crawler pays.
    """
    import compileall

    compileall.compile_dir(root / "crawler", quiet=2)


def loopback_env(extra_path: Iterable[Path] = ()) -> dict[str, str]:
    """The environment for a crawling child: no proxy, so traffic stays on loopback."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARS}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,127.0.0.2,localhost"
    paths = [str(p) for p in extra_path]
    if paths:
        env["PATH"] = os.pathsep.join([*paths, env.get("PATH", "")])
    return env


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as handle:
            kids.extend(int(k) for k in handle.read().split())
    return kids


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants alive now."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(_children(pid))
    return pids


def tree_rss(root: int) -> int:
    """Resident bytes summed over ``root``'s process tree."""
    total = 0
    for pid in tree_pids(root):
        with (
            contextlib.suppress(OSError, ValueError, IndexError),
            open(f"/proc/{pid}/statm") as handle,
        ):
            total += int(handle.read().split()[1]) * PAGE_SIZE
    return total


def tree_write_bytes(root: int) -> int:
    """``write_bytes`` summed over the live tree (a reaped child counts in its parent)."""
    total = 0
    for pid in tree_pids(root):
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/io") as handle:
            for line in handle:
                if line.startswith("write_bytes:"):
                    total += int(line.split()[1])
    return total


def written_between(writes: list[tuple[float, int]], t0: float, t1: float) -> int:
    """Bytes written from ``t0`` to ``t1`` (seconds from start), from the samples."""

    def at(t: float) -> int:
        before = [w for s, w in writes if s <= t]
        return before[-1] if before else 0

    return max(at(t1) - at(t0), 0)


def _file_size(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0


def kill_tree(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the child's session, then SIGKILL whatever is left."""
    if proc.poll() is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def run_measured(
    cmd: Sequence[str],
    *,
    timeout_s: float,
    stdout: Path,
    stderr: Path,
    watch_file: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Measurement:
    """Run ``cmd`` to completion (or ``timeout_s``), sampling RSS and ``watch_file``."""
    exited = threading.Event()
    exit_time: list[float] = []
    with stdout.open("wb") as out, stderr.open("wb") as err:
        started = time.time()
        t0 = time.monotonic()
        proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )

        usage: list[Any] = []

        def waiter() -> None:
            # wait4: the child's rusage, with every descendant it reaped
            # (ru_oublock counts 512-byte blocks of write_bytes).
            try:
                _, status, rusage = os.wait4(proc.pid, 0)
            except ChildProcessError:  # reaped by kill_tree after a timeout
                proc.wait()
            else:
                proc.returncode = os.waitstatus_to_exitcode(status)
                usage.append(rusage)
            exit_time.append(time.time())
            exited.set()

        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        peak_rss = max_file = samples = 0
        timed_out = False
        timeline: list[tuple[float, int, int]] = []
        writes: list[tuple[float, int]] = []
        try:
            while True:
                rss, size = tree_rss(proc.pid), _file_size(watch_file)
                written = tree_write_bytes(proc.pid)
                at = round(time.monotonic() - t0, 2)
                timeline.append((at, rss, size))
                if not exited.is_set() and written:
                    writes.append((at, max(written, writes[-1][1] if writes else 0)))
                peak_rss = max(peak_rss, rss)
                max_file = max(max_file, size)
                samples += 1
                if exited.wait(SAMPLE_S):
                    break
                if time.monotonic() - t0 > timeout_s:
                    timed_out = True
                    log(f"hard timeout after {timeout_s:.0f}s: killing {cmd[0]}")
                    break
        finally:
            # Reap grandchildren too (node, helper processes) even on success.
            kill_tree(proc)
        thread.join(timeout=15)
        max_file = max(max_file, _file_size(watch_file))
    ended = exit_time[0] if exit_time else time.time()
    write_bytes = cpu_s = 0.0
    if usage:
        write_bytes = usage[0].ru_oublock * 512
        cpu_s = usage[0].ru_utime + usage[0].ru_stime
    if exit_time:
        writes.append((round(ended - started, 2), int(write_bytes)))
    return Measurement(
        returncode=proc.returncode,
        wall_s=time.monotonic() - t0 if not exit_time else ended - started,
        peak_rss_bytes=peak_rss,
        max_file_bytes=max_file,
        started_at=started,
        exited_at=ended,
        timed_out=timed_out,
        samples=samples,
        timeline=timeline,
        write_bytes=int(write_bytes),
        cpu_s=round(cpu_s, 3),
        writes=writes,
    )


def log_stats(entries: Iterable[LogEntry]) -> LogStats:
    """Count requests, duplicates (same method and URI on the same host) and times."""
    stats = LogStats()
    seen: Counter[tuple[str, str, str]] = Counter()
    hosts: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    for e in entries:
        at, host, method, uri, status = e.at, e.host, e.method, e.uri, e.status
        stats.requests += 1
        seen[(host, method, uri)] += 1
        hosts[host] += 1
        statuses[status] += 1
        if stats.first_at is None or at < stats.first_at:
            stats.first_at = at
        if stats.last_at is None or at > stats.last_at:
            stats.last_at = at
    stats.by_host = dict(hosts)
    stats.by_status = dict(sorted(statuses.items()))
    dups = {k: c for k, c in seen.items() if c > 1}
    stats.duplicate_requests = sum(c - 1 for c in dups.values())
    stats.duplicates = {
        f"{m} http://{h}{u}": c for (h, m, u), c in sorted(dups.items(), key=lambda kv: -kv[1])
    }
    return stats


def is_page(entry: LogEntry, host: str) -> bool:
    """An HTML page of ``host`` (addr:port) fetched with GET and found (200)."""
    return (
        entry.host == host
        and entry.method == "GET"
        and entry.status == 200
        and entry.uri.endswith((".html", "/"))
    )


def pages_fetched(entries: Iterable[LogEntry], host: str) -> int:
    """Distinct pages of ``host``, as ``is_page`` tells them."""
    return len({e.uri for e in entries if is_page(e, host)})


def page_rate_by_tenth(entries: Iterable[LogEntry], host: str) -> list[float]:
    """Pages/s over each tenth of the pages fetched, in the order they were fetched.

    The issue's "rate over the last 10% of the crawl against the first 10%":
    pages as ``pages_fetched`` counts them, timed by the server's log.
    """
    times = sorted(e.at for e in entries if is_page(e, host))
    if len(times) < 20:
        return []
    rates = []
    for k in range(10):
        start, end = k * len(times) // 10, (k + 1) * len(times) // 10 - 1
        span = times[end] - times[start]
        rates.append(round((end - start) / span) if span > 0 else 0.0)
    return rates


def written_per_page_by_tenth(
    entries: Iterable[LogEntry], host: str, writes: list[tuple[float, int]], started_at: float
) -> list[int]:
    """Bytes written per page over each tenth of the pages (``page_rate_by_tenth``'s tenths).

    Writes that grow with the database show as a rising row; ``writes`` are
    ``Measurement.writes`` (seconds from the start, bytes written so far).
    """
    times = sorted(e.at - started_at for e in entries if is_page(e, host))
    if len(times) < 20 or not writes:
        return []
    out = []
    for k in range(10):
        start, end = k * len(times) // 10, (k + 1) * len(times) // 10 - 1
        lo = times[start] if k else 0.0
        hi = times[end] if k < 9 else writes[-1][0]
        out.append(round(written_between(writes, lo, hi) / max(end - start + 1, 1)))
    return out


def db_bytes(db: Path) -> int:
    """The database's bytes on disk: main file plus WAL, as left at exit."""
    return _file_size(db) + _file_size(Path(f"{db}-wal"))


def compare_broken(found: dict[str, list[str]], planted: dict[str, list[str]]) -> dict[str, object]:
    """Found broken URLs (with sources) against the ground truth."""
    missing = sorted(set(planted) - set(found))
    extra = sorted(set(found) - set(planted))
    wrong_sources = {
        url: {"found": sorted(found[url]), "planted": sorted(planted[url])}
        for url in sorted(set(found) & set(planted))
        if sorted(found[url]) != sorted(planted[url])
    }
    return {
        "found": len(found),
        "planted": len(planted),
        "missing": missing,
        "extra": extra,
        "wrong_sources": wrong_sources,
        "ok": not missing and not extra and not wrong_sources,
    }


def git_rev() -> str | None:
    """The checked-out commit (read only), for the results file."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def append_result(record: dict[str, object]) -> Path:
    """Append one JSON line to bench/out/results.jsonl."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "results.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True, default=str) + "\n")
    return path


def mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def install_signal_exit() -> None:
    """SIGTERM (and a background job's ignored SIGINT) unwind like Ctrl-C, so cleanup runs."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def as_dict(m: Measurement) -> dict[str, object]:
    return asdict(m)


def sampler_args(description: str, interval_s: float, samples: str) -> tuple[float, list[str]]:
    """``[--interval S] -- COMMAND ...`` of a script that samples a command as it runs:
    the interval and the command."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--interval", type=float, default=interval_s, help=f"seconds between {samples}"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    return float(args.interval), list(command)
