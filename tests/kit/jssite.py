"""A loopback site whose links exist only after its scripts run, for ``--render`` tests.

Every page is linked from ``/`` in plain HTML; what each page links to is
written by JavaScript:

- ``/router/``: a client-side router; it moves to ``/router/a`` with
  ``pushState`` and renders that route's links (``b``, and ``deep``, relative
  to the new location);
- ``/timer``: a link appended by a timer;
- ``/loadmore``: fetches ``/more.json`` and writes its links (one broken);
- ``/throws``: writes a link, logs a console error (``CONSOLE_ERROR``), then throws;
- ``/forever``: fetches ``/ping`` every 100 ms, so the network is never idle;
- ``/badscript``: a broken ``<script src>`` in the HTML, and one more added
  by a script;
- ``/guard``: fetches a URL on another loopback address (the ``secret``
  server), which the address guard must refuse.

``/parallel`` (linked from nowhere) fetches ``/slow`` four times at once.
``/`` sets a cookie and shows ``/pic.png``; the site records each request's
method and the last headers per path.

``PLANTED`` lists the links only rendering finds, ``BROKEN_RENDERED`` the
broken ones among them with their source page.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.test_utils import TestServer

# What the store keeps of /throws' console error (a NUL and a lone surrogate in it).
CONSOLE_ERROR = "planted console error \ufffd\ufffd\ufffd\ufffd"
PLAIN = ("/plain", "/missing.js")  # what a crawler reading the sent HTML finds beyond /
PAGES = ("/router/", "/timer", "/loadmore", "/throws", "/forever", "/badscript", "/guard")
PLANTED = (
    "/router/a",
    "/router/b",
    "/router/deep",
    "/timer-target",
    "/more-1",
    "/more-2",
    "/more-missing",
    "/before-throw",
    "/forever-link",
    "/also-missing.js",
)
BROKEN_RENDERED = (("/more-missing", "/loadmore"), ("/also-missing.js", "/badscript"))


def _page(body: str, script: str = "") -> web.Response:
    html = f"<!doctype html><html><head><title>t</title></head><body>{body}"
    if script:
        html += f"<script>{script}</script>"
    return web.Response(text=html + "</body></html>", content_type="text/html")


ADD = (
    "function add(href){const a=document.createElement('a');a.href=href;"
    "a.textContent=href;document.body.appendChild(a);}"
)

ROUTER = (
    ADD
    + """
function route(){
  const path = location.pathname;
  if (path === '/router/a') { add('b'); add('deep'); }
}
document.addEventListener('click', e => {
  const a = e.target.closest('a'); if (!a) return;
  e.preventDefault(); history.pushState({}, '', a.href); route();
});
add('/router/a');
history.pushState({}, '', '/router/a');
route();
"""
)


@dataclass
class JsSite:
    """The running site: its base URL, the secret server's URL, and who asked for what."""

    base: str
    secret_url: str
    hits: Counter[str] = field(default_factory=Counter)
    methods: Counter[tuple[str, str]] = field(default_factory=Counter)  # (method, path)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)  # the last, by path
    in_flight: int = 0
    max_in_flight: int = 0  # requests being answered at once, at most
    secret_hits: Counter[str] = field(default_factory=Counter)

    def url(self, path: str) -> str:
        return self.base + path


def _app(site: JsSite) -> web.Application:
    async def count(request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
        site.hits[request.path] += 1
        site.methods[(request.method, request.path)] += 1
        site.headers[request.path] = dict(request.headers)
        site.in_flight += 1
        site.max_in_flight = max(site.max_in_flight, site.in_flight)
        try:
            return await handler(request)
        finally:
            site.in_flight -= 1

    app = web.Application(middlewares=[web.middleware(count)])
    routes = web.RouteTableDef()

    @routes.get("/")
    async def home(_: web.Request) -> web.Response:
        links = "".join(f'<a href="{p}">{p}</a>' for p in ("/plain", *PAGES))
        response = _page(links + '<img src="/pic.png" alt="">')
        response.set_cookie("session", "abc")  # the crawl's jar sends it on, browser or not
        return response

    @routes.get("/pic.png")
    async def pic(_: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG", content_type="image/png")

    @routes.get("/plain")
    async def plain(_: web.Request) -> web.Response:
        return _page("plain page")

    @routes.get("/router/{rest:.*}")
    async def router(_: web.Request) -> web.Response:
        return _page("router shell", ROUTER)

    @routes.get("/timer")
    async def timer(_: web.Request) -> web.Response:
        return _page("timer", ADD + "setTimeout(() => add('/timer-target'), 150);")

    @routes.get("/loadmore")
    async def loadmore(_: web.Request) -> web.Response:
        script = ADD + "fetch('/more.json').then(r => r.json()).then(l => l.forEach(add));"
        return _page("load more", script)

    @routes.get("/more.json")
    async def more(_: web.Request) -> web.Response:
        return web.json_response(["/more-1", "/more-2", "/more-missing"])

    @routes.get("/throws")
    async def throws(_: web.Request) -> web.Response:
        script = ADD + (
            # A NUL and a lone surrogate: what no store keeps in a text.
            "add('/before-throw'); console.error('planted console error \\u0000\\ud800');"
            " throw new Error('planted failure');"
        )
        return _page("throws", script)

    @routes.get("/forever")
    async def forever(_: web.Request) -> web.Response:
        script = ADD + "add('/forever-link'); setInterval(() => fetch('/ping'), 100);"
        return _page("forever", script)

    @routes.get("/ping")
    async def ping(_: web.Request) -> web.Response:
        return web.Response(text="pong")

    @routes.get("/parallel")
    async def parallel(_: web.Request) -> web.Response:
        script = "for (let i = 0; i < 4; i++) fetch('/slow?i=' + i);"
        return _page("parallel", script)

    @routes.get("/slow")
    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(0.05)  # long enough for overlapping requests to overlap
        return web.Response(text="slow")

    @routes.get("/badscript")
    async def badscript(_: web.Request) -> web.Response:
        script = (
            "const s=document.createElement('script');s.src='/also-missing.js';"
            "document.body.appendChild(s);"
        )
        return _page('<script src="/missing.js"></script>bad script', script)

    @routes.get("/guard")
    async def guard(_: web.Request) -> web.Response:
        script = f"fetch({json.dumps(site.secret_url)}).catch(() => console.log('refused'));"
        return _page("guard", script)

    async def target(_: web.Request) -> web.Response:
        return _page("target")

    for path in PLANTED:  # the router's routes are the shell; the broken ones are absent
        if not path.startswith("/router/") and path not in dict(BROKEN_RENDERED):
            routes.get(path)(target)
    app.add_routes(routes)
    return app


def _secret_app(site: JsSite) -> web.Application:
    async def secret(request: web.Request) -> web.Response:
        site.secret_hits[request.path] += 1
        return web.Response(text="secret", headers={"Access-Control-Allow-Origin": "*"})

    app = web.Application()
    app.router.add_get("/{tail:.*}", secret)
    return app


@asynccontextmanager
async def serve_js_site() -> AsyncIterator[JsSite]:
    """The site on 127.0.0.1 and its secret server on 127.0.0.2, both on free ports."""
    site = JsSite(base="", secret_url="")
    secret = TestServer(_secret_app(site), host="127.0.0.2")
    await secret.start_server()
    site.secret_url = f"http://127.0.0.2:{secret.port}/secret"
    server = TestServer(_app(site), host="127.0.0.1")
    await server.start_server()
    site.base = f"http://127.0.0.1:{server.port}"
    try:
        yield site
    finally:
        await server.close()
        await secret.close()
