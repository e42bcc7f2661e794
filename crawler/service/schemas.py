"""The API's bodies as pydantic models: requests are validated by them, responses
are built from them, and ``openapi`` generates the document from them.

``ServiceCrawlSettings`` is ``CrawlSettings``' pydantic twin with the tighter
ranges a shared service needs (list sizes, depth, URL count); every other
field, default and validator comes from the one declaration, so a new crawl
option is available here at once.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo

from crawler import urls
from crawler.config import DEFAULT_USER_AGENT, CrawlSettings
from crawler.engine import runner
from crawler.errors import InvalidURLError, UsageError
from crawler.netguard import parse_networks
from crawler.service.config import MAX_SEEDS
from crawler.service.safety import is_private_host
from crawler.service.settings_schema import pydantic_twin

MAX_URL_CHARS = 2048
MAX_PATTERNS = 100
MAX_HEADERS = 50

CrawlState = Literal[
    "queued",
    "running",
    "pausing",
    "paused",
    "cancelling",
    "cancelled",
    "finished",
    "failed",
    "deleting",
]
Pattern = Annotated[str, Field(max_length=1000)]


def _check_seed(value: str, info: ValidationInfo) -> str:
    """An http(s) URL; a private address only when the service allows it; a
    directory only under a root the operator named (``--local-root``)."""
    context = info.context or {}
    if "://" not in value:
        return _local_seed(value, [Path(root) for root in context.get("local_roots", [])])
    try:
        (key,) = runner.normalize_seeds([value])
    except UsageError as exc:
        raise ValueError(str(exc)) from exc
    if is_refused_host(key, context):
        raise ValueError(
            f"seed {value!r}: private, loopback or link-local address "
            "(allow it with --allow-network, or --allow-private)"
        )
    return value


def is_refused_host(key: str, context: dict[str, Any]) -> bool:
    """Is the normalized URL's host an address (or ``localhost``) the service's guard
    refuses, with the operator's ``--allow-private`` and ``--allow-network`` in
    ``context``? Names resolving to one are refused when resolved."""
    allow_private = bool(context.get("allow_private", False))
    allowed = parse_networks(list(context.get("allow_networks", [])))
    return not allow_private and is_private_host(_hostname(urls.host_of(key)), allowed)


def _local_seed(value: str, roots: list[Path]) -> str:
    """The directory's absolute path, if it is one under ``roots``.

    The same answer whether the path exists or not, and whatever it is: the
    API must not tell its callers what is on the server's disk.
    """
    refused = ValueError(
        f"seed {value[:200]!r}: not an http(s) URL (local directories are crawled with the "
        "CLI, or under a root the service's operator allows with --local-root)"
    )
    path = Path(value)
    if not roots or not path.is_absolute():
        raise refused
    try:
        resolved = path.resolve()
        inside = any(resolved == root or root in resolved.parents for root in roots)
        if not inside or not resolved.is_dir():
            raise refused
    except OSError:
        raise refused from None
    return str(resolved)


def _hostname(authority: str) -> str:
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    return authority.rsplit(":", 1)[0]


Seed = Annotated[str, Field(min_length=1, max_length=MAX_URL_CHARS), AfterValidator(_check_seed)]


def _check_sitemap(value: str) -> str:
    """An http(s) URL (the guard decides at request time whether it may be fetched)."""
    if not urls.is_http(value):
        raise ValueError(f"sitemap {value[:200]!r}: not an http(s) URL")
    try:
        urls.normalize(value)
    except InvalidURLError as exc:
        raise ValueError(f"sitemap {value[:200]!r}: {exc}") from exc
    return value


def _no_control(value: str) -> str:
    """No CR, LF or other control character: it would split or forge a header."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("control characters (CR, LF, ...) are not allowed")
    return value


SitemapUrl = Annotated[
    str, Field(min_length=1, max_length=MAX_URL_CHARS), AfterValidator(_check_sitemap)
]


_SERVICE_LIMITS: dict[str, tuple[Any, Any]] = {  # (type, Field(...))
    "include": (list[Pattern], Field(default_factory=list, max_length=MAX_PATTERNS)),
    "exclude": (list[Pattern], Field(default_factory=list, max_length=MAX_PATTERNS)),
    "no_follow": (list[Pattern], Field(default_factory=list, max_length=MAX_PATTERNS)),
    "max_depth": (int | None, Field(default=None, ge=0, le=10_000)),
    "max_urls": (int | None, Field(default=None, ge=1, le=100_000_000)),
    "user_agent": (
        Annotated[str, AfterValidator(_no_control)],
        Field(default=DEFAULT_USER_AGENT, min_length=1, max_length=512),
    ),
    "sitemaps": (list[SitemapUrl], Field(default_factory=list, max_length=MAX_SEEDS)),
    "headers": (dict[str, str], Field(default_factory=dict, max_length=MAX_HEADERS)),
}

if TYPE_CHECKING:  # built at run time from CrawlSettings' declaration, below

    class ServiceCrawlSettings(BaseModel):
        """The crawl options, with service limits."""

else:
    ServiceCrawlSettings = pydantic_twin(
        CrawlSettings,
        name="ServiceCrawlSettings",
        overrides=_SERVICE_LIMITS,
        doc="""The crawl options (as ``crawler crawl`` takes them), with service limits.

    Strict types: ``"3"`` or ``true`` for a number is a mistake to report, not
    to guess at.
    """,
    )


class CrawlCreate(BaseModel):
    """Body of ``POST /crawls``."""

    model_config = ConfigDict(extra="forbid")

    seeds: list[Seed] = Field(min_length=1, max_length=MAX_SEEDS, description="where it starts")
    settings: ServiceCrawlSettings = Field(default_factory=ServiceCrawlSettings)


class Progress(BaseModel):
    """Live counters; from the database (at most a few seconds old) and the engine."""

    crawled: int = Field(description="URLs done: requested, or recorded as skipped")
    pages: int = Field(description="pages crawled with an OK answer (the report's summary.pages)")
    pending: int = Field(description="URLs waiting in the frontier")
    leased: int = Field(description="URLs taken by a worker, not done yet")
    broken: int = Field(
        description="broken links so far, redirects followed (the report's summary.broken)"
    )
    in_flight: int = Field(description="requests in flight now")
    pages_per_s: float = Field(description="pages per second (last seconds while running)")
    urls_per_s: float = Field(description="URLs done per second (last seconds while running)")
    eta_s: float | None = Field(
        description="seconds until the frontier known now is done; None when not running"
    )


class WorkerView(BaseModel):
    """One process working on a running crawl: the service's own, or a `crawler work`."""

    id: str = Field(description="the start of the worker's lease-owner token")
    hostname: str
    pid: int
    started_at: dt.datetime
    heartbeat_at: dt.datetime = Field(description="last lease renewal")
    crawled: int = Field(description="URLs this worker completed")
    pages: int = Field(description="pages this worker fetched and parsed")
    pages_per_s: float = Field(description="its pages per second over the last seconds")
    urls_per_s: float = Field(description="its URLs done per second over the last seconds")


class CrawlView(BaseModel):
    """One crawl: its state, what it was asked to do, and its progress."""

    id: int
    state: CrawlState
    seeds: list[str]
    settings: dict[str, Any] = Field(description="as recorded; header values redacted")
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    queue_position: int | None = Field(description="1 = next to start; None unless queued")
    error: str | None = Field(description="why the crawl failed")
    progress: Progress
    workers: list[WorkerView] = Field(
        description="processes working on it now (only while running); on PostgreSQL "
        "`crawler work` processes on other machines too"
    )
    report_url: str


class WorkerList(BaseModel):
    """Body of ``GET /crawls/{crawl_id}/workers``."""

    crawl_id: int
    state: CrawlState
    workers: list[WorkerView]


class CrawlList(BaseModel):
    """Body of ``GET /crawls``: newest first, a page at a time (``limit``, ``before``)."""

    crawls: list[CrawlView]
    running: int
    queued: int
    max_running: int
    total: int = Field(description="crawls in all")
    next: str | None = Field(description="the next (older) page, None on the last")


class ErrorDetail(BaseModel):
    field: str | None = Field(description="dotted path of the field, e.g. settings.max_depth")
    message: str
    type: str


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer."""

    error: str = Field(description="one line for a person")
    field: str | None = Field(description="the first offending field, when there is one")
    details: list[ErrorDetail] = Field(default_factory=list)


class Health(BaseModel):
    status: Literal["ok"]


class Ready(BaseModel):
    ready: bool
    checks: dict[str, str] = Field(description="check name -> 'ok' or what is wrong")


class ReportLocation(BaseModel):
    source: str
    line: int | None = Field(default=None, description="1-based; null when unknown")
    column: int | None = Field(default=None, description="1-based, in characters")


class ReportBrokenLink(BaseModel):
    url: str
    status: int | None = None
    error: str | None = None
    sources: list[str]
    locations: list[ReportLocation] = Field(
        default_factory=list, description="where each source first writes the link"
    )


class ReportDocument(BaseModel):
    """``GET /crawls/{crawl_id}/report?format=json``: the CLI's JSON report."""

    crawl: dict[str, Any]
    summary: dict[str, Any]
    broken: list[ReportBrokenLink]
