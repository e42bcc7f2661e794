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


def kept_after_free(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", PAGE, mode], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


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

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(MMAP_THRESHOLD_BYTES)]


KEPT = """
import os
from crawler.allocator import pin_mmap_threshold
print(pin_mmap_threshold(), os.environ["MALLOC_MMAP_THRESHOLD_"])
"""


def test_a_threshold_the_user_set_is_kept() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    done = subprocess.run(
        [sys.executable, "-c", KEPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "65536"]
