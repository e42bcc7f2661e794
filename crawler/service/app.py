"""The aiohttp application, and serving it until SIGTERM.

``build_app`` wires the routes of ``routes.ROUTES`` (the same table the
OpenAPI document comes from), the middlewares and the lifecycle: the crawl
manager opens when the app starts, which resumes interrupted crawls, and
closes when it stops, which stops every run gracefully.

``serve`` listens, logs ``service_listening`` with the bound port (so
``--port 0`` is usable), and on SIGTERM or SIGINT stops accepting requests,
stops the crawls (their leases are released) and returns. A second signal
exits at once; SQLite stays consistent either way.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator

import structlog
from aiohttp import web

from crawler.allocator import pin_malloc_thresholds
from crawler.service import dashboard, openapi
from crawler.service.config import MAX_BODY_BYTES, ServiceConfig
from crawler.service.connections import ConnectionGuard
from crawler.service.lowlevel import json_errors
from crawler.service.middleware import errors, guard
from crawler.service.routes import ROUTES
from crawler.service.state import OPENAPI, SERVICE, Service

log = structlog.get_logger(__name__)

HTTP_SHUTDOWN_TIMEOUT_S = 2.0
EXIT_SIGTERM = 143
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def build_app(config: ServiceConfig) -> web.Application:
    """The application; nothing starts until it is run."""
    app = web.Application(middlewares=[errors, guard], client_max_size=MAX_BODY_BYTES)
    app[SERVICE] = Service.create(config)
    app[OPENAPI] = openapi.document()
    app[dashboard.STATIC] = dashboard.load_static()
    for route in ROUTES:
        app.router.add_route(route.method, route.path, route.handler, name=route.operation_id)
    app.cleanup_ctx.append(_crawls)
    app.on_shutdown.append(_refuse_readiness)
    app.on_response_prepare.append(_security_headers)
    return app


async def _crawls(app: web.Application) -> AsyncIterator[None]:
    manager = app[SERVICE].manager
    scheduler = app[SERVICE].scheduler
    await manager.open()
    await scheduler.open()
    yield
    await scheduler.close()
    await manager.close()


async def _refuse_readiness(app: web.Application) -> None:
    app[SERVICE].stopping = True


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


async def serve(config: ServiceConfig) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    # Crawl databases hold credentials (headers, basic auth, cookies): this
    # user's only, whatever the umask the service was started with.
    os.umask(0o077)
    pin_malloc_thresholds()  # freed pages leave the process: the memory budget holds
    for directory in (config.data_dir, config.crawls_dir):
        if directory.is_dir():
            directory.chmod(0o700)
    app = build_app(config)
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        shutdown_timeout=HTTP_SHUTDOWN_TIMEOUT_S,
        keepalive_timeout=config.read_timeout_s,
    )
    stop = asyncio.Event()
    received: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if received:
            os._exit(EXIT_SIGTERM)  # a second signal: now; the crawl databases stay consistent
        received.append(signum)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    await runner.setup()
    assert runner.server is not None
    json_errors(runner.server)  # aiohttp's own 400s too
    ConnectionGuard(
        runner.server,
        max_connections=config.max_connections,
        read_timeout_s=config.read_timeout_s,
    )
    try:
        site = web.TCPSite(runner, config.host, config.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        log.info(
            "service_listening",
            host=host,
            port=port,
            storage=app[SERVICE].manager.store.describe(),
            max_running=config.max_running,
            token=config.token is not None,
            public_reads=config.public_reads,
            allowed_hosts=config.allowed_hosts,
        )
        await stop.wait()
        log.info("service_stopping", signal=signal.Signals(received[0]).name)
    finally:
        app[SERVICE].stopping = True
        await runner.cleanup()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    log.info("service_stopped")
