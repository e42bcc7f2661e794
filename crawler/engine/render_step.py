"""``--render``: a fetched page loaded in the browser, and the links only its DOM has.

The page's document is fetched and parsed as for any page (``build_outcome``);
when its host renders, the same document is then loaded in headless Chromium
(``crawler.net.render``) and the settled DOM goes through the same parse
(``parse_body``: extractor, filters, scope). Links the DOM has and the sent
HTML had not are added with ``RENDERED_PREFIX`` on their element; links only
the sent HTML had are kept (a plain crawler finds them). The page's render
issues ride on its outcome and are stored in the same transaction.

Every request the page makes comes back here (``BrowserLoads``): it waits for
its host's slot in the crawl's politeness gate and goes through the crawl's
fetcher, so the browser never reaches what the crawl would not.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Protocol

from crawler import urls
from crawler.config import CrawlSettings
from crawler.errors import FailureKind, InvalidURLError
from crawler.fetch_types import Fetched
from crawler.models import RENDERED_PREFIX, Discovered, LeasedUrl, Outcome, ResultClass, UrlKind
from crawler.net.fetch import Fetcher
from crawler.outcome import Policy, parse_body
from crawler.politeness import Gate
from crawler.scope import Scope

if TYPE_CHECKING:
    from crawler.net.render.page import Load, Rendered


class Renders(Protocol):
    """What the engine asks of ``crawler.net.render.renderer.Renderer``: imported only
    by crawls that render (its DevTools client is aiohttp's)."""

    async def render(self, url: str, document: Fetched, load: Load) -> Rendered: ...

    async def aclose(self) -> None: ...


GATE_POLL_S = 0.02
RENDERED_TYPE = "text/html; charset=utf-8"


def wants_render(
    settings: CrawlSettings, row: LeasedUrl, fetched: Fetched, outcome: Outcome
) -> bool:
    """Is this page loaded in the browser? An OK HTML page to crawl on a rendering host."""
    return (
        row.kind == UrlKind.PAGE
        and outcome.result is not None
        and outcome.result.result_class == ResultClass.OK
        and fetched.body is not None
        and fetched.is_html
        and settings.renders(row.host)
    )


def rendered_only(plain: list[Discovered], rendered: list[Discovered]) -> list[Discovered]:
    """The links of the rendered DOM the sent HTML lacks, once each, their element marked."""
    seen = {(child.url, child.fragment) for child in plain}
    found = []
    for child in rendered:
        key = (child.url, child.fragment)
        if key not in seen:
            seen.add(key)
            found.append(child._replace(element=RENDERED_PREFIX + child.element))
    return found


async def render_outcome(
    renderer: Renders,
    row: LeasedUrl,
    fetched: Fetched,
    outcome: Outcome,
    scope: Scope,
    policy: Policy,
    loads: BrowserLoads,
) -> Outcome:
    """``outcome`` with the rendered DOM's extra links and the render issues."""
    rendered = await renderer.render(row.url, fetched, loads.load)
    outcome.render_issues = rendered.issues
    if rendered.html is None:
        return outcome
    dom = Fetched(method="GET", status=200, content_type=RENDERED_TYPE)
    dom.body = rendered.html.encode("utf-8", "surrogatepass")
    # Relative links resolve against where the page is now (a router may have moved it).
    where = row.url if not urls.is_http(rendered.url) else rendered.url.partition("#")[0]
    parsed = parse_body(dataclasses.replace(row, url=where), dom, scope, policy.include_fragments)
    outcome.children = [*outcome.children, *rendered_only(outcome.children, parsed.children)]
    if outcome.anchors is not None and parsed.anchors is not None:
        outcome.anchors = outcome.anchors | parsed.anchors
    return outcome


class BrowserLoads:
    """Answers a rendered page's requests: the politeness gate, then the crawl's fetcher."""

    def __init__(self, fetcher: Fetcher, gate: Gate) -> None:
        self._fetcher = fetcher
        self._gate = gate

    async def load(self, url: str, method: str, headers: dict[str, str]) -> Fetched:
        try:
            key, _ = urls.normalize(url)
        except InvalidURLError as exc:
            return Fetched(method=method, failure=FailureKind.INVALID_URL, error=str(exc))
        host = urls.host_of(key) if urls.is_http(key) else ""
        if host:
            await self._acquire(host)
        try:
            return await self._fetcher.fetch_resource(url, method, headers)
        finally:
            if host:
                self._gate.release(host)

    async def _acquire(self, host: str) -> None:
        """Wait for a slot of ``host`` (its concurrency and interval, as every request)."""
        loop = asyncio.get_running_loop()
        while not self._gate.try_acquire(host):
            wait = self._gate.ready_at(host) - loop.time()
            await asyncio.sleep(wait if wait > GATE_POLL_S else GATE_POLL_S)
