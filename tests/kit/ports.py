"""A loopback port that refuses connections for as long as a test holds it."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A port bound on 127.0.0.1 and never listened on: a connection is refused.

    Held, not released: a port bound and let go at once may be handed to the
    next server that binds port 0 (another test's, in parallel), which then
    answers the link that was to be refused.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
