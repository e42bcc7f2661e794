"""From one response to one ``Outcome``: classify, decide on a retry, find the children.

Pure: a leased row and what the fetcher returned go in, the record the
frontier commits comes out. The engine only moves these between the network
and the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawler import bare_urls, extract, positions
from crawler.errors import FailureKind
from crawler.fetch_types import MARKDOWN_EXTENSIONS, Fetched
from crawler.models import Discovered, Extracted, LeasedUrl, Outcome, Result, ResultClass, UrlKind
from crawler.retry import retry_delay
from crawler.scope import Scope, resolve_link
from crawler.status import is_bot_wall, parse_accept

if TYPE_CHECKING:
    from crawler.config import CrawlSettings

HOST_PAUSE_STATUSES = frozenset({429, 503})  # a retried answer that pauses the whole host


@dataclass(frozen=True, slots=True)
class Policy:
    """The settings that judge a response, prepared once per crawl."""

    accepted: frozenset[int]
    blocked_as_broken: bool
    include_fragments: bool
    max_redirects: int
    max_retries: int
    retry_wait_s: float
    max_retry_after_s: float
    max_links: int | None = None  # links followed per page; the rest are dropped

    @classmethod
    def from_settings(cls, settings: CrawlSettings) -> Policy:
        return cls(
            accepted=parse_accept(settings.accept),
            blocked_as_broken=settings.blocked_as_broken,
            include_fragments=settings.include_fragments,
            max_redirects=settings.max_redirects,
            max_retries=settings.max_retries,
            retry_wait_s=settings.retry_wait_s,
            max_retry_after_s=settings.max_retry_after_s,
            max_links=settings.max_links_per_page,
        )


@dataclass(slots=True)
class Parsed:
    """What parsing a body found: links to record and, when fragments are checked, anchors."""

    children: list[Discovered]
    anchors: frozenset[str] | None = None
    dropped: int = 0  # links past the links-per-page cap, not followed


def wants_parse(leased: LeasedUrl, fetched: Fetched, policy: Policy) -> bool:
    """Is this response's body parsed? The one place that decides it.

    An OK 2xx body of a page to crawl that is HTML or Markdown (its links) or
    CSS (its references), or plain text named as an input (its URLs), or, when
    fragments are checked, any HTML or Markdown (its anchors). The engine asks
    it to send a body to a parse helper; ``build_outcome`` to parse one the
    engine did not.
    """
    if fetched.failure is not None or fetched.body is None:
        return False
    status = fetched.status or 0
    if not 200 <= status < 300 or status not in policy.accepted:
        return False
    if leased.kind == UrlKind.PAGE:
        return (
            fetched.is_html
            or fetched.is_css
            or fetched.markdown_at(leased.url)
            or _reads_as_text(leased, fetched)
        )
    return (fetched.is_html or fetched.markdown_at(leased.url)) and policy.include_fragments


def parse_body(
    leased: LeasedUrl,
    fetched: Fetched,
    scope: Scope,
    include_fragments: bool,
    max_links: int | None = None,
) -> Parsed:
    """The links (and anchors) of a fetched body: an HTML or Markdown page, an in-scope
    stylesheet, or a plain-text input.

    Pure and picklable in and out, so a helper process can run it
    (``crawler.engine.parse_pool``); ``build_outcome`` runs it inline
    otherwise. Only for a response ``wants_parse`` accepts.
    """
    parsed = Parsed([])
    if fetched.body is None:
        return parsed
    if fetched.is_css and leased.kind == UrlKind.PAGE:
        parsed.children = css_children(leased, fetched, scope)
    elif fetched.is_html:
        text, encoding = extract.decode_html(fetched.body, fetched.content_type)
        extracted = extract.extract_links(text, max_links)  # the rest counted, not kept
        if include_fragments:
            parsed.anchors = extracted.anchors
        parsed.dropped = extracted.dropped
        if leased.kind == UrlKind.PAGE:
            parsed.children = page_children(leased, extracted, encoding, fetched, scope, text)
    elif fetched.markdown_at(leased.url):
        parsed = markdown_parsed(leased, fetched, scope, include_fragments, max_links)
    elif _reads_as_text(leased, fetched):
        parsed = plain_text_parsed(leased, fetched, scope, max_links)
    return parsed


def _reads_as_text(leased: LeasedUrl, fetched: Fetched) -> bool:
    """Is this plain text named as an input, whose URLs are read? (A crawled site's
    text files are only checked.)"""
    return leased.kind == UrlKind.PAGE and leased.is_seed and fetched.is_plain_text


def plain_text_parsed(
    leased: LeasedUrl, fetched: Fetched, scope: Scope, max_links: int | None
) -> Parsed:
    """The URLs written in a plain-text input (``notes.txt``, ``README.rst``), each with
    where it is written; no markup is read, so no relative link and no anchor."""
    assert fetched.body is not None
    text, _ = extract.decode_html(fetched.body, fetched.content_type)  # BOM, charset, else UTF-8
    refs: list[tuple[str, str]] = []
    offsets: list[int] = []
    dropped = 0
    for url, at in bare_urls.find(text):
        if max_links is not None and len(refs) >= max_links:
            dropped += 1
            continue
        refs.append((url, "a"))
        offsets.append(at)
    parsed = Parsed([], dropped=dropped)
    if not _robots_nofollow(fetched.robots_tag):
        children = _scoped(refs, leased.url, "utf-8", leased.depth + 1, scope)
        parsed.children = _placed(children, offsets, text)
    return parsed


def markdown_parsed(
    leased: LeasedUrl,
    fetched: Fetched,
    scope: Scope,
    include_fragments: bool,
    max_links: int | None,
) -> Parsed:
    """A Markdown page's links, each with where it is written, and its headings' anchors."""
    from crawler import extract_markdown  # markdown-it: loaded by crawls that meet Markdown

    assert fetched.body is not None
    text, _ = extract.decode_html(fetched.body, fetched.content_type)  # BOM, charset, else UTF-8
    found = extract_markdown.extract_markdown(text, max_links)
    parsed = Parsed([], dropped=found.extracted.dropped)
    if include_fragments:  # lowercased, as the links' fragments to Markdown (``_scoped``)
        parsed.anchors = frozenset(anchor.lower() for anchor in found.extracted.anchors)
    if leased.kind == UrlKind.PAGE and not _robots_nofollow(fetched.robots_tag):
        links = found.extracted.links
        refs = ((raw.url, raw.element) for raw in links)
        children = _scoped(refs, leased.url, "utf-8", leased.depth + 1, scope)
        parsed.children = _placed(children, found.offsets, text)
    return parsed


def build_outcome(
    leased: LeasedUrl,
    fetched: Fetched,
    scope: Scope,
    policy: Policy,
    now: float,
    parsed: Parsed | None = None,
) -> Outcome:
    """Turn a response into what the frontier should record for this URL.

    ``parsed`` is ``parse_body``'s answer when a helper computed it (the
    engine decides where, ``wants_parse`` whether); None parses here.
    The retry time is decided here only: ``host_pause_s`` derives the host's
    pause from it.
    """
    delay = retry_delay_for(leased, fetched, policy)
    if delay is not None:
        return Outcome(leased=leased, result=None, retry_at=now + delay)
    result = classify(fetched, policy)
    if fetched.failure == FailureKind.PRIVATE_ADDRESS and leased.depth == 0 and leased.hop == 0:
        # A seed the guard refused: the crawl could not start there. A link to a
        # private address is excluded; the place the user asked to start is broken,
        # so a crawl of nothing is never green (the CLI exits 1, as for any seed
        # that got no answer).
        result.result_class = ResultClass.BROKEN
        result.error = f"refused: {fetched.error}"
    if fetched.failure is not None:
        return Outcome(leased=leased, result=result)
    status = fetched.status or 0
    if result.result_class == ResultClass.REDIRECTED:
        return _redirect(leased, fetched, result, scope, policy)
    outcome = Outcome(leased=leased, result=result)
    if result.result_class != ResultClass.OK or fetched.body is None or not 200 <= status < 300:
        return outcome
    if wants_parse(leased, fetched, policy):
        if parsed is None:
            parsed = parse_body(leased, fetched, scope, policy.include_fragments, policy.max_links)
        outcome.children = parsed.children
        outcome.anchors = parsed.anchors
    if fetched.truncated:  # the links of the part read are still followed
        result.result_class = ResultClass.BROKEN
        result.error_kind = str(FailureKind.BODY_TOO_LARGE)
        result.error = f"larger than --max-body-bytes ({fetched.size} bytes read)"
    return outcome


def retry_delay_for(leased: LeasedUrl, fetched: Fetched, policy: Policy) -> float | None:
    """Seconds until this URL should be tried again, or None when the result is final."""
    status = fetched.status if fetched.failure is None else None
    if status is not None and status in policy.accepted:
        return None
    return retry_delay(
        status=status,
        failure=fetched.failure,
        retry_after=fetched.retry_after,
        attempts=leased.attempts,
        max_retries=policy.max_retries,
        base_wait_s=policy.retry_wait_s,
        max_retry_after_s=policy.max_retry_after_s,
    )


def host_pause_s(fetched: Fetched, outcome: Outcome, now: float) -> float | None:
    """How long the whole host waits, or None: a 429 or 503 that will be retried.

    The server says it, not only this URL, is overloaded; the host waits as
    long as the URL does (``outcome.retry_at``, decided by ``build_outcome``
    at ``now``), so one computation of the delay serves both.
    """
    if (
        outcome.retry_at is None
        or fetched.failure is not None
        or fetched.status not in HOST_PAUSE_STATUSES
    ):
        return None
    delay = outcome.retry_at - now
    return delay if delay > 0 else None


def classify(fetched: Fetched, policy: Policy) -> Result:
    """The result class of a final response."""
    result = Result(
        result_class=ResultClass.OK,
        status=fetched.status,
        content_type=fetched.content_type,
        bytes=fetched.size,
        elapsed_ms=fetched.elapsed_ms,
        head_status=fetched.head_status,
        etag=fetched.etag,
        last_modified=fetched.last_modified,
    )
    if fetched.failure == FailureKind.PRIVATE_ADDRESS:
        result.result_class = ResultClass.EXCLUDED
        result.error_kind = str(fetched.failure)
        result.error = fetched.error
        return result
    if fetched.failure is not None:
        result.result_class = ResultClass.BROKEN
        result.error_kind = str(fetched.failure)
        result.error = fetched.error
        return result
    status = fetched.status or 0
    if status in policy.accepted:
        return result
    if 300 <= status < 400 and fetched.location:
        result.result_class = ResultClass.REDIRECTED
        return result
    result.error = f"{status} {fetched.reason or ''}".strip()
    result.error_kind = str(FailureKind.HTTP_STATUS)
    if is_bot_wall(status, fetched.headers) and not policy.blocked_as_broken:
        result.result_class = ResultClass.BLOCKED
        result.error = f"{result.error} (bot wall)"
        return result
    result.result_class = ResultClass.BROKEN
    return result


def _redirect(
    leased: LeasedUrl, fetched: Fetched, result: Result, scope: Scope, policy: Policy
) -> Outcome:
    """A 3xx: its target becomes a frontier row of its own (requested once)."""
    if leased.hop >= policy.max_redirects:
        result.result_class = ResultClass.BROKEN
        result.error_kind = str(FailureKind.TOO_MANY_REDIRECTS)
        result.error = f"more than {policy.max_redirects} redirects"
        return Outcome(leased=leased, result=result)
    assert fetched.location is not None
    absolute = resolve_link(fetched.location, leased.url, "utf-8")
    element = "a" if leased.kind == UrlKind.PAGE else "redirect"
    target = scope.classify(absolute, element=element, depth=leased.depth)
    if (
        policy.include_fragments
        and leased.kind in (UrlKind.PAGE, UrlKind.ANCHORS)
        and target.kind == UrlKind.CHECK
    ):
        # A link's #fragment is looked for where its redirects end, as a browser
        # scrolls there: that page's anchors are needed (a GET, not a HEAD).
        target = target._replace(kind=UrlKind.ANCHORS)
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


def page_children(
    leased: LeasedUrl,
    extracted: Extracted,
    encoding: str,
    fetched: Fetched,
    scope: Scope,
    text: str | None = None,
) -> list[Discovered]:
    """Links of a parsed HTML page, resolved, normalized, scoped, deduplicated.

    With the page's decoded ``text``, each link carries where it is first written.
    """
    if extracted.nofollow or _robots_nofollow(fetched.robots_tag):
        return []
    base = leased.url
    if extracted.base_href:
        base = resolve_link(extracted.base_href, leased.url, encoding)
    links = extracted.links
    children = _scoped(
        ((raw.url, raw.element) for raw in links), base, encoding, leased.depth + 1, scope
    )
    if text is None:
        return [found for found, _ in children]
    offsets = positions.locate(text, [raw.url for raw in links])
    return _placed(children, offsets, text)


def css_children(leased: LeasedUrl, fetched: Fetched, scope: Scope) -> list[Discovered]:
    """url() and @import references of an in-scope stylesheet, with where each is written."""
    assert fetched.body is not None
    text = fetched.body.decode("utf-8", "replace").removeprefix("\ufeff")  # editors skip a BOM
    refs = extract.extract_css_refs(text)
    depth = leased.depth + 1
    children = _scoped(((ref, "css") for ref, _ in refs), leased.url, "utf-8", depth, scope)
    return _placed(children, [offset for _, offset in refs], text)


def _placed(
    children: list[tuple[Discovered, int]], offsets: list[int], text: str
) -> list[Discovered]:
    """Each child with the line and column of its first occurrence (the ``index``-th link).

    Children come in the order of their first occurrence, so lines are counted forward.
    """
    kept = [(found, offsets[index]) for found, index in children]
    where = iter(positions.line_columns(text, [offset for _, offset in kept if offset >= 0]))
    new = tuple.__new__  # a named tuple's own constructor costs three times as much
    return [
        new(Discovered, (*found[:_PLAIN_FIELDS], *next(where))) if offset >= 0 else found
        for found, offset in kept
    ]


_PLAIN_FIELDS = len(Discovered._fields) - 2  # all but line and column


def _scoped(
    refs: Iterable[tuple[str, str]], base: str, encoding: str, depth: int, scope: Scope
) -> list[tuple[Discovered, int]]:
    """Distinct (URL, fragment) links, the strongest kind kept, with their first index."""
    seen: dict[tuple[str, str], tuple[Discovered, int]] = {}
    for index, (raw, element) in enumerate(refs):
        found = scope.classify_link(raw, base, encoding, element=element, depth=depth)
        if found.fragment and found.url.lower().endswith(MARKDOWN_EXTENSIONS):
            # GitHub finds a Markdown heading's anchor whatever the case the link
            # writes (#Install for ## Install): compared lowercased, as lychee does.
            found = found._replace(fragment=found.fragment.lower())
        key = (found.url, found.fragment)
        previous = seen.get(key)
        if previous is None:
            seen[key] = (found, index)
        elif found.kind > previous[0].kind:
            seen[key] = (found, previous[1])
    return list(seen.values())


def _robots_nofollow(header: str | None) -> bool:
    if not header:
        return False
    directives = {part.strip().lower() for part in header.replace(";", ",").split(",")}
    return bool(directives & {"nofollow", "none"})
