"""The API of crawl definitions: one small function per route (``routes``).

Same rules as the crawl endpoints (``handlers``): the body is read and
validated the same way (strict types, 422 naming the field), the settings go
through the same guard and operator limits, and every failure is an
``ApiError``.
"""

from __future__ import annotations

import datetime as dt

import pydantic
from aiohttp import web

from crawler import redact
from crawler.report.diff import CrawlDiff
from crawler.report.model import BrokenLink
from crawler.service.definition_schemas import (
    DefinitionCreate,
    DefinitionList,
    DefinitionView,
    DeliveryList,
    DeliveryView,
    DiffCounts,
    DiffView,
    RunList,
    WebhookView,
)
from crawler.service.diffs import diff_of
from crawler.service.handlers import (
    as_json,
    crawl_view,
    read_json_body,
    recorded_settings,
    timestamp,
    validation_context,
)
from crawler.service.manager import ConflictError
from crawler.service.safety import redact_settings
from crawler.service.scheduler import DefinitionNotFoundError
from crawler.service.schemas import ReportBrokenLink
from crawler.service.state import SERVICE, ApiError, Service
from crawler.store.service import Definition, Entry


def _service(request: web.Request) -> Service:
    return request.app[SERVICE]


def path_id(request: web.Request, name: str = "definition_id") -> int:
    raw = request.match_info[name]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise ApiError(404, f"no definition with id {raw[:40]!r}", field=name)
    return int(raw)


def definition_of(service: Service, definition_id: int) -> Definition:
    try:
        return service.scheduler.get(definition_id)
    except DefinitionNotFoundError:
        message = f"no definition with id {definition_id}"
        raise ApiError(404, message, field="definition_id") from None


def definition_view(service: Service, definition: Definition) -> DefinitionView:
    spec = definition.spec
    runs = service.manager.runs_of(definition.id)
    active = service.scheduler.active_run(definition.id)
    finished = next((r for r in runs if r.state == "finished"), None)
    webhook = spec.get("webhook")
    created, updated = timestamp(definition.created_at), timestamp(definition.updated_at)
    assert created is not None
    assert updated is not None
    base = f"/definitions/{definition.id}"
    return DefinitionView(
        id=definition.id,
        name=spec.get("name", ""),
        seeds=redact.values(spec["seeds"]),
        settings=redact.values(redact_settings(spec["settings"])),
        schedule=spec["schedule"],
        keep_runs=spec["keep_runs"],
        webhook=None
        if not webhook
        else WebhookView(url=redact.credentials(webhook["url"]), has_secret=True),
        created_at=created,
        updated_at=updated,
        next_run_at=_finite_time(definition.next_run_at),
        active_run=None if active is None else active.id,
        last_finished_run=None if finished is None else finished.id,
        runs_url=f"{base}/runs",
        diff_url=f"{base}/diff",
        dashboard_url=f"/#/definitions/{definition.id}",  # the dashboard's view of it
    )


def _finite_time(value: float | None) -> dt.datetime | None:
    return None if value is None or value == float("inf") else timestamp(value)


async def _read_spec(request: web.Request, service: Service) -> dict[str, object]:
    body = await read_json_body(request)
    try:
        create = DefinitionCreate.model_validate_json(body, context=validation_context(service))
    except pydantic.ValidationError as exc:
        raise ApiError.from_validation(exc) from None
    spec = create.model_dump(mode="json", exclude={"settings"})
    spec["settings"] = recorded_settings(service, create.settings)
    spec["schedule"] = create.schedule.model_dump(mode="json", exclude_none=True)
    return spec


# -- definitions --------------------------------------------------------------------------


async def list_definitions(request: web.Request) -> web.Response:
    service = _service(request)
    views = [definition_view(service, d) for d in service.scheduler.definitions()]
    return as_json(DefinitionList(definitions=views))


async def create_definition(request: web.Request) -> web.Response:
    service = _service(request)
    spec = await _read_spec(request, service)
    definition = await service.scheduler.create(spec)
    view = definition_view(service, definition)
    return as_json(view, 201, Location=f"/definitions/{definition.id}")


async def get_definition(request: web.Request) -> web.Response:
    service = _service(request)
    return as_json(definition_view(service, definition_of(service, path_id(request))))


async def replace_definition(request: web.Request) -> web.Response:
    service = _service(request)
    definition = definition_of(service, path_id(request))
    spec = await _read_spec(request, service)
    definition = await service.scheduler.replace(definition.id, spec)
    return as_json(definition_view(service, definition))


async def delete_definition(request: web.Request) -> web.Response:
    service = _service(request)
    definition = definition_of(service, path_id(request))
    try:
        await service.scheduler.delete(definition.id)
    except (ConflictError, DefinitionNotFoundError) as exc:
        raise ApiError(409, f"definition {definition.id}: {exc}") from None
    return web.Response(status=204)


async def definition_runs(request: web.Request) -> web.Response:
    service = _service(request)
    definition = definition_of(service, path_id(request))
    runs = [await crawl_view(service, e) for e in service.manager.runs_of(definition.id)]
    return as_json(RunList(definition_id=definition.id, runs=runs))


async def definition_deliveries(request: web.Request) -> web.Response:
    service = _service(request)
    definition = definition_of(service, path_id(request))
    rows = await service.manager.store.deliveries()
    views = [
        DeliveryView(
            id=d.id,
            definition_id=d.definition_id,
            crawl_id=d.crawl_id,
            url=redact.credentials(d.url),
            state=d.state,
            attempts=d.attempts,
            created_at=timestamp(d.created_at),  # type: ignore[arg-type]  # never None here
            next_attempt_at=timestamp(d.next_attempt_at) if d.state == "pending" else None,
            last_status=d.last_status,
            last_error=None if d.last_error is None else redact.credentials(d.last_error),
            finished_at=timestamp(d.finished_at),
        )
        for d in reversed(rows)
        if d.definition_id == definition.id
    ]
    return as_json(DeliveryList(definition_id=definition.id, deliveries=views))


# -- diffs --------------------------------------------------------------------------------


async def definition_diff(request: web.Request) -> web.Response:
    service = _service(request)
    definition = definition_of(service, path_id(request))
    before, after = pair_to_diff(service, definition.id, request)
    diff = await load_diff_or_409(service, before, after)
    return as_json(diff_view(definition.id, diff))


def pair_to_diff(service: Service, definition_id: int, request: web.Request) -> tuple[Entry, Entry]:
    """``from`` and ``to`` runs of the query, else the last two finished runs."""
    runs = {e.id: e for e in service.manager.runs_of(definition_id)}
    finished = [e for e in runs.values() if e.state == "finished"]  # newest first
    chosen: dict[str, Entry] = {}
    for name in ("from", "to"):
        raw = request.query.get(name)
        if raw is None:
            continue
        if not raw.isascii() or not raw.isdigit() or int(raw) not in runs:
            raise ApiError(
                404, f"{name}={raw[:40]!r}: no run of definition {definition_id}", field=name
            )
        chosen[name] = runs[int(raw)]
    if "to" not in chosen:
        if not finished:
            raise ApiError(409, f"definition {definition_id} has no finished run yet")
        chosen["to"] = finished[0]
    if "from" not in chosen:
        older = [e for e in finished if e.id < chosen["to"].id]
        if not older:
            raise ApiError(409, f"definition {definition_id}: no finished run before the last")
        chosen["from"] = older[0]
    return chosen["from"], chosen["to"]


async def load_diff_or_409(service: Service, before: Entry, after: Entry) -> CrawlDiff:
    diff = await diff_of(service.manager.store, before, after)
    if diff is None:
        raise ApiError(409, f"crawl {before.id} or {after.id} has not started yet; no diff")
    return diff


def _links(links: list[BrokenLink]) -> list[ReportBrokenLink]:
    return [
        ReportBrokenLink(
            url=redact.credentials(link.url),
            status=link.status,
            error=link.error,
            sources=[redact.credentials(s) for s in link.sources],
        )
        for link in links
    ]


def diff_view(definition_id: int, diff: CrawlDiff) -> DiffView:
    return DiffView(
        definition_id=definition_id,
        from_crawl=diff.from_crawl,
        to_crawl=diff.to_crawl,
        counts=DiffCounts(**diff.counts()),
        new_broken=_links(diff.new_broken),
        fixed=_links(diff.fixed),
        still_broken=_links(diff.still_broken),
        pages_added=diff.pages_added,
        pages_removed=diff.pages_removed,
    )
