"""Running the ``crawler`` command line as a real subprocess, for tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RUN_TIMEOUT_S = 60.0


def clean_env() -> dict[str, str]:
    """The environment without CRAWLER_* (they would change the crawler's settings;
    module fixtures run before conftest clears them)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CRAWLER_")}


def cli(*args: str | Path) -> list[str]:
    """The command line of ``crawler ARGS`` with this interpreter (``-P``: the
    installed crawler, whatever folder it runs in)."""
    return [sys.executable, "-P", "-m", "crawler.cli", *map(str, args)]


def broken_locations(report: dict[str, Any]) -> set[tuple[str, str, int, int]]:
    """(broken URL, source, line, column) of every place a JSON report names."""
    return {
        (entry["url"], where["source"], where["line"], where["column"])
        for entry in report["broken"]
        for where in entry["locations"]
    }


DECOY_SAYS = "the decoy crawler package was imported"


def plant_decoy_crawler(folder: Path) -> None:
    """A ``crawler/`` package in ``folder`` that fails when imported: a process
    started there must import the installed crawler, not this."""
    (folder / "crawler").mkdir()
    (folder / "crawler" / "__init__.py").write_text(f"raise SystemExit({DECOY_SAYS!r})\n")


def run_cli(
    *args: str | Path,
    cwd: Path,
    timeout: float = RUN_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``crawler ARGS`` to its end (bounded), capturing its output; ``env`` adds
    variables to a clean environment."""
    return run_command(cli(*args), cwd=cwd, timeout=timeout, env=env)


def run_command(
    command: list[str],
    *,
    cwd: Path,
    timeout: float = RUN_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``run_cli`` for any command line (a boot script that patches the crawler first)."""
    return subprocess.run(
        command,
        cwd=cwd,
        env={**clean_env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
