"""The dashboard: plain HTML, CSS and JS from ``static/``, served as they are.

No build step. The files are package data, read once at start-up; only the
names listed in ``STATIC_FILES`` are served. The page talks to the JSON API
with ``fetch``; its Content-Security-Policy allows nothing but this origin.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from crawler.service.state import ApiError

STATIC_FILES = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "style.css": "text/css",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
STATIC = web.AppKey("static", dict[str, bytes])


def load_static() -> dict[str, bytes]:
    """The dashboard's files, from the installed package (or the checkout)."""
    folder = resources.files("crawler.service").joinpath("static")
    return {name: folder.joinpath(name).read_bytes() for name in STATIC_FILES}


def _file(request: web.Request, name: str) -> web.Response:
    body = request.app[STATIC].get(name)
    if body is None:
        raise ApiError(404, f"no static file {name[:60]!r}", field="name")
    response = web.Response(body=body, content_type=STATIC_FILES[name], charset="utf-8")
    response.headers["Content-Security-Policy"] = CSP
    response.headers["Cache-Control"] = "no-cache"
    return response


async def index(request: web.Request) -> web.Response:
    return _file(request, "index.html")


async def static_file(request: web.Request) -> web.Response:
    return _file(request, request.match_info["name"])
