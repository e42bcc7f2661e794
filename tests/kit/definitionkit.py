"""An in-process service for the definition tests: a clock the test moves, both backends,
and a loopback webhook receiver that records what it got."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from crawler.service.app import build_app
from crawler.service.config import ServiceConfig
from crawler.service.state import SERVICE, Service

from kit import pgkit
from kit.servicekit import TOKEN
from kit.sitekit import wait_until

AUTH = {"Authorization": f"Bearer {TOKEN}"}
T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC


@dataclasses.dataclass
class FakeClock:
    now: float = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclasses.dataclass
class Harness:
    client: TestClient[web.Request, web.Application]
    service: Service
    clock: FakeClock

    async def call(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        headers = dict(AUTH) if auth else {}
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        response = await self.client.request(method, path, **kwargs)
        text = await response.text()
        is_json = text and "json" in response.content_type
        return response.status, (json.loads(text) if is_json else text)

    async def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        got, data = await self.call(method, path, body)
        assert got == status, (got, data)
        return data

    async def wait_run(self, crawl_id: int, state: str = "finished", bound_s: float = 30) -> None:
        manager = self.service.manager

        def reached() -> bool:
            entry = manager.get(crawl_id)
            return entry.state == state and crawl_id not in manager._running

        await wait_until(reached, timeout=bound_s, message=f"crawl {crawl_id} {state}")
        await wait_until(lambda: not manager._hooks, timeout=bound_s, message="hooks done")

    async def tick(self) -> list[int]:
        return await self.service.scheduler.tick()


def config(data_dir: Path, db: str | None, **extra: Any) -> ServiceConfig:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "db": db,
        "token": TOKEN,
        "allow_private": True,
        "shutdown_timeout_s": 2,
        "max_running": 2,
    }
    values.update(extra)
    return ServiceConfig(**values)


async def harness(cfg: ServiceConfig) -> AsyncIterator[Harness]:
    app = build_app(cfg)
    service = app[SERVICE]
    clock = FakeClock()
    service.scheduler.clock = clock
    service.scheduler.webhooks.clock = clock
    async with TestClient(TestServer(app)) as client:
        yield Harness(client, service, clock)


def backend_db(backend: str) -> tuple[str | None, str | None]:
    """(db for the config, database to drop afterwards)."""
    if backend == "sqlite":
        return None, None
    pgkit.require_postgres()
    url = pgkit.create_database()
    return url, url


@dataclasses.dataclass
class Receiver:
    """A webhook target on loopback: answers ``statuses`` in turn (then 200)."""

    statuses: list[int] = dataclasses.field(default_factory=list)
    got: list[tuple[dict[str, str], bytes]] = dataclasses.field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.got.append((dict(request.headers), await request.read()))
        status = self.statuses.pop(0) if self.statuses else 200
        return web.Response(status=status, text="ok")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        return app
