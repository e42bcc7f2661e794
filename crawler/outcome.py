"""From one response to one ``Outcome``: classify, decide on a retry, find the children.

Pure: a leased row and what the fetcher returned go in, the record the
frontier commits comes out. The engine only moves these between the network
and the store.
"""

from __future__ import annotations

from crawler import extract
from crawler.config import CrawlSettings
from crawler.errors import FailureKind
from crawler.fetch import Fetched
from crawler.models import Discovered, LeasedUrl, Outcome, Result, ResultClass, UrlKind
from crawler.retry import retry_delay
from crawler.scope import Scope, resolve_link


def build_outcome(
    leased: LeasedUrl, fetched: Fetched, scope: Scope, settings: CrawlSettings, now: float
) -> Outcome:
    """Turn a response into what the frontier should record for this URL."""
    delay = retry_delay(
        status=fetched.status if fetched.failure is None else None,
        failure=fetched.failure,
        retry_after=fetched.retry_after,
        attempts=leased.attempts,
        max_retries=settings.max_retries,
        base_wait_s=settings.retry_wait_s,
        max_retry_after_s=settings.max_retry_after_s,
    )
    if delay is not None:
        return Outcome(leased=leased, result=None, retry_at=now + delay)
    result = _result(fetched)
    if fetched.failure is not None:
        return Outcome(leased=leased, result=result)
    status = fetched.status or 0
    if 300 <= status < 400:
        return _redirect(leased, fetched, result, scope, settings)
    children: list[Discovered] = []
    if leased.kind == UrlKind.PAGE and fetched.body is not None and result.result_class == "ok":
        children = page_children(leased, fetched, scope)
    return Outcome(leased=leased, result=result, children=children)


def _result(fetched: Fetched) -> Result:
    base = Result(
        result_class=ResultClass.OK,
        status=fetched.status,
        content_type=fetched.content_type,
        bytes=fetched.size,
        elapsed_ms=fetched.elapsed_ms,
    )
    if fetched.failure is not None:
        base.result_class = ResultClass.BROKEN
        base.error_kind = str(fetched.failure)
        base.error = fetched.error
        return base
    status = fetched.status or 0
    if 200 <= status < 300:
        return base
    if 300 <= status < 400 and fetched.location:
        base.result_class = ResultClass.REDIRECTED
        return base
    base.result_class = ResultClass.BROKEN
    base.error_kind = str(FailureKind.HTTP_STATUS)
    base.error = f"{status} {fetched.reason or ''}".strip()
    return base


def _redirect(
    leased: LeasedUrl, fetched: Fetched, result: Result, scope: Scope, settings: CrawlSettings
) -> Outcome:
    """A 3xx: its target becomes a frontier row of its own (requested once)."""
    if leased.hop >= settings.max_redirects:
        result.result_class = ResultClass.BROKEN
        result.error_kind = str(FailureKind.TOO_MANY_REDIRECTS)
        result.error = f"more than {settings.max_redirects} redirects"
        return Outcome(leased=leased, result=result)
    assert fetched.location is not None
    absolute = resolve_link(fetched.location, leased.url, "utf-8")
    element = "a" if leased.kind == UrlKind.PAGE else "redirect"
    target = scope.classify(absolute, element=element, depth=leased.depth)
    if target.kind == UrlKind.SKIP and target.result != ResultClass.EXCLUDED:
        result.result_class = ResultClass.BROKEN
        result.error_kind = str(FailureKind.INVALID_RESPONSE)
        result.error = f"redirects to {fetched.location!r}: {target.reason}"
        return Outcome(leased=leased, result=result)
    if target.url == leased.url:
        result.result_class = ResultClass.BROKEN
        result.error_kind = str(FailureKind.REDIRECT_LOOP)
        result.error = "redirects to itself"
        return Outcome(leased=leased, result=result)
    return Outcome(leased=leased, result=result, redirect_to=target)


def page_children(leased: LeasedUrl, fetched: Fetched, scope: Scope) -> list[Discovered]:
    """Links of a fetched HTML page, resolved, normalized, scoped, deduplicated."""
    assert fetched.body is not None
    text, encoding = extract.decode_html(fetched.body, fetched.content_type)
    extracted = extract.extract_links(text)
    if extracted.nofollow or _robots_nofollow(fetched.robots_tag):
        return []
    base = leased.url
    if extracted.base_href:
        base = resolve_link(extracted.base_href, leased.url, encoding)
    depth = leased.depth + 1
    seen: dict[tuple[str, str], Discovered] = {}
    for raw in extracted.links:
        absolute = resolve_link(raw.url, base, encoding)
        found = scope.classify(absolute, element=raw.element, depth=depth)
        key = (found.url, found.fragment)
        previous = seen.get(key)
        if previous is None or found.kind > previous.kind:
            seen[key] = found
    return list(seen.values())


def _robots_nofollow(header: str | None) -> bool:
    if not header:
        return False
    directives = {part.strip().lower() for part in header.replace(";", ",").split(",")}
    return bool(directives & {"nofollow", "none"})
