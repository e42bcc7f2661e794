"""The OpenAPI 3.1 document, generated from ``routes.ROUTES`` and the pydantic models.

Request bodies use each model's validation schema, responses its
serialization schema; both land in ``components.schemas`` under the model's
name. OpenAPI 3.1 schemas are JSON Schema 2020-12, which is what pydantic
writes, so nothing is translated.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from crawler import __version__
from crawler.service.definition_schemas import WebhookBody
from crawler.service.routes import ROUTES, Route
from crawler.service.webhooks import SIGNATURE_HEADER

REF_TEMPLATE = "#/components/schemas/{model}"
Mode = Literal["validation", "serialization"]


def document() -> dict[str, Any]:
    """The whole document (a fresh dict: callers may change it)."""
    refs, schemas = _schemas()
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "crawler service",
            "version": __version__,
            "description": (
                "Recursive link checking as a service. Write operations (POST, PUT, DELETE) "
                "need `Authorization: Bearer TOKEN` when the service has a token."
            ),
        },
        "paths": paths,
        "webhooks": _webhooks(refs),
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }


def _schemas() -> tuple[dict[tuple[type[BaseModel], Mode], str], dict[str, Any]]:
    wanted: set[tuple[type[BaseModel], JsonSchemaMode]] = set()
    for route in ROUTES:
        if route.body is not None:
            wanted.add((route.body, "validation"))
        for answer in route.documented_answers:
            if answer.model is not None:
                wanted.add((answer.model, "serialization"))
    wanted.add((WebhookBody, "serialization"))
    ordered = sorted(wanted, key=lambda item: (item[0].__name__, item[1]))
    mapping, definitions = models_json_schema(ordered, ref_template=REF_TEMPLATE)
    refs = {key: value["$ref"] for key, value in mapping.items()}
    return refs, definitions.get("$defs", {})  # type: ignore[return-value]


def _operation(route: Route, refs: dict[tuple[type[BaseModel], Mode], str]) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
        "responses": {},
    }
    if route.params:
        operation["parameters"] = [
            {
                "name": p.name,
                "in": p.location,
                "required": p.required or p.location == "path",
                "description": p.description,
                "schema": p.schema,
            }
            for p in route.params
        ]
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": refs[(route.body, "validation")]}}},
        }
    if route.needs_token:
        operation["security"] = [{"bearerAuth": []}]
    for answer in route.documented_answers:
        response: dict[str, Any] = {"description": answer.description}
        content: dict[str, Any] = {}
        if answer.model is not None:
            ref = refs[(answer.model, "serialization")]
            content["application/json"] = {"schema": {"$ref": ref}}
        content.update(answer.media)
        if content:
            response["content"] = content
        operation["responses"][str(answer.status)] = response
    return operation


def _webhooks(refs: dict[tuple[type[BaseModel], Mode], str]) -> dict[str, Any]:
    """What the service sends a definition's webhook (README, "Webhooks")."""
    return {
        "run_finished": {
            "post": {
                "summary": "A run of a definition finished with new broken links",
                "description": (
                    "Sent to the definition's webhook URL; a 2xx answer delivers it, "
                    "anything else is retried with backoff for at most an hour. Redirects "
                    "are not followed; the target goes through the private-address guard."
                ),
                "parameters": [
                    {
                        "name": SIGNATURE_HEADER,
                        "in": "header",
                        "required": True,
                        "description": "sha256=<hex HMAC-SHA256 of the raw body under the "
                        "webhook's secret>",
                        "schema": {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": refs[(WebhookBody, "serialization")]}
                        }
                    },
                },
                "responses": {"200": {"description": "delivered (any 2xx)"}},
            }
        }
    }
