"""Large blocks go back to the system when freed, so memory follows the pages in flight.

glibc's malloc raises its mmap threshold each time a large block is freed
(up to 32 MiB on 64-bit): after the first page of a few megabytes, later
bodies, their texts and the frames to the parse helpers are carved from the
heap, and a heap freed in the middle stays resident. The service's budget
(``crawler.service.budget``) gives a page's bytes back when the page is
done, and a crawl of large pages would otherwise keep them: the service
drifted above its plan, a CLI crawl of the Python docs above its own peak.

``pin_mmap_threshold`` fixes the threshold (``mallopt``, and
``MALLOC_MMAP_THRESHOLD_`` for the processes started after it: parse
helpers, workers): a block past it lives in an mmap of its own, unmapped on
free. At 1 MiB whole pages go back; smaller blocks stay in the heap, where
reusing them costs no system call (at glibc's starting 128 KiB, the docs'
crawl paid up to a tenth more CPU for mmaps). A threshold the user set in the
environment is kept. Not glibc (musl, macOS): a no-op. Called by the CLI's
crawl commands and the service, never by the library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

MMAP_THRESHOLD_BYTES = 1 << 20
_M_MMAP_THRESHOLD = -3  # from glibc's malloc.h
_ENVIRONMENT_NAME = "MALLOC_MMAP_THRESHOLD_"


def pin_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix the threshold here and for the processes started from now on.

    False when the environment already sets one (glibc applied it at start)
    or when this is not glibc.
    """
    if _ENVIRONMENT_NAME in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not mallopt(_M_MMAP_THRESHOLD, threshold):
        return False
    os.environ[_ENVIRONMENT_NAME] = str(threshold)
    return True
