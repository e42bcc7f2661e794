"""A freed 10 MB page leaves the process once the thresholds are pinned (CLI and service);
a page's blocks freed at the heap's top stay for the next one.

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
    from crawler.allocator import pin_malloc_thresholds
    assert pin_malloc_thresholds()
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
from crawler.allocator import pin_malloc_thresholds
pin_malloc_thresholds()
child = "import os; print(os.environ['MALLOC_MMAP_THRESHOLD_'])"
subprocess.run([sys.executable, "-c", child], check=True)
"""


def test_the_parse_helpers_started_after_it_inherit_the_threshold() -> None:
    from crawler.allocator import MMAP_THRESHOLD_BYTES

    assert run_fresh(CHILD).split() == [str(MMAP_THRESHOLD_BYTES)]


KEPT = """
import os
from crawler.allocator import pin_malloc_thresholds
pin_malloc_thresholds()
print(os.environ["MALLOC_MMAP_THRESHOLD_"], os.environ["MALLOC_TRIM_THRESHOLD_"])
"""


def test_a_threshold_the_user_set_is_kept() -> None:
    from crawler.allocator import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES

    output = run_fresh(KEPT, env={"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert output.split() == ["65536", str(TRIM_THRESHOLD_BYTES)]
    output = run_fresh(KEPT, env={"MALLOC_TRIM_THRESHOLD_": "131072"})
    assert output.split() == [str(MMAP_THRESHOLD_BYTES), "131072"]


# A page's blocks (under the mmap threshold, each past glibc's 64 KiB that makes
# a free look at the heap's top) freed top first: with the mmap threshold alone
# pinned (as before the trim threshold was), glibc gives them back at once, to
# take them again for the next page; pinned too, they stay.
HEAP_TOP = """
import ctypes, ctypes.util, sys
from pathlib import Path

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no VmRSS")

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
libc.memset.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
if sys.argv[1] == "pin":
    from crawler.allocator import pin_malloc_thresholds
    assert pin_malloc_thresholds()
else:
    assert libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD only
before = rss()
blocks = [libc.malloc(100_000) for _ in range(30)]
for block in blocks:
    libc.memset(block, 1, 100_000)
for block in reversed(blocks):
    libc.free(block)
print(rss() - before)
"""


def test_a_freed_heap_top_stays_for_the_next_page_once_pinned() -> None:
    assert int(run_fresh(HEAP_TOP, "mmap-only").split()[-1]) < 1 * MB  # the control
    assert int(run_fresh(HEAP_TOP, "pin").split()[-1]) > 2 * MB
