"""Finding, starting and stopping the browser; no browser outlives the crawler.

The browser runs in a process group of its own (``start_new_session``), so
stopping it kills every helper it started (renderers, zygotes, GPU). It is
also started with ``PR_SET_PDEATHSIG = SIGKILL``: when the crawler dies, even
by ``kill -9``, the kernel kills the browser, and its helpers exit once
their browser is gone. The profile is a throwaway directory removed with the
browser.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crawler.errors import UsageError

BROWSER_NAMES = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
    "headless_shell",
)
INSTALL_HINT = (
    "install Chromium (Debian/Ubuntu: apt-get install chromium; Fedora: dnf install chromium; "
    "macOS: brew install --cask chromium) or name it with --browser PATH; "
    "the Docker image has it with --build-arg WITH_CHROMIUM=1"
)
START_TIMEOUT_S = 30.0
VERSION_TIMEOUT_S = 20.0
_PR_SET_PDEATHSIG = 1
# Everything the browser could reach by itself is closed: every request of a
# page is answered by the crawler (Fetch.requestPaused), so the browser's own
# network stack only ever sees what escaped interception, and that goes to a
# proxy that does not exist (loopback included: "<-loopback>").
FLAGS = (
    "--headless",
    "--no-sandbox",  # containers often run as root, where the sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
    "--disable-features=Translate,MediaRouter,OptimizationHints,InterestFeedContentSuggestions",
    "--mute-audio",
    # Tabs opened by DevTools count as in the background: their timers would be
    # throttled to one a second, and a page would look idle while it is not.
    "--disable-background-timer-throttling",
    "--disable-renderer-backgrounding",
    "--disable-backgrounding-occluded-windows",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


def find_browser(path: str | None) -> str:
    """The browser to run: ``path`` (``--browser``) or the first usual name on PATH.

    UsageError (exit 3) saying how to install one when there is none.
    """
    if path:
        found = shutil.which(path)
        if found is None:
            raise UsageError(f"--browser {path!r}: not an executable; {INSTALL_HINT}")
        return _runs(found)
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return _runs(found)
    raise UsageError(f"--render needs Chromium, and none was found on PATH: {INSTALL_HINT}")


def _runs(path: str) -> str:
    """``path`` if it answers ``--version`` like a Chromium (a stub that only says
    "install me", as Ubuntu's snap wrapper, does not); UsageError otherwise."""
    try:
        done = subprocess.run(  # noqa: S603 - the user's browser, no shell
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{path}: does not run ({exc}); {INSTALL_HINT}") from None
    answer = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0 or not answer or "chrom" not in answer[0].lower():
        said = answer[0][:200] if answer else f"exit {done.returncode}"
        raise UsageError(f"{path}: not a Chromium ({said}); {INSTALL_HINT}")
    return path


# Looked up here, not in the child: between fork and exec only the call itself is safe.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class BrowserProcess:
    """One running browser: its process (group leader), profile and DevTools URL."""

    def __init__(self, executable: str, user_agent: str) -> None:
        self._executable = executable
        self._user_agent = user_agent
        self._profile = Path(tempfile.mkdtemp(prefix="crawler-chromium-"))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def launch(self) -> None:
        """Start the browser (returns at once; ``devtools_url`` waits for it).

        Called on the event loop's thread: the death signal is tied to the
        thread that forks, and a worker thread of ``to_thread`` may exit.
        """
        self._process = subprocess.Popen(  # noqa: S603 - the user's browser, no shell
            [
                self._executable,
                *FLAGS,
                f"--user-agent={self._user_agent}",
                f"--user-data-dir={self._profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only prctl: safe between fork and exec
            env={**os.environ, "HOME": str(self._profile)},
        )

    def devtools_url(self) -> str | None:
        """The browser's websocket URL once it listens; None before. RuntimeError if it died."""
        assert self._process is not None
        if self._process.poll() is not None:
            raise RuntimeError(f"the browser exited with {self._process.returncode} at start")
        try:
            lines = (self._profile / "DevToolsActivePort").read_text().split()
        except FileNotFoundError:
            return None
        if len(lines) < 2:
            return None
        return f"ws://127.0.0.1:{lines[0]}{lines[1]}"

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def rss_bytes(self) -> int:
        """Memory (PSS) of every process in the browser's group (the browser's helpers too)."""
        return group_rss_bytes(self.pid) if self.pid is not None else 0

    def kill(self) -> None:
        """Kill the browser and its helpers; remove the profile. Idempotent, quick."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(5)
        shutil.rmtree(self._profile, ignore_errors=True)


def group_rss_bytes(pgid: int | None) -> int:
    """Memory of the processes of group ``pgid``: the sum of their PSS (Linux; 0 elsewhere).

    PSS, not RSS: the browser's processes share most of their pages, and a
    sum of RSS would count them once per process (about twice the truth).
    """
    if pgid is None or not os.path.isdir("/proc"):
        return 0
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _pgrp(entry) == pgid:
            total += process_pss_bytes(int(entry))
    return total


def _pgrp(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[2])  # after "pid (comm)": state ppid pgrp


def process_pss_bytes(pid: int) -> int:
    """Proportional set size of one process (its RSS when smaps_rollup is unreadable)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def wait_for_start(process: BrowserProcess) -> str:
    """Block until the browser listens (bounded); its DevTools URL."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        url = process.devtools_url()
        if url is not None:
            return url
        time.sleep(0.02)
    raise RuntimeError("the browser did not open its DevTools port")
