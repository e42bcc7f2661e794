"""The routes of crawl definitions, in the form of ``routes.ROUTES`` (which adds them):
the app and the OpenAPI document are built from the one table."""

from __future__ import annotations

from crawler.service import definition_handlers as h
from crawler.service.definition_schemas import (
    DefinitionCreate,
    DefinitionList,
    DefinitionView,
    DeliveryList,
    DiffView,
    RunList,
)
from crawler.service.routes import (
    CONFLICT,
    FORBIDDEN,
    UNAUTHORIZED,
    Answer,
    Param,
    Route,
    error,
)

DEFINITION_ID = Param("definition_id", "path", {"type": "integer", "minimum": 1}, "its id")
NOT_FOUND = error(404, "no such definition")
RUN_FROM = Param(
    "from",
    "query",
    {"type": "integer", "minimum": 1},
    "the older run (default: the finished run before `to`)",
    required=False,
)
RUN_TO = Param(
    "to",
    "query",
    {"type": "integer", "minimum": 1},
    "the newer run (default: the last finished run)",
    required=False,
)
BODY_ERRORS = (
    error(400, "the body is not JSON"),
    UNAUTHORIZED,
    error(408, "the body did not arrive within --read-timeout"),
    FORBIDDEN,
    error(413, "body too large"),
    error(415, "body not sent as application/json"),
    error(422, "a field is invalid; `field` names it"),
)
TAG = "definitions"

DEFINITION_ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        "/definitions",
        h.list_definitions,
        "list_definitions",
        "Crawl definitions: recurring crawls with a schedule",
        TAG,
        (Answer(200, "the definitions", DefinitionList),),
    ),
    Route(
        "POST",
        "/definitions",
        h.create_definition,
        "create_definition",
        "Define a recurring crawl: seeds, settings, schedule, retention, webhook",
        TAG,
        (Answer(201, "created", DefinitionView), *BODY_ERRORS),
        body=DefinitionCreate,
    ),
    Route(
        "GET",
        "/definitions/{definition_id}",
        h.get_definition,
        "get_definition",
        "One definition, with its schedule position and active run",
        TAG,
        (Answer(200, "the definition", DefinitionView), NOT_FOUND),
        (DEFINITION_ID,),
    ),
    Route(
        "PUT",
        "/definitions/{definition_id}",
        h.replace_definition,
        "replace_definition",
        "Replace a definition (a changed schedule starts again from now)",
        TAG,
        (Answer(200, "the definition", DefinitionView), *BODY_ERRORS, NOT_FOUND),
        (DEFINITION_ID,),
        body=DefinitionCreate,
    ),
    Route(
        "DELETE",
        "/definitions/{definition_id}",
        h.delete_definition,
        "delete_definition",
        "Delete a definition with its runs (a running one is stopped first)",
        TAG,
        (Answer(204, "deleted"), UNAUTHORIZED, FORBIDDEN, NOT_FOUND, CONFLICT),
        (DEFINITION_ID,),
    ),
    Route(
        "GET",
        "/definitions/{definition_id}/runs",
        h.definition_runs,
        "definition_runs",
        "The definition's runs (crawls), newest first",
        TAG,
        (Answer(200, "the runs", RunList), NOT_FOUND),
        (DEFINITION_ID,),
    ),
    Route(
        "GET",
        "/definitions/{definition_id}/diff",
        h.definition_diff,
        "definition_diff",
        "What changed between two runs: by default the last two finished ones",
        TAG,
        (
            Answer(200, "the diff", DiffView),
            error(404, "no such definition, or `from`/`to` is not one of its runs"),
            error(409, "fewer than two finished runs, or a run without data yet"),
            error(500, "a crawl's database cannot be read (the log says why)"),
        ),
        (DEFINITION_ID, RUN_FROM, RUN_TO),
    ),
    Route(
        "GET",
        "/definitions/{definition_id}/deliveries",
        h.definition_deliveries,
        "definition_deliveries",
        "The definition's webhook deliveries, newest first: state, attempts, last answer",
        TAG,
        (Answer(200, "the deliveries", DeliveryList), NOT_FOUND),
        (DEFINITION_ID,),
    ),
)
