"""Shared fixtures: clean CRAWLER_ environment, loopback site and hostile servers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from kit.sitekit import HostileServer, Site, SiteServer, wait_until, wait_until_sync

__all__ = ["wait_until", "wait_until_sync"]
# any_db (both backends) and pg_url (a fresh PostgreSQL database) for every test module.
pytest_plugins = ["kit.pgkit"]  # re-exported; import them from sitekit

MakeSite = Callable[..., Awaitable[SiteServer]]
# `make test-compiled`: the suite on the modules setup.py compiles with mypyc.
COMPILED_RUN = bool(os.environ.get("CRAWLER_EXPECT_COMPILED"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On the compiled build, leave out tests that replace a compiled function.

    Compiled code calls its compiled neighbours directly, not through the
    module or class a test patches: such a test would not test what it says.
    """
    if not COMPILED_RUN:
        return
    skip = pytest.mark.skip(reason="replaces a function compiled callers call directly")
    for item in items:
        if item.get_closest_marker("patches_compiled"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _clean_crawler_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No CRAWLER_* variable reaches a test, and none set by a test outlives it."""
    for name in [n for n in os.environ if n.startswith("CRAWLER_")]:
        monkeypatch.delenv(name)
    yield
    for name in [n for n in os.environ if n.startswith("CRAWLER_")]:
        del os.environ[name]  # set directly by the test, so monkeypatch won't undo it


@pytest.fixture
async def site_server() -> AsyncIterator[MakeSite]:
    """Factory: ``server = await site_server(site, host="127.0.0.2")``; all closed at teardown."""
    servers: list[SiteServer] = []

    async def make_site(site: Site, host: str = "127.0.0.1", port: int = 0) -> SiteServer:
        server = SiteServer(site, host=host, port=port)
        await server.start()
        servers.append(server)
        return server

    yield make_site
    for server in reversed(servers):
        await server.close()


@pytest.fixture
async def hostile_server() -> AsyncIterator[HostileServer]:
    async with HostileServer() as server:
        yield server
