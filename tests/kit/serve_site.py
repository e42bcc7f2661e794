"""A ``SiteServer`` that keeps serving while a test blocks on a crawler subprocess.

``ThreadedSite`` runs ``sitekit.SiteServer`` on its own event loop in a daemon
thread, so a synchronous test can ``subprocess.run`` the CLI (or wait on a
condition) while the server answers and counts every request.

Run as a script it serves a site described in JSON, for replaying a test by hand::

    python tests/kit/serve_site.py site.json [--port 8000]

where ``site.json`` maps paths to ``Page`` fields, e.g.
``{"/": {"links": ["/a"]}, "/a": {"status": 404}}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from kit.sitekit import Page, Site, SiteServer

START_TIMEOUT_S = 10.0


class ThreadedSite:
    """A SiteServer on a background thread's event loop; a (sync) context manager."""

    def __init__(self, site: Site, host: str = "127.0.0.1") -> None:
        self.site = site
        self._host = host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"site-{host}", daemon=True
        )
        self._server: SiteServer | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> Self:
        self._thread.start()
        self._server = self._call(self._start())
        return self

    async def _start(self) -> SiteServer:
        return await SiteServer(self.site, host=self._host).start()

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            self._call(server.close())
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(START_TIMEOUT_S)
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(START_TIMEOUT_S)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- addresses ---------------------------------------------------------------
    @property
    def server(self) -> SiteServer:
        assert self._server is not None, "ThreadedSite is not running"
        return self._server

    @property
    def origin(self) -> str:
        return self.server.origin

    def url(self, path: str = "/") -> str:
        return self.server.url(path)

    # -- request accounting (safe to read from the test thread) ------------------
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request so far, in arrival order."""
        return [(r.method, r.target) for r in list(self.server.records)]

    def request_count(self) -> int:
        return len(self.server.records)

    def in_flight(self) -> int:
        return self.server.in_flight

    def open_connections(self) -> int:
        return self.server.open_connections

    def counts(self) -> Counter[tuple[str, str]]:
        return Counter(self.requests())

    def reset(self) -> None:
        """Forget the requests so far (on the server's own thread)."""
        self._loop.call_soon_threadsafe(self.server.reset_counts)
        done = threading.Event()
        self._loop.call_soon_threadsafe(done.set)
        done.wait(START_TIMEOUT_S)


def site_from_json(description: dict[str, dict[str, Any]]) -> Site:
    """``{"/path": {Page fields}}`` to a Site."""
    return {path: Page(**fields) for path, fields in description.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a JSON-described site on loopback.")
    parser.add_argument("site", type=Path, help="JSON file: path -> Page fields")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    site = site_from_json(json.loads(args.site.read_text(encoding="utf-8")))

    async def serve() -> None:
        async with SiteServer(site, host=args.host, port=args.port) as server:
            print(f"serving {len(site)} paths on {server.origin}", flush=True)
            await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
