"""The service as a subprocess, and a small HTTP client for it.

``ServiceProcess`` runs ``python -m crawler.service`` (or any command line)
with ``--port 0`` semantics: the port is read back from the JSON log line
``service_listening``. Its stderr goes to a file, read as JSON lines, so a
test can assert on log events as data.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from kit.sitekit import wait_until_sync
from kit.stoppable import Stoppable

TOKEN = "test-token-0123456789abcdef"  # noqa: S105 - a test token, not a secret
START_TIMEOUT_S = 15.0
HTTP_TIMEOUT_S = 15.0
TERMINAL = frozenset({"finished", "cancelled", "failed"})


@dataclass
class Answer:
    """One HTTP response, read whole."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()


@dataclass
class ServiceProcess(Stoppable):
    """A service subprocess on a free port; a context manager that always stops it."""

    data_dir: Path
    args: list[str] = field(default_factory=list)
    token: str | None = TOKEN
    command: list[str] | None = None  # default: python -m crawler.service --port 0 ...
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    _log_path: Path | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self.data_dir.parent / f"{self.data_dir.name}-service-{time.time_ns()}.log"
        command = self.command or [
            sys.executable,
            "-m",
            "crawler.service",
            "--port",
            "0",
            "--data-dir",
            str(self.data_dir),
            "--log-format",
            "json",
            *self.args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}
        if self.token is not None:
            env["CRAWLER_TOKEN"] = self.token
        env.update(self.env)
        with self._log_path.open("wb") as log:
            self.started_at = time.monotonic()
            self.process = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=self.data_dir.parent
            )
        wait_until_sync(self._listening, START_TIMEOUT_S, 0.02, "service_listening logged")
        return self

    def _listening(self) -> bool:
        assert self.process is not None
        for line in self.log_lines():
            if line.get("event") == "service_listening":
                self.port = int(line["port"])
                return True
        if self.process.poll() is not None:
            raise AssertionError(f"the service exited with {self.process.returncode}:\n{self.log}")
        return False

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- logs ------------------------------------------------------------------------

    @property
    def log(self) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text(encoding="utf-8", errors="replace")

    def log_lines(self) -> list[dict[str, Any]]:
        return json_log_lines(self.log)

    # -- HTTP ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> Answer:
        """One request; JSON ``body`` or ``raw`` bytes; the token unless ``auth`` is False."""
        sent = dict(headers or {})
        if auth and self.token is not None:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        payload = raw
        if body is not None:
            payload = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
        try:
            conn.request(method, path, body=payload, headers=sent)
            response = conn.getresponse()
            data = response.read()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
        finally:
            conn.close()

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def create(self, seeds: list[str], **settings: Any) -> dict[str, Any]:
        answer = self.request("POST", "/crawls", {"seeds": seeds, "settings": settings})
        assert answer.status == 201, answer.body
        created: dict[str, Any] = answer.json()
        return created

    def crawl(self, crawl_id: int) -> dict[str, Any]:
        answer = self.get(f"/crawls/{crawl_id}")
        assert answer.status == 200, answer.body
        crawl: dict[str, Any] = answer.json()
        return crawl

    def wait_state(self, crawl_id: int, *states: str, timeout: float = 30.0) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def reached() -> bool:
            found.update(self.crawl(crawl_id))
            return found["state"] in states

        wait_until_sync(reached, timeout, 0.05, f"crawl {crawl_id} in {states}")
        return found

    def rss_kib(self) -> int:
        """Resident memory of the process, from /proc."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


def json_log_lines(log: str) -> list[dict[str, Any]]:
    """The JSON objects of a structlog log, one per line; other lines skipped."""
    lines = []
    for text in log.splitlines():
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            lines.append(value)
    return lines
