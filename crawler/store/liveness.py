"""Which workers of a crawl are alive: the one rule both backends apply at reclaim.

A worker row whose heartbeat is stale, or whose pid is gone on this machine,
is dead and its leases can be taken over at once. A row with our own pid but
a token no engine of this process holds belongs to an earlier process that
had the same pid (PID 1 in a restarted container): dead too.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from typing import Any

# Owner tokens of the engines running in this process.
LIVE_TOKENS: set[str] = set()


def dead_workers(rows: Iterable[Any], now: float, stale_after_s: float) -> list[str]:
    """Tokens of dead workers among (token, pid, hostname, heartbeat_at) rows."""
    me = socket.gethostname()
    dead = []
    for token, pid, hostname, heartbeat_at in rows:
        if token in LIVE_TOKENS:
            continue
        gone = pid == os.getpid() or not pid_alive(pid)
        if heartbeat_at < now - stale_after_s or (hostname == me and gone):
            dead.append(token)
    return dead


def pid_alive(pid: int) -> bool:
    """Is there a process with this pid on this machine?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
