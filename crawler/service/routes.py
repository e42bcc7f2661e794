"""Every route of the service, once: the app is built from this table and the
OpenAPI document is generated from it, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from crawler import report
from crawler.service import dashboard, handlers, stats
from crawler.service.middleware import OPEN_PATHS, WRITE_METHODS
from crawler.service.schemas import (
    CrawlCreate,
    CrawlList,
    CrawlView,
    ErrorBody,
    Health,
    Ready,
    ReportDocument,
    WorkerList,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Param:
    name: str
    location: str  # "path" or "query"
    schema: dict[str, Any]
    description: str
    required: bool = True


@dataclass(frozen=True)
class Answer:
    """One documented response: a model as JSON, and/or other media types."""

    status: int
    description: str
    model: type[BaseModel] | None = None
    media: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    operation_id: str
    summary: str
    tag: str
    answers: tuple[Answer, ...]
    params: tuple[Param, ...] = ()
    body: type[BaseModel] | None = None

    @property
    def writes(self) -> bool:
        return self.method in WRITE_METHODS

    @property
    def needs_token(self) -> bool:
        """Everything but the dashboard's files, the probes and this document
        (``middleware.guard``; ``--public-reads`` opens GET)."""
        return self.writes or not (self.path in OPEN_PATHS or self.path.startswith("/static/"))

    @property
    def documented_answers(self) -> tuple[Answer, ...]:
        """Its own answers and those every route may give (the guard's, 405, 500)."""
        extra = [FORBIDDEN, METHOD_NOT_ALLOWED, INTERNAL]
        if self.needs_token:
            extra.insert(0, UNAUTHORIZED)
        have = {answer.status for answer in self.answers}
        return self.answers + tuple(a for a in extra if a.status not in have)


CRAWL_ID = Param("crawl_id", "path", {"type": "integer", "minimum": 1}, "the crawl's id")
REPORT_FORMAT = Param(
    "format",
    "query",
    {"type": "string", "enum": list(report.FORMATS), "default": handlers.DEFAULT_REPORT_FORMAT},
    "report format, as `crawler report --format`",
    required=False,
)
PAGE_LIMIT = Param(
    "limit",
    "query",
    {"type": "integer", "minimum": 1, "maximum": handlers.MAX_PAGE_SIZE, "default": 100},
    "crawls per page",
    required=False,
)
PAGE_BEFORE = Param(
    "before",
    "query",
    {"type": "integer", "minimum": 1},
    "only crawls with a smaller id (the `next` link sets it)",
    required=False,
)
STATIC_NAME = Param(
    "name", "path", {"type": "string", "enum": sorted(dashboard.STATIC_FILES)}, "file name"
)
TEXT = {"schema": {"type": "string"}}


def error(status: int, description: str) -> Answer:
    return Answer(status, description, ErrorBody)


NOT_FOUND = error(404, "no such crawl")
UNAUTHORIZED = error(401, "missing or wrong bearer token")
FORBIDDEN = error(
    403,
    "a Host header that is neither loopback nor --allowed-host, a cross-origin write, "
    "or (with --no-token) a request forwarded by a proxy",
)
METHOD_NOT_ALLOWED = error(405, "the path does not take this method (see Allow)")
INTERNAL = error(500, "an internal error; the service log has the details")
CONFLICT = error(409, "not possible in the crawl's state")


def _transition(action: str, handler: Handler, summary: str) -> Route:
    return Route(
        "POST",
        f"/crawls/{{crawl_id}}/{action}",
        handler,
        f"{action}_crawl",
        summary,
        "crawls",
        (Answer(200, "the crawl", CrawlView), UNAUTHORIZED, FORBIDDEN, NOT_FOUND, CONFLICT),
        (CRAWL_ID,),
    )


ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/crawls",
        handlers.list_crawls,
        "list_crawls",
        "Crawls, newest first, with live progress; a page at a time (`next`)",
        "crawls",
        (Answer(200, "the crawls", CrawlList), error(400, "invalid limit or before")),
        (PAGE_LIMIT, PAGE_BEFORE),
    ),
    Route(
        "POST",
        "/crawls",
        handlers.create_crawl,
        "create_crawl",
        "Start a crawl (queued when --max-running crawls are running)",
        "crawls",
        (
            Answer(201, "created", CrawlView),
            error(400, "the body is not JSON"),
            UNAUTHORIZED,
            error(408, "the body did not arrive within --read-timeout"),
            FORBIDDEN,
            error(413, "body too large"),
            error(415, "body not sent as application/json"),
            error(422, "a field is invalid; `field` names it"),
            error(429, "too many crawls queued"),
        ),
        body=CrawlCreate,
    ),
    Route(
        "GET",
        "/crawls/{crawl_id}",
        handlers.get_crawl,
        "get_crawl",
        "One crawl: state and live counters",
        "crawls",
        (Answer(200, "the crawl", CrawlView), NOT_FOUND),
        (CRAWL_ID,),
    ),
    Route(
        "DELETE",
        "/crawls/{crawl_id}",
        handlers.delete_crawl,
        "delete_crawl",
        "Stop a crawl if it runs, and delete it with its data",
        "crawls",
        (Answer(204, "deleted"), UNAUTHORIZED, FORBIDDEN, NOT_FOUND, CONFLICT),
        (CRAWL_ID,),
    ),
    Route(
        "GET",
        "/crawls/{crawl_id}/workers",
        handlers.crawl_workers,
        "crawl_workers",
        "The processes working on a running crawl, with their rates (on PostgreSQL "
        "`crawler work --service` processes on other machines too)",
        "crawls",
        (Answer(200, "the crawl's workers; none unless it runs", WorkerList), NOT_FOUND),
        (CRAWL_ID,),
    ),
    Route(
        "GET",
        "/crawls/{crawl_id}/stats",
        stats.crawl_stats,
        "crawl_stats",
        "Per-host statistics (requests, failures, status classes, mean latency), why URLs "
        "were not requested (with counts), and seeds refused as private addresses",
        "crawls",
        (
            Answer(200, "the statistics", stats.CrawlStatsView),
            NOT_FOUND,
            error(409, "the crawl has not started yet"),
        ),
        (CRAWL_ID,),
    ),
    _transition("pause", handlers.pause_crawl, "Pause a queued or running crawl"),
    _transition("resume", handlers.resume_crawl, "Queue a paused or failed crawl again"),
    _transition("cancel", handlers.cancel_crawl, "Stop a crawl for good (its report stays)"),
    Route(
        "GET",
        "/crawls/{crawl_id}/report",
        handlers.crawl_report,
        "crawl_report",
        "The crawl's report, in any format of `crawler report` (during the crawl too)",
        "crawls",
        (
            Answer(
                200,
                "the report: JSON for format=json, text for the others",
                ReportDocument,
                media={
                    handlers.media_type(fmt): TEXT
                    for fmt in report.FORMATS
                    if handlers.media_type(fmt) != "application/json"
                },
            ),
            error(400, "unknown format"),
            NOT_FOUND,
            error(409, "the crawl has not started yet"),
            error(500, "the crawl's database cannot be read (the log says why)"),
        ),
        (CRAWL_ID, REPORT_FORMAT),
    ),
    Route(
        "GET",
        "/healthz",
        handlers.healthz,
        "healthz",
        "The process is alive",
        "operations",
        (Answer(200, "alive", Health),),
    ),
    Route(
        "GET",
        "/readyz",
        handlers.readyz,
        "readyz",
        "The data directory is writable and the index readable",
        "operations",
        (Answer(200, "ready", Ready), Answer(503, "not ready", Ready)),
    ),
    Route(
        "GET",
        "/metrics",
        handlers.metrics,
        "metrics",
        "Prometheus metrics",
        "operations",
        (Answer(200, "text exposition format", media={"text/plain": TEXT}),),
    ),
    Route(
        "GET",
        "/openapi.json",
        handlers.openapi_json,
        "openapi",
        "This document",
        "operations",
        (Answer(200, "OpenAPI 3.1", media={"application/json": {"schema": {"type": "object"}}}),),
    ),
    Route(
        "GET",
        "/",
        dashboard.index,
        "dashboard",
        "The dashboard",
        "dashboard",
        (Answer(200, "HTML page", media={"text/html": TEXT}),),
    ),
    Route(
        "GET",
        "/static/{name}",
        dashboard.static_file,
        "static_file",
        "The dashboard's scripts and styles",
        "dashboard",
        (
            Answer(
                200,
                "the file",
                media={media: TEXT for media in sorted(set(dashboard.STATIC_FILES.values()))},
            ),
            error(404, "no such file"),
        ),
        (STATIC_NAME,),
    ),
)

# The definitions' routes use the types above, so they are added last.
from crawler.service.definition_routes import DEFINITION_ROUTES  # noqa: E402

ROUTES = ROUTES + DEFINITION_ROUTES
