"""The API's bodies as pydantic models: requests are validated by them, responses
are built from them, and ``openapi`` generates the document from them.

``ServiceCrawlSettings`` is ``CrawlSettings`` with the tighter ranges a shared
service needs (list sizes, depth, URL count); every other field, default and
validator is inherited, so a new crawl option is available here at once.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo

from crawler import urls
from crawler.config import DEFAULT_USER_AGENT, CrawlSettings
from crawler.engine import runner
from crawler.errors import UsageError
from crawler.netguard import parse_networks
from crawler.service.config import MAX_SEEDS
from crawler.service.safety import is_private_host

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
    """An http(s) URL; a private address only when the service allows it."""
    if "://" not in value:  # a directory on the server would be crawled as a local site
        raise ValueError(f"seed {value!r}: not an http(s) URL")
    try:
        (key,) = runner.normalize_seeds([value])
    except UsageError as exc:
        raise ValueError(str(exc)) from exc
    context = info.context or {}
    allow_private = bool(context.get("allow_private", False))
    allowed = parse_networks(list(context.get("allow_networks", [])))
    if not allow_private and is_private_host(_hostname(urls.host_of(key)), allowed):
        raise ValueError(
            f"seed {value!r}: private, loopback or link-local address "
            "(allow it with --allow-network, or --allow-private)"
        )
    return value


def _hostname(authority: str) -> str:
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    return authority.rsplit(":", 1)[0]


Seed = Annotated[str, Field(min_length=1, max_length=MAX_URL_CHARS), AfterValidator(_check_seed)]


class ServiceCrawlSettings(CrawlSettings):
    """The crawl options (as ``crawler crawl`` takes them), with service limits."""

    include: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS)
    exclude: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS)
    no_follow: list[Pattern] = Field(default_factory=list, max_length=MAX_PATTERNS)
    max_depth: int | None = Field(default=None, ge=0, le=10_000)
    max_urls: int | None = Field(default=None, ge=1, le=100_000_000)
    user_agent: str = Field(default=DEFAULT_USER_AGENT, min_length=1, max_length=512)
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_HEADERS)


class CrawlCreate(BaseModel):
    """Body of ``POST /crawls``."""

    model_config = ConfigDict(extra="forbid")

    seeds: list[Seed] = Field(min_length=1, max_length=MAX_SEEDS, description="where it starts")
    settings: ServiceCrawlSettings = Field(default_factory=ServiceCrawlSettings)


class Progress(BaseModel):
    """Live counters; from the database (at most a few seconds old) and the engine."""

    crawled: int = Field(description="URLs done: requested, or recorded as skipped")
    pages: int = Field(description="pages fetched and parsed")
    pending: int = Field(description="URLs waiting in the frontier")
    leased: int = Field(description="URLs taken by a worker, not done yet")
    broken: int = Field(description="broken URLs so far")
    in_flight: int = Field(description="requests in flight now")
    pages_per_s: float = Field(description="pages per second (last seconds while running)")
    urls_per_s: float = Field(description="URLs done per second (last seconds while running)")
    eta_s: float | None = Field(
        description="seconds until the frontier known now is done; None when not running"
    )


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
    report_url: str


class CrawlList(BaseModel):
    """Body of ``GET /crawls``: newest first."""

    crawls: list[CrawlView]
    running: int
    queued: int
    max_running: int


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


class ReportBrokenLink(BaseModel):
    url: str
    status: int | None = None
    error: str | None = None
    sources: list[str]


class ReportDocument(BaseModel):
    """``GET /crawls/{crawl_id}/report?format=json``: the CLI's JSON report."""

    crawl: dict[str, Any]
    summary: dict[str, Any]
    broken: list[ReportBrokenLink]
