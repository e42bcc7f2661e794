"""Plain records passed between the pure core and the adapters.

They hold values only; nothing here does I/O. ``RawLink`` is a link as found in
a document; ``Link`` is the same link once resolved and normalized.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol


class UrlKind(enum.IntEnum):
    """What the crawler does with a URL; stored in ``url.kind``.

    The order matters: a URL found again with a stronger kind is upgraded.
    """

    SKIP = 0  # recorded, never requested (non-HTTP scheme, excluded by filters)
    CHECK = 1  # requested to learn its status (HEAD, GET fallback), never parsed
    ANCHORS = 2  # fetched with GET and parsed for its anchors only (fragment checks)
    PAGE = 3  # fetched with GET and, when HTML, parsed for links


class UrlState(enum.IntEnum):
    """Where a URL is in the frontier; stored in ``url.state``."""

    PENDING = 0
    LEASED = 1
    DONE = 2


class ResultClass(enum.StrEnum):
    """The one class each checked URL lands in; stored in ``result.class``."""

    OK = "ok"
    REDIRECTED = "redirected"
    BROKEN = "broken"
    SKIPPED = "skipped"
    EXCLUDED = "excluded"
    BLOCKED = "blocked"  # a bot wall answered, not the page


class RawLink(NamedTuple):
    """A link exactly as the document wrote it, before resolution.

    A named tuple, as ``Discovered``: about fifty are built per page, and a
    frozen dataclass's ``__init__`` (``object.__setattr__`` per field) took
    2.3 times as long (3.6-4.9% of a parse helper's CPU samples).
    """

    url: str
    element: str  # tag name, e.g. "a", "img", "link", "meta"
    attribute: str  # e.g. "href", "src", "srcset", "content"


@dataclass(frozen=True, slots=True)
class Extracted:
    """What a parsed page yields: its links and what changes how they resolve."""

    links: list[RawLink]
    base_href: str | None = None  # the first <base href>, unresolved
    nofollow: bool = False  # <meta name=robots content=nofollow>
    anchors: frozenset[str] = field(default_factory=frozenset)  # ids and a[name]
    dropped: int = 0  # links past the extraction's limit, not kept


class Discovered(NamedTuple):
    """A link found on a page, normalized and scoped, ready for the frontier.

    A named tuple, not a frozen dataclass: about fifty are built per page, in
    the event loop's thread when a parse helper sends them back, and a tuple
    is built in a third of the time.
    """

    url: str  # normalized key, no fragment
    host: str | None  # authority, None when not HTTP
    kind: UrlKind
    element: str
    fragment: str = ""
    result: ResultClass | None = None  # set for SKIP rows: skipped or excluded
    reason: str | None = None  # why it was skipped or excluded
    # Where the page writes it (first occurrence): 1-based line and column in
    # characters; None for seeds, redirects and links whose text was not found.
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True, slots=True)
class LeasedUrl:
    """A frontier row this worker holds until it completes or its lease expires."""

    id: int
    url: str
    host: str
    kind: UrlKind
    depth: int
    hop: int
    attempts: int

    @property
    def is_seed(self) -> bool:
        """Was this URL named as an input (or listed by a sitemap), not found on a page?"""
        return self.depth == 0


@dataclass(slots=True)
class Result:
    """What checking one URL found, as stored in ``result``."""

    result_class: ResultClass
    status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    content_type: str | None = None
    bytes: int | None = None
    elapsed_ms: int | None = None
    head_status: int | None = None  # HEAD's answer, when the confirming GET's differed
    # The page's validators, kept for the next crawl's conditional request (pages only).
    etag: str | None = None
    last_modified: str | None = None


# The element of a link found only in a page's rendered DOM (``--render``) starts
# with this, e.g. ``js:a``: the link a crawler reading the sent HTML would miss.
RENDERED_PREFIX = "js:"


class RenderIssue(NamedTuple):
    """Something that went wrong while a page was rendered; stored per page.

    ``kind``: ``script_error`` (an uncaught exception), ``console_error``
    (``console.error``), ``request_failed`` (a subresource or fetch that
    failed or answered 4xx/5xx; ``url`` says which), ``request_refused``
    (not sent: the address guard, or a method other than GET/HEAD),
    ``not_settled`` (still busy after ``--render-timeout``: the DOM is
    taken as it was), ``render_failed`` (the browser failed twice).
    """

    kind: str
    message: str
    url: str | None = None


@dataclass(slots=True)
class Outcome:
    """Everything one fetch produced, committed in one transaction.

    Exactly one of ``result`` and ``retry_at`` is set: a result completes the
    URL, a retry time puts it back in the frontier for a later attempt.
    """

    leased: LeasedUrl
    result: Result | None
    retry_at: float | None = None
    children: list[Discovered] = field(default_factory=list)
    redirect_to: Discovered | None = None
    anchors: frozenset[str] | None = None  # set when fragments are checked
    render_issues: list[RenderIssue] = field(default_factory=list)  # --render only
    # A re-crawl's page answered 304: its links are the previous crawl's (stored there).
    recorded: Recorded | None = None

    @property
    def settles(self) -> bool:
        """Whether completing it settles its row (a page answered OK): links to it are settled."""
        result = self.result
        return (
            self.leased.kind == UrlKind.PAGE
            and result is not None
            and result.result_class == ResultClass.OK
        )


# A link as a previous crawl recorded it: target URL, element, fragment, line, column.
PreviousLink = tuple[str, str, str, int | None, int | None]


class RecordedTarget(NamedTuple):
    """What a crawl's scope says of a URL whatever links to it (``Scope.recorded_target``).

    ``skipped`` is the result class of a URL never requested (excluded, not
    HTTP, invalid), with ``reason``; otherwise ``crawlable`` tells whether a
    page link to it within ``--max-depth`` crawls it (in scope, not ``--no-follow``).
    """

    skipped: ResultClass | None
    reason: str | None
    crawlable: bool


class LinkClassifier(Protocol):
    """The part of a crawl's scope a store needs to take in a 304 page's recorded links."""

    @property
    def include_fragments(self) -> bool: ...

    def within_depth(self, depth: int) -> bool: ...

    def recorded_target(self, url: str) -> RecordedTarget: ...

    def classify_recorded(
        self, url: str, fragment: str, *, element: str, depth: int
    ) -> Discovered: ...


@dataclass(frozen=True, slots=True)
class Recorded:
    """A re-crawl's page answered 304: its links are those its previous crawl recorded.

    ``page`` is the previous crawl's row of the page (``PreviousPage.row``).
    The store completing the outcome takes those links as the page's children,
    each classified by ``scope`` at the leased row's depth + 1, exactly as if
    they were in ``Outcome.children`` (``crawler.recrawl.expand``); a store may
    do that without handing the links to Python (SQLite copies them in SQL).
    """

    page: int
    scope: LinkClassifier


@dataclass(frozen=True, slots=True)
class PreviousPage:
    """What the crawl a re-crawl starts from stored for one page crawled OK.

    Its validators make the conditional request; on ``304 Not Modified`` its
    result, anchors and links stand in for the body that was not downloaded.
    ``links`` (``(target URL, element, fragment, line, column)``, as recorded)
    are read only when asked for: the engine hands the store ``row`` instead
    (``Recorded``), so a page's links never pass through Python on the way
    from one crawl to the next. ``anchors`` is None when the page's anchors
    were not recorded (no ``--include-fragments``).
    """

    url: str
    etag: str | None
    last_modified: str | None
    status: int | None
    content_type: str | None
    bytes: int | None
    links: tuple[PreviousLink, ...] = ()
    anchors: frozenset[str] | None = None
    row: int = 0  # the page's row in the previous crawl (``Recorded.page``)


@dataclass(frozen=True, slots=True)
class Cookie:
    """One cookie of a crawl's jar, as stored with the crawl (``cookie`` table).

    ``expires_at`` is unix time, None for a session cookie (kept for the
    crawl's life); a cookie at or past its expiry is a deletion.
    """

    domain: str  # without a leading dot
    path: str
    name: str
    value: str  # as the server sent it (quoted if it was)
    host_only: bool = True  # no Domain attribute: sent to this host only
    secure: bool = False
    http_only: bool = False
    expires_at: float | None = None

    def is_expired(self, now: float) -> bool:
        """Is this cookie gone (expired, or deleted by the server)?"""
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True, slots=True)
class LeaseAsk:
    """An engine's lease: how many rows, for how long, and what it reads with them.

    What the engine needs besides the rows comes in the same call
    (``FrontierStore.lease_more``): each call to the store waits behind the
    group commit running on its writer, so a second call doubled the wait.
    ``cookies_since`` is None when the engine keeps no cookie jar.
    """

    limit: int
    ttl_s: float
    cookies_since: float | None = None


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """What ``FrontierStore.lease_more`` hands back (see ``LeaseAsk``).

    ``cookies`` is None when none were read (none asked for, or no row leased);
    ``previous`` is filled for a re-crawl only, by page URL.
    """

    rows: list[LeasedUrl]
    cookies: list[Cookie] | None = None
    previous: dict[str, PreviousPage] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Counts:
    """Frontier and result counters for progress and the summary line."""

    pending: int
    leased: int
    done: int
    pages: int
    broken: int


@dataclass(frozen=True, slots=True)
class CrawlRecord:
    """One row of ``crawl``."""

    id: int
    seeds: list[str]
    config: dict[str, Any]
    state: str
    started_at: float
    finished_at: float | None
    elapsed_s: float
