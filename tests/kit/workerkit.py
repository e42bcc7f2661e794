"""``crawler work --service`` processes for tests, and what PostgreSQL says about workers.

``WorkerProcess`` runs one joiner as a subprocess with JSON logs to a file;
``leased_urls_of`` reads the URLs a process holds leases on (call it while
the process is stopped with SIGSTOP, so the set cannot change), which is the
bound on what a SIGKILL may cause to be requested twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import asyncpg

from kit.pgkit import run_async
from kit.servicekit import json_log_lines
from kit.stoppable import Stoppable


@dataclass
class WorkerProcess(Stoppable):
    """``python -m crawler.cli work --service --db URL``; a context manager that stops it."""

    db: str
    log_dir: Path
    args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    _log_path: Path | None = None

    def start(self) -> Self:
        self._log_path = self.log_dir / f"worker-{time.time_ns()}.log"
        command = [
            sys.executable,
            "-m",
            "crawler.cli",
            "work",
            "--service",
            "--db",
            self.db,
            "--no-progress",
            "--log-format",
            "json",
            "--log-level",
            "info",
            *self.args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}
        with self._log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def freeze(self) -> None:
        """SIGSTOP: the process holds its leases and does nothing more."""
        os.kill(self.pid, signal.SIGSTOP)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def log(self) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text(encoding="utf-8", errors="replace")

    def events(self) -> list[dict[str, Any]]:
        return json_log_lines(self.log)

    def event_names(self) -> list[str]:
        return [str(e.get("event")) for e in self.events()]


async def _fetch(db: str, sql: str, *args: Any) -> list[Any]:
    conn = await asyncpg.connect(db)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def leased_urls_of(db: str, pid: int) -> set[str]:
    """URLs leased by the worker rows of process ``pid``."""
    rows = run_async(
        _fetch(
            db,
            "SELECT u.url FROM url u JOIN worker w ON w.token = u.lease_owner "
            "WHERE u.state = 1 AND w.pid = $1",
            pid,
        )
    )
    return {r[0] for r in rows}


def scalar(db: str, sql: str, *args: Any) -> Any:
    rows = run_async(_fetch(db, sql, *args))
    return rows[0][0]
