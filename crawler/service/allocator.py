"""Large blocks go back to the system when freed, so the service's memory follows its budget.

glibc's malloc raises its mmap threshold each time a large block is freed
(up to 32 MiB on 64-bit): after the first 10 MB page, later bodies, texts and
pipe frames are carved from the heap, and a heap that is freed in the middle
stays resident. The budget (``crawler.service.budget``) gives back a page's
bytes when the page is done; without a fixed threshold the process does not,
and a service crawling large pages drifts above its plan. Fixing the
threshold (``mallopt``, and ``MALLOC_MMAP_THRESHOLD_`` for the parse helpers
the service starts) keeps every block above it in an mmap of its own,
unmapped on free. Small objects are untouched. Not glibc (musl, macOS): a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value
_M_MMAP_THRESHOLD = -3  # from glibc's malloc.h
_ENVIRONMENT_NAME = "MALLOC_MMAP_THRESHOLD_"


def pin_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix the threshold here and in the processes started from now on; False when not glibc."""
    os.environ.setdefault(_ENVIRONMENT_NAME, str(threshold))
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
