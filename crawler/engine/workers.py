"""``--workers N``: more processes on the same crawl, for more than one core.

Each worker is ``crawler work`` on the same database and crawl: it leases from
the same frontier with its own owner token, so the crawl finishes once, and a
worker that dies loses nothing (its leases are reclaimed when its pid is gone).
The main process starts them after the seeds are in the frontier and stops
them when it stops.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import structlog

from crawler.config import RunOptions

log = structlog.get_logger(__name__)
EXIT_GRACE_S = 5.0


def spawn(run: RunOptions, crawl_id: int, count: int) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` worker processes on this crawl."""
    command = [
        sys.executable,
        "-P",  # the installed crawler, never a `crawler/` folder in the working directory
        "-m",
        "crawler.cli",
        "work",
        "--db",
        run.db,
        "--crawl",
        str(crawl_id),
        "--no-progress",
        "--log-level",
        run.log_level,
        "--log-format",
        run.log_format,
        "--durability",
        run.durability,
        "--shutdown-timeout",
        str(run.shutdown_timeout_s),
        "--parse-helpers",
        str(run.helper_processes()),
    ]
    procs = [subprocess.Popen(command, stdout=subprocess.DEVNULL) for _ in range(count)]  # noqa: S603 - our own command line
    log.info("workers_started", count=count, pids=[p.pid for p in procs])
    return procs


def finish(procs: list[subprocess.Popen[bytes]], *, stop: bool, timeout_s: float) -> None:
    """Wait for workers to end (they end with the crawl); stop them first if asked."""
    if stop:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s + EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            log.warning("worker_killed", pid=proc.pid)
            proc.kill()
            proc.wait()
