"""The OpenAPI document matches the app: same routes, real answers fit the schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs installed
import pytest
from openapi_spec_validator import validate as validate_spec

from crawler.service.app import build_app
from crawler.service.config import ServiceConfig

from kit.serve_site import ThreadedSite
from kit.servicekit import Answer, ServiceProcess


@pytest.fixture(scope="module")
def document(service: ServiceProcess) -> dict[str, Any]:
    answer = service.get("/openapi.json")
    assert answer.status == 200
    doc: dict[str, Any] = answer.json()
    return doc


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1")
    validate_spec(document)


def test_the_webhook_and_its_signature_header_are_documented(document: dict[str, Any]) -> None:
    post = document["webhooks"]["run_finished"]["post"]
    assert [p["name"] for p in post["parameters"]] == ["X-Crawler-Signature"]
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"report_url", "diff_url", "new_broken", "counts"} <= set(body["properties"])


def test_every_route_of_the_app_is_documented_and_no_other(
    document: dict[str, Any], tmp_path: Path
) -> None:
    app = build_app(ServiceConfig(data_dir=tmp_path))
    in_app = {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }
    documented = {
        (method, path) for path, operations in document["paths"].items() for method in operations
    }
    assert in_app == documented


def _validate(document: dict[str, Any], method: str, path: str, answer: Answer) -> None:
    """The status is documented for the operation and the body fits its schema."""
    responses = document["paths"][path][method]["responses"]
    assert str(answer.status) in responses, (method, path, answer.status, answer.body[:300])
    content = responses[str(answer.status)].get("content", {})
    if answer.status == 204:
        assert not content
        assert answer.body == b""
        return
    assert answer.content_type in content, (method, path, answer.content_type, list(content))
    schema = content[answer.content_type]["schema"]
    if answer.content_type.endswith("json"):
        instance = answer.json()
        jsonschema.validate(
            instance,
            {**schema, "components": document["components"]},
            cls=jsonschema.Draft202012Validator,
        )
    else:
        assert schema == {"type": "string"}
        answer.body.decode("utf-8")


def _requests(
    document: dict[str, Any], finished: int, deletable: int, site: ThreadedSite
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, documented path, concrete path, request options): good and bad requests."""
    valid_body = {"seeds": [site.url("/")], "settings": {"max_retries": 0}}
    calls: list[tuple[str, str, str, dict[str, Any]]] = []
    for path, operations in document["paths"].items():
        for method in operations:
            concrete = path.replace("{crawl_id}", str(finished))
            options: dict[str, Any] = {}
            if method == "post" and path == "/crawls":
                options = {"body": valid_body}
            if method == "delete":
                concrete = path.replace("{crawl_id}", str(deletable))
            if "{name}" in path:
                for name in ("index.html", "app.js", "style.css", "missing.js"):
                    calls.append((method, path, path.replace("{name}", name), {}))
                continue
            if path.endswith("/report"):
                for fmt in ("json", "text", "bogus"):
                    calls.append((method, path, f"{concrete}?format={fmt}", {}))
                calls.append((method, path, concrete, {}))
            else:
                calls.append((method, path, concrete, options))
            if "{crawl_id}" in path:  # an unknown crawl
                calls.append((method, path, path.replace("{crawl_id}", "424242"), {}))
            if method in ("post", "delete"):  # without the token
                calls.append((method, path, concrete, {**options, "auth": False}))
            if method == "post" and path == "/crawls":
                calls.append((method, path, concrete, {"body": {"seeds": ["x"]}}))
                calls.append((method, path, concrete, {"raw": b"{", "headers": _json_type()}))
                calls.append((method, path, concrete, {"raw": b"{}"}))
                calls.append(
                    (method, path, concrete, {"raw": b" " * 70_000, "headers": _json_type()})
                )
    return calls


def _json_type() -> dict[str, str]:
    return {"Content-Type": "application/json"}


def test_every_documented_operation_answers_as_documented(
    document: dict[str, Any], service: ServiceProcess, site: ThreadedSite
) -> None:
    finished = service.create([site.url("/")], max_retries=0)["id"]
    service.wait_state(finished, "finished")
    deletable = service.create([site.url("/")], max_retries=0)["id"]
    service.wait_state(deletable, "finished")
    statuses: set[int] = set()
    calls = _requests(document, finished, deletable, site)
    # The delete of a known crawl goes last: other calls still need it.
    calls.sort(key=lambda call: call[0] == "delete" and str(deletable) in call[2])
    for method, path, concrete, options in calls:
        answer = service.request(method.upper(), concrete, **options)
        _validate(document, method, path, answer)
        statuses.add(answer.status)
    assert {200, 201, 204, 400, 401, 404, 409, 413, 415, 422} <= statuses
