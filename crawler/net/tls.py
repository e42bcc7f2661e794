"""aiohttp imported without reading the system's CA store, which is read at the first TLS use.

aiohttp builds its two default TLS contexts when ``aiohttp.connector`` is
imported, and each reads every certificate of the system's CA store: that was
a third of aiohttp's import time, paid by every process that imports it
(a crawl through a proxy, one that keeps cookies, the service), including
the many that never open a TLS connection through aiohttp. Here
the import records those contexts instead of loading them, and
``TCPConnector._get_ssl_context`` (where aiohttp picks a context for each TLS
connection, whatever the session) loads them the first time it is asked for
one: the same contexts, the same certificates, before the first handshake.

``import_aiohttp`` runs when ``crawler.net.aio_client`` is first imported,
which the crawler's modules import aiohttp through; a process that imported
aiohttp before that keeps aiohttp's own behaviour. (The crawl's own
connections, ``crawler.net.pool``, make their context at the first https
request.)
"""

from __future__ import annotations

import ssl
import sys
from typing import Any

_pending: list[ssl.SSLContext] = []


def import_aiohttp() -> None:
    """Import aiohttp with its default contexts' CA store loading deferred (once)."""
    if "aiohttp.connector" in sys.modules:
        return

    def defer(context: ssl.SSLContext) -> None:
        _pending.append(context)

    ssl.SSLContext.set_default_verify_paths = defer  # type: ignore[method-assign,assignment]
    try:
        import aiohttp.connector
    finally:
        del ssl.SSLContext.set_default_verify_paths  # the C method shows through again
    if not _pending:
        return
    connector = aiohttp.connector.TCPConnector
    pick = connector._get_ssl_context

    def get_ssl_context(self: aiohttp.connector.TCPConnector, req: Any) -> ssl.SSLContext | None:
        if _pending and req.is_ssl():
            load_ca_store()
        return pick(self, req)

    connector._get_ssl_context = get_ssl_context  # type: ignore[method-assign]


def load_ca_store() -> None:
    """Load the system's CA store into the contexts whose loading was deferred."""
    while _pending:
        _pending.pop().set_default_verify_paths()


def deferred() -> int:
    """How many contexts still wait for the CA store (for tests)."""
    return len(_pending)
