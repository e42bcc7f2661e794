"""Running a coroutine on the fastest event loop available.

uvloop (libuv) runs the crawler's network and timer work at roughly twice the
speed of the standard loop; where it is not installed the standard loop is used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None for asyncio's default."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop when it is there."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
