"""A freed 10 MB page leaves the process once the mmap threshold is pinned (CLI and service).

Each case runs in a fresh interpreter (the threshold is process-wide and
cannot be unset): a 10 MB block is freed first, which raises glibc's dynamic
threshold, then a second 10 MB block is allocated under small blocks and
freed. Unpinned, it stays resident (the control, which shows the case can
fail); pinned, it goes.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or ctypes.util.find_library("c") is None, reason="glibc's malloc"
)

MB = 1_000_000
PAGE = f"""
import sys
from pathlib import Path

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no VmRSS")

if sys.argv[1] == "pin":
    from crawler.allocator import pin_mmap_threshold
    assert pin_mmap_threshold()
first = bytearray({10 * MB})
del first
before = rss()
page = bytearray({10 * MB})
above = [bytearray(1000) for _ in range(100)]
del page
print(rss() - before)
"""


def run_fresh(script: str, *argv: str, env: dict[str, str] | None = None) -> str:
    """``script``'s output in a fresh interpreter, no MALLOC_* inherited (``env`` added)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", script, *argv],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def kept_after_free(mode: str) -> int:
    return int(run_fresh(PAGE, mode).strip().splitlines()[-1])


def test_unpinned_a_freed_page_stays_resident() -> None:
    assert kept_after_free("default") > 8 * MB


def test_pinned_a_freed_page_is_given_back() -> None:
    assert kept_after_free("pin") < 2 * MB


CHILD = """
import subprocess, sys
from crawler.allocator import pin_mmap_threshold
pin_mmap_threshold()
child = "import os; print(os.environ['MALLOC_MMAP_THRESHOLD_'])"
subprocess.run([sys.executable, "-c", child], check=True)
"""


def test_the_parse_helpers_started_after_it_inherit_the_threshold() -> None:
    from crawler.allocator import MMAP_THRESHOLD_BYTES

    assert run_fresh(CHILD).split() == [str(MMAP_THRESHOLD_BYTES)]


KEPT = """
import os
from crawler.allocator import pin_mmap_threshold
print(pin_mmap_threshold(), os.environ["MALLOC_MMAP_THRESHOLD_"])
"""


def test_a_threshold_the_user_set_is_kept() -> None:
    output = run_fresh(KEPT, env={"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert output.split() == ["False", "65536"]
