"""Large blocks go back to the system when freed, so memory follows the pages in flight;
the heap's top stays, so a page's small blocks are not given back and taken again.

glibc's malloc raises its mmap threshold each time a large block is freed
(up to 32 MiB on 64-bit): after the first page of a few megabytes, later
bodies, their texts and the frames to the parse helpers are carved from the
heap, and a heap freed in the middle stays resident. The service's budget
(``crawler.service.budget``) gives a page's bytes back when the page is
done, and a crawl of large pages would otherwise keep them: the service
drifted above its plan, a CLI crawl of the Python docs above its own peak.

``pin_malloc_thresholds`` fixes the mmap threshold (``mallopt``, and
``MALLOC_MMAP_THRESHOLD_`` for the processes started after it: parse
helpers, workers): a block past it lives in an mmap of its own, unmapped on
free. At 1 MiB whole pages go back; smaller blocks stay in the heap, where
reusing them costs no system call (at glibc's starting 128 KiB, the docs'
crawl paid up to a tenth more CPU for mmaps).

A pinned mmap threshold also pins the trim threshold, at 128 KiB: each page
parsed (the parser's tree, the links) freed more than that at the heap's top,
which went back to the system and was taken again for the next page, two
system calls and fresh zeroed memory a page in every process.
``MALLOC_TRIM_THRESHOLD_`` at 4 MiB keeps that much free at the top.

A threshold the user set in the environment is kept. Not glibc (musl,
macOS): a no-op. Called by the CLI's crawl commands and the service, never
by the library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

MMAP_THRESHOLD_BYTES = 1 << 20
TRIM_THRESHOLD_BYTES = 4 << 20
_M_TRIM_THRESHOLD = -1  # from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_MMAP_ENVIRONMENT = "MALLOC_MMAP_THRESHOLD_"
_TRIM_ENVIRONMENT = "MALLOC_TRIM_THRESHOLD_"


def pin_malloc_thresholds(
    mmap_threshold: int = MMAP_THRESHOLD_BYTES, trim_threshold: int = TRIM_THRESHOLD_BYTES
) -> bool:
    """Fix both thresholds here and for the processes started from now on.

    False when this is not glibc. A threshold the environment already sets
    (glibc applied it at start) is left as it is.
    """
    mallopt = _mallopt()
    if mallopt is None:
        return False
    for option, name, value in (
        (_M_MMAP_THRESHOLD, _MMAP_ENVIRONMENT, mmap_threshold),
        (_M_TRIM_THRESHOLD, _TRIM_ENVIRONMENT, trim_threshold),
    ):
        if name not in os.environ and mallopt(option, value):
            os.environ[name] = str(value)
    return True


def _mallopt() -> Callable[[int, int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt
