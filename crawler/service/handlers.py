"""The JSON API and the operations endpoints: one small function per route.

Handlers validate input with the ``schemas`` models, ask the ``CrawlManager``,
and answer with a model; every failure is an ``ApiError``. Reports and
readiness are read through the manager's ``ServiceStore``, whichever backend
it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

import orjson
import pydantic
import structlog
from aiohttp import web

from crawler import redact, report
from crawler.config import CrawlSettings
from crawler.errors import StoreError, UsageError
from crawler.net import locations
from crawler.service.config import MAX_BODY_BYTES
from crawler.service.manager import ConflictError, CrawlNotFoundError, QueueFullError
from crawler.service.metrics import CONTENT_TYPE
from crawler.service.safety import (
    check_guard_asked,
    check_limits,
    check_render_available,
    guard_settings,
    nul_at,
    redact_settings,
)
from crawler.service.schemas import (
    CrawlCreate,
    CrawlList,
    CrawlView,
    ErrorDetail,
    Health,
    Ready,
    ServiceCrawlSettings,
    WorkerList,
)
from crawler.service.state import OPENAPI, SERVICE, ApiError, Service, field_path
from crawler.settings_model import SettingsError
from crawler.store.service import Entry

MEDIA_TYPES = {
    "json": "application/json",
    "text": "text/plain",
    "csv": "text/csv",
    "markdown": "text/markdown",
    "html": "text/html",
    "xml": "application/xml",
    "junit": "application/xml",
    "sarif": "application/sarif+json",
}
DEFAULT_REPORT_FORMAT = "json"
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
log = structlog.get_logger(__name__)


def media_type(fmt: str) -> str:
    """Content type of a report format (plain text for one we do not know)."""
    return MEDIA_TYPES.get(fmt, "text/plain")


def _service(request: web.Request) -> Service:
    return request.app[SERVICE]


def as_json(model: pydantic.BaseModel, status: int = 200, **headers: str) -> web.Response:
    return web.json_response(model.model_dump(mode="json"), status=status, headers=headers)


def _crawl_id(request: web.Request) -> int:
    raw = request.match_info["crawl_id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise ApiError(404, f"no crawl with id {raw[:40]!r}", field="crawl_id")
    return int(raw)


def _entry(service: Service, crawl_id: int) -> Entry:
    try:
        return service.manager.get(crawl_id)
    except CrawlNotFoundError:
        raise ApiError(404, f"no crawl with id {crawl_id}", field="crawl_id") from None


# For the handlers of other modules (stats): one parser of ids, one 404.
crawl_id_of = _crawl_id
entry_of = _entry


def timestamp(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, tz=dt.UTC)


async def crawl_view(service: Service, entry: Entry) -> CrawlView:
    manager = service.manager
    created = timestamp(entry.created_at)
    assert created is not None
    return CrawlView(
        id=entry.id,
        state=manager.shown_state(entry),  # type: ignore[arg-type]  # one of CrawlState
        seeds=redact.values(entry.seeds),
        settings=redact.values(redact_settings(entry.settings)),
        created_at=created,
        started_at=timestamp(entry.started_at),
        finished_at=timestamp(entry.finished_at),
        queue_position=manager.queue_position(entry),
        error=None if entry.error is None else redact.credentials(entry.error),
        progress=await manager.progress(entry),
        workers=manager.workers(entry),
        report_url=f"/crawls/{entry.id}/report",
    )


# -- crawls ---------------------------------------------------------------------------


async def list_crawls(request: web.Request) -> web.Response:
    service = _service(request)
    manager = service.manager
    limit = _query_int(request, "limit", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
    before = _query_int(request, "before", 0, 0, 10**18)  # 0: from the newest
    newest_first = [e for e in manager.entries() if not before or e.id < before]
    page = newest_first[:limit]
    views = [await crawl_view(service, entry) for entry in page]
    more = len(newest_first) > limit
    return as_json(
        CrawlList(
            crawls=views,
            running=manager.count("running"),
            queued=manager.count("queued"),
            max_running=service.config.max_running,
            total=len(manager.entries()),
            next=f"/crawls?limit={limit}&before={page[-1].id}" if more and page else None,
        )
    )


def _query_int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError(
            400, f"invalid {name} {raw[:40]!r}: an integer from {low} to {high}", field=name
        )
    return int(raw)


async def create_crawl(request: web.Request) -> web.Response:
    service = _service(request)
    body = await read_json_body(request)
    try:
        create = CrawlCreate.model_validate_json(
            body,
            context=validation_context(service),
        )
    except pydantic.ValidationError as exc:
        raise ApiError.from_validation(exc) from None
    recorded = recorded_settings(service, create.settings)
    try:
        entry = await service.manager.create(list(create.seeds), recorded)
    except QueueFullError as exc:
        raise ApiError(429, str(exc)) from None
    view = await crawl_view(service, entry)
    return as_json(view, 201, Location=f"/crawls/{entry.id}")


def validation_context(service: Service) -> dict[str, object]:
    """What the seed validators need to know of the operator's settings."""
    return {
        "allow_private": service.config.allow_private,
        "allow_networks": service.config.allow_networks,
        "local_roots": service.config.local_roots,
    }


def recorded_settings(service: Service, settings: ServiceCrawlSettings) -> dict[str, object]:
    """The settings as recorded with a crawl: guarded, within the operator's limits;
    a 422 naming the field otherwise."""
    try:
        asked = settings.model_dump(mode="json")
        check_guard_asked(
            asked, settings.model_fields_set, allow_private=service.config.allow_private
        )
        check_limits(
            asked,
            max_concurrency=service.config.max_crawl_concurrency,
            max_host=service.config.max_host_concurrency,
        )
        guarded = guard_settings(
            asked,
            allow_private=service.config.allow_private,
            allow_networks=service.config.allow_networks,
        )
        validated = CrawlSettings.model_validate(guarded)
        check_render_available(validated)
        recorded = validated.model_dump(mode="json")
    except ValueError as exc:  # pydantic.ValidationError and SettingsError are ones too
        if isinstance(exc, pydantic.ValidationError):
            raise ApiError.from_validation(exc, prefix="settings") from None
        if isinstance(exc, SettingsError):
            raise ApiError.from_settings(exc, prefix="settings") from None
        name, _, message = str(exc).partition(": ")
        field = f"settings.{name}"
        detail = ErrorDetail(field=field, message=message, type="not_allowed")
        raise ApiError(422, f"invalid {field}: {message}", field=field, details=[detail]) from None
    return recorded


async def read_json_body(request: web.Request) -> bytes:
    if request.content_type != "application/json":
        raise ApiError(415, "send the body as application/json", field="Content-Type")
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    timeout_s = _service(request).config.read_timeout_s
    try:
        async with asyncio.timeout(timeout_s):
            body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, f"request body larger than {MAX_BODY_BYTES} bytes") from None
    except TimeoutError:
        raise ApiError(408, f"request body not received within {timeout_s:g} s") from None
    _refuse_nul(body)
    return body


def _refuse_nul(body: bytes) -> None:
    """422 for a NUL in any string of the body (malformed JSON is the validator's 400)."""
    if b"\\u0000" not in body:  # how JSON writes a NUL in a string
        return
    try:
        where = nul_at(orjson.loads(body))
    except orjson.JSONDecodeError:
        return
    if where is not None:
        message = "NUL characters (\\u0000) are not allowed"
        raise ApiError.unprocessable(
            [ErrorDetail(field=field_path(where), message=message, type="value_error")]
        )


async def get_crawl(request: web.Request) -> web.Response:
    service = _service(request)
    return as_json(await crawl_view(service, _entry(service, _crawl_id(request))))


async def crawl_workers(request: web.Request) -> web.Response:
    service = _service(request)
    entry = _entry(service, _crawl_id(request))
    manager = service.manager
    return as_json(
        WorkerList(
            crawl_id=entry.id,
            state=manager.shown_state(entry),  # type: ignore[arg-type]  # one of CrawlState
            workers=manager.workers(entry),
        )
    )


async def delete_crawl(request: web.Request) -> web.Response:
    service = _service(request)
    entry = _entry(service, _crawl_id(request))
    try:
        await service.manager.delete(entry.id)
    except ConflictError as exc:
        raise ApiError(409, str(exc)) from None
    return web.Response(status=204)


async def pause_crawl(request: web.Request) -> web.Response:
    return await _transition(request, "pause")


async def resume_crawl(request: web.Request) -> web.Response:
    return await _transition(request, "resume")


async def cancel_crawl(request: web.Request) -> web.Response:
    return await _transition(request, "cancel")


async def _transition(request: web.Request, action: str) -> web.Response:
    service = _service(request)
    entry = _entry(service, _crawl_id(request))
    change = {
        "pause": service.manager.pause,
        "resume": service.manager.resume,
        "cancel": service.manager.cancel,
    }[action]
    try:
        entry = await change(entry.id)
    except ConflictError as exc:
        raise ApiError(409, str(exc)) from None
    return as_json(await crawl_view(service, entry))


async def crawl_report(request: web.Request) -> web.Response:
    service = _service(request)
    entry = _entry(service, _crawl_id(request))
    fmt = request.query.get("format", DEFAULT_REPORT_FORMAT)
    if fmt not in report.FORMATS:
        raise ApiError(
            400,
            f"invalid format {fmt[:40]!r}: choose from {', '.join(report.FORMATS)}",
            field="format",
        )
    try:
        data = await service.manager.store.load_report(entry.id, fmt)
    except StoreError as exc:  # corrupt, foreign, unreadable: the operator's to look at
        log.error("report_unreadable", crawl_id=entry.id, error=str(exc))
        raise ApiError(500, f"crawl {entry.id}: its database cannot be read; see the log") from None
    except UsageError:  # created a moment ago: no crawl row yet (the reason may name paths)
        raise ApiError(409, f"crawl {entry.id}: no report yet") from None
    if data is None:
        raise ApiError(409, f"crawl {entry.id} has not started yet; no report")
    # A crawl of a directory under --local-root: files named from that directory, with
    # the line and column of each broken link, as the CLI names them (disk reads: a thread).
    data = await asyncio.to_thread(locations.report_named, data)
    # A SQLite crawl file holds one crawl, numbered 1 inside it: the report shows the
    # service's id, the one the client knows.
    data = dataclasses.replace(data, crawl=dataclasses.replace(data.crawl, id=entry.id))
    text = report.render(data, fmt)
    return web.Response(text=text, content_type=media_type(fmt), charset="utf-8")


# -- operations -------------------------------------------------------------------------


async def healthz(request: web.Request) -> web.Response:
    return as_json(Health(status="ok"))


async def readyz(request: web.Request) -> web.Response:
    service = _service(request)
    checks: dict[str, str] = {}
    try:
        await service.manager.store.ping()
        checks["storage"] = "ok"
    except Exception as exc:
        checks["storage"] = f"cannot use {service.manager.store.describe()}: {exc}"
    checks["accepting"] = "shutting down" if service.stopping else "ok"
    ready = all(value == "ok" for value in checks.values())
    return as_json(Ready(ready=ready, checks=checks), 200 if ready else 503)


async def metrics(request: web.Request) -> web.Response:
    body = _service(request).metrics.render()
    response = web.Response(body=body)
    response.headers["Content-Type"] = CONTENT_TYPE
    return response


async def openapi_json(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI])
