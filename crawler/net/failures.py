"""How a request over the crawl's own HTTP client fails, as exceptions the fetcher classifies.

Kept apart from ``crawler.net.http1`` and ``crawler.net.pool``, which are
compiled by mypyc (``setup.py``): mypyc cannot compile a class deriving from
``ConnectionError`` or ``OSError``, and these must stay such, so that code
catching ``OSError`` around a request still does.
"""

from __future__ import annotations


class ResponseError(Exception):
    """The answer broke HTTP: a parse error, a header block too large, a bad encoding."""


class Disconnected(ConnectionError):
    """The server closed the connection before its answer ended."""

    def __init__(self, *, answered: bool) -> None:
        super().__init__(
            "server disconnected" + (" in the middle of its answer" if answered else "")
        )
        self.answered = answered  # False: not a byte came back, the request may be sent again


class ConnectFailed(ConnectionError):
    """No address of the host accepted a connection."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(f"cannot connect to {host}:{port}: {cause.strerror or cause}")
        self.host, self.port, self.cause = host, port, cause


class NameNotResolved(OSError):
    """The host's name did not resolve (``socket.gaierror`` underneath)."""

    def __init__(self, host: str, cause: OSError) -> None:
        super().__init__(f"{host}: {cause.strerror or cause}")
