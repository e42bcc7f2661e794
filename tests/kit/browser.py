"""Headless Chromium for tests: find it (installing Debian's package when we may), load a
page, and get the DOM back after its scripts ran.

    from browser import chromium_or_skip, dump_dom

    def test_page(tmp_path):
        chromium = chromium_or_skip()          # skips only when Chromium cannot be had
        dom = dump_dom(page_path, fragment="filter=gone", chromium=chromium)

``dump_dom`` runs ``chromium --headless --dump-dom`` with a throwaway profile, no network
side traffic, and a virtual-time budget so timers and load handlers have run. It is
bounded: a browser that hangs is killed (its whole process group) after ``timeout_s``.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
APT_PACKAGE = "chromium"
INSTALL_TIMEOUT_S = 600.0
DUMP_TIMEOUT_S = 60.0  # a hang bound: a cold start from a busy disk took over 15 s in CI
DEFAULT_BUDGET_MS = 2000
_INSTALL_LOCK = Path(tempfile.gettempdir()) / "crawler-tests-chromium-install.lock"

FLAGS = (
    "--headless",
    "--no-sandbox",  # tests often run as root in containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
)


class ChromiumUnavailableError(RuntimeError):
    """Chromium is not installed and could not be installed; the message says why."""


def find_chromium() -> str | None:
    """Path of an installed Chromium, or None."""
    for candidate in CHROMIUM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


@functools.cache
def ensure_chromium() -> str:
    """Chromium's path, installing Debian's package first when missing and running as root.

    Raises ChromiumUnavailableError saying why when it cannot be had. The result is
    cached for the session; concurrent test processes install only once (file lock).
    """
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0:
        raise ChromiumUnavailableError("chromium is not installed and we are not root")
    if shutil.which("apt-get") is None:
        raise ChromiumUnavailableError("chromium is not installed and there is no apt-get")
    with _INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find_chromium()  # another process may have installed it meanwhile
        if found:
            return found
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update"],
            ["apt-get", "install", "-y", "--no-install-recommends", APT_PACKAGE],
        ):
            try:
                done = subprocess.run(
                    command, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ChromiumUnavailableError(f"{' '.join(command)} failed: {exc}") from exc
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise ChromiumUnavailableError(
                    f"{' '.join(command)} exited {done.returncode}: {' / '.join(tail)}"
                )
    found = find_chromium()
    if not found:
        raise ChromiumUnavailableError(f"installed {APT_PACKAGE} but found no chromium binary")
    return found


def chromium_or_skip() -> str:
    """Chromium's path; skips the calling test, saying why, when it cannot be had."""
    try:
        return ensure_chromium()
    except ChromiumUnavailableError as exc:
        pytest.skip(f"headless Chromium unavailable: {exc}")


def file_url(path: Path, fragment: str = "") -> str:
    """The file: URL of ``path``, with ``#fragment`` when given."""
    url = path.resolve().as_uri()
    return f"{url}#{fragment}" if fragment else url


def dump_dom(
    target: Path | str,
    *,
    fragment: str = "",
    chromium: str | None = None,
    budget_ms: int = DEFAULT_BUDGET_MS,
    timeout_s: float = DUMP_TIMEOUT_S,
) -> str:
    """Load ``target`` (a file path or a URL) headless; return the serialized DOM after scripts.

    ``fragment`` is appended as ``#fragment`` to a file path. Raises RuntimeError with
    Chromium's last stderr lines when it fails, and kills it after ``timeout_s``.
    """
    binary = chromium or ensure_chromium()
    url = file_url(target, fragment) if isinstance(target, Path) else target
    with tempfile.TemporaryDirectory(prefix="crawler-chromium-") as profile:
        command = [
            binary,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            url,
        ]
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            start_new_session=True,  # its own process group, so a hang can be killed whole
            env={**os.environ, "HOME": profile},
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise RuntimeError(f"chromium did not finish within {timeout_s}s: {url}") from None
        finally:
            _kill_group(proc)  # renderer or GPU helpers left behind by the browser
    if proc.returncode != 0 or not out.strip():
        tail = "\n".join(err.strip().splitlines()[-5:])
        raise RuntimeError(f"chromium exited {proc.returncode} for {url}:\n{tail}")
    return out


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
