"""Around every request: errors as JSON, the write guard, and a log line.

- ``errors``: ``ApiError`` and aiohttp's own HTTP errors (unknown route, wrong
  method, body too large) become an ``ErrorBody``; anything else is logged and
  answered 500 without details. Each answer is counted in the metrics.
- ``guard``, for every request: a ``Host`` that is neither a loopback name
  nor one the operator allowed (``--allowed-host``) is refused (DNS
  rebinding). With a token, everything but the dashboard's files and the
  probes needs ``Authorization: Bearer TOKEN`` (compared in constant time);
  ``--public-reads`` opens GET. Writes from another origin are refused.
  With ``--no-token``, a request a proxy forwarded (``X-Forwarded-For``,
  ``Forwarded``, ``Via``...) is refused: behind a proxy every request looks
  local, so a tokenless service must not be reachable through one.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from yarl import URL

from crawler.service.safety import is_allowed_host, token_matches
from crawler.service.state import SERVICE, ApiError

log = structlog.get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# Open without a token: the dashboard's own files, the probes, the API's description.
OPEN_PATHS = frozenset({"/", "/healthz", "/readyz", "/openapi.json"})
# Headers a reverse proxy adds (nginx's, Caddy's, Traefik's, Apache's defaults or usual configs).
FORWARDING_HEADERS = (
    "X-Forwarded-For",
    "Forwarded",
    "X-Real-IP",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "Via",
)


def _error_response(error: ApiError) -> web.Response:
    response = web.json_response(error.body.model_dump(mode="json"), status=error.status)
    response.headers.update(error.headers)
    return response


def _route_label(request: web.Request) -> str:
    """The route's template, never the raw path: bounded label values."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.monotonic()
    try:
        response = await handler(request)
    except ApiError as exc:
        response = _error_response(exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = exc.text if exc.text and exc.content_type == "text/plain" else exc.reason
        error = ApiError(exc.status, message.removeprefix(f"{exc.status}: "))
        response = _error_response(error)
        if "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
    except Exception:
        log.exception("request_failed", method=request.method, path=request.path)
        response = _error_response(ApiError(500, "internal error; see the service log"))
    elapsed_ms = round((time.monotonic() - started) * 1000, 1)
    service = request.app[SERVICE]
    route = _route_label(request)
    service.metrics.http.labels(request.method, route, str(response.status)).inc()
    level = log.debug if request.method == "GET" or request.path in QUIET_PATHS else log.info
    level(
        "request_handled",
        method=request.method,
        route=route,
        status=response.status,
        elapsed_ms=elapsed_ms,
        client=request.remote,
        # as a proxy says (not trusted: for the audit trail only)
        forwarded_for=request.headers.get("X-Forwarded-For"),
    )
    return response


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    config = request.app[SERVICE].config
    if not is_allowed_host(request.host, config.allowed_hosts):
        raise ApiError(
            403,
            f"Host {request.host[:80]!r} is not one this service answers to "
            "(loopback names, and those given with --allowed-host)",
            field="Host",
        )
    if config.token is None:
        forwarded = [name for name in FORWARDING_HEADERS if name in request.headers]
        if forwarded:
            raise ApiError(
                403,
                f"a request forwarded by a proxy ({forwarded[0]}) to a service without a "
                "token: set a token to serve behind a proxy",
                field=forwarded[0],
            )
    if request.method in WRITE_METHODS:
        origin = request.headers.get("Origin")
        if origin is not None and not _same_origin(origin, request.host):
            raise ApiError(403, f"cross-origin write from {origin[:80]!r} refused")
    token = config.token
    if (
        token is not None
        and _needs_token(request, public_reads=config.public_reads)
        and not token_matches(request.headers.get("Authorization"), token)
    ):
        raise ApiError(
            401,
            "this needs Authorization: Bearer TOKEN (the service's token)",
            field="Authorization",
            headers={"WWW-Authenticate": 'Bearer realm="crawler"'},
        )
    return await handler(request)


def _needs_token(request: web.Request, *, public_reads: bool) -> bool:
    if request.method in WRITE_METHODS:
        return True
    path = request.path
    if path in OPEN_PATHS or path.startswith("/static/"):
        return False
    return not public_reads


def _same_origin(origin: str, host: str) -> bool:
    try:
        url = URL(origin)
    except ValueError:
        return False
    if url.host is None:
        return False
    authority = url.raw_host or ""
    if ":" in authority:  # IPv6
        authority = f"[{authority}]"
    if url.explicit_port:
        authority += f":{url.port}"
    return authority.lower() == host.lower()
