"""The API's bodies for crawl definitions, their runs, diffs and webhook deliveries.

Validated as strictly as ``POST /crawls``: a definition's ``seeds`` and
``settings`` are a ``CrawlCreate`` body's (same validators, same operator
limits, applied by the same handler code), plus a ``schedule``, ``keep_runs``
and an optional ``webhook``.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)

from crawler import urls
from crawler.errors import InvalidURLError
from crawler.service import schedule
from crawler.service.config import MAX_SEEDS
from crawler.service.scheduler import DEFAULT_KEEP_RUNS
from crawler.service.schemas import (
    MAX_URL_CHARS,
    CrawlView,
    ReportBrokenLink,
    Seed,
    ServiceCrawlSettings,
    is_refused_host,
)

MAX_KEEP_RUNS = 1000
MIN_SECRET_CHARS = 16


def _check_webhook_url(value: str, info: ValidationInfo) -> str:
    """An http(s) URL, refused at once when it names an address the crawls' guard
    refuses (as a seed is); a name is checked by the guard each time it is called."""
    if not urls.is_http(value):
        raise ValueError(f"webhook {value[:200]!r}: not an http(s) URL")
    try:
        key, _ = urls.normalize(value)
    except InvalidURLError as exc:
        raise ValueError(f"webhook {value[:200]!r}: {exc}") from exc
    if is_refused_host(key, info.context or {}):
        raise ValueError(
            f"webhook {value[:200]!r}: private, loopback or link-local address "
            "(allow it with --allow-network, or --allow-private)"
        )
    return value


def _check_every(value: str) -> str:
    schedule.interval_s(value)
    return value


class Schedule(BaseModel):
    """Either ``every`` (``"30m"``, ``"6h"``, ``"1d"``) or ``cron`` with a ``timezone``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    every: Annotated[str, AfterValidator(_check_every)] | None = Field(
        default=None, max_length=16, description="an interval: a number and s, m, h or d"
    )
    cron: Annotated[str, AfterValidator(schedule.check_cron)] | None = Field(
        default=None, max_length=200, description="a five-field cron expression"
    )
    timezone: Annotated[str, AfterValidator(schedule.check_timezone)] = Field(
        default=schedule.DEFAULT_TIMEZONE,
        max_length=64,
        description="IANA timezone the cron expression is read in",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Schedule:
        if (self.every is None) == (self.cron is None):
            raise ValueError("give either every or cron")
        return self


class Webhook(BaseModel):
    """Called when a run finishes with new broken links (README, "Webhooks")."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    url: Annotated[
        str, Field(min_length=1, max_length=MAX_URL_CHARS), AfterValidator(_check_webhook_url)
    ]
    secret: str = Field(
        min_length=MIN_SECRET_CHARS,
        max_length=256,
        description="HMAC-SHA256 key of the X-Crawler-Signature header; never shown again",
    )


class DefinitionCreate(BaseModel):
    """Body of ``POST /definitions`` and ``PUT /definitions/{definition_id}``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(default="", max_length=200)
    seeds: list[Seed] = Field(min_length=1, max_length=MAX_SEEDS)
    settings: ServiceCrawlSettings = Field(default_factory=ServiceCrawlSettings)
    schedule: Schedule
    keep_runs: int = Field(
        default=DEFAULT_KEEP_RUNS, ge=1, le=MAX_KEEP_RUNS, description="runs kept; older deleted"
    )
    webhook: Webhook | None = None


class WebhookView(BaseModel):
    url: str
    has_secret: bool


class DefinitionView(BaseModel):
    """A definition as readers see it (no webhook secret, redacted settings)."""

    id: int
    name: str
    seeds: list[str]
    settings: dict[str, Any]
    schedule: dict[str, Any]
    keep_runs: int
    webhook: WebhookView | None
    created_at: dt.datetime
    updated_at: dt.datetime
    next_run_at: dt.datetime | None = Field(description="when the schedule is due next")
    active_run: int | None = Field(description="the run queued, running or paused, if any")
    last_finished_run: int | None
    runs_url: str
    diff_url: str
    dashboard_url: str


class DefinitionList(BaseModel):
    definitions: list[DefinitionView]


class RunList(BaseModel):
    """Body of ``GET /definitions/{definition_id}/runs``: newest first."""

    definition_id: int
    runs: list[CrawlView]


class DiffCounts(BaseModel):
    new_broken: int
    fixed: int
    still_broken: int
    pages_added: int
    pages_removed: int


class WebhookLink(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    status: int | None
    error: str | None
    sources: list[str] = Field(description="up to 5 pages linking to it")


class WebhookBody(BaseModel):
    """What a definition's webhook receives (``scheduler.webhook_body``), signed in the
    ``X-Crawler-Signature`` header."""

    model_config = ConfigDict(extra="forbid")

    event: Literal["run_finished"]
    definition_id: int
    crawl_id: int
    previous_crawl_id: int
    counts: DiffCounts
    new_broken: list[WebhookLink] = Field(description="the first 100 new broken URLs")
    new_broken_truncated: bool
    report_url: str = Field(
        description="absolute under the service's --public-url; a path when it has none"
    )
    diff_url: str
    dashboard_url: str = Field(description="the definition's runs and last diff, in HTML")
    note: str | None = Field(default=None, description="present when the URLs are paths")


class DiffView(BaseModel):
    """What changed from one run to another."""

    definition_id: int
    from_crawl: int
    to_crawl: int
    counts: DiffCounts
    new_broken: list[ReportBrokenLink]
    fixed: list[ReportBrokenLink]
    still_broken: list[ReportBrokenLink]
    pages_added: list[str]
    pages_removed: list[str]


class DeliveryView(BaseModel):
    id: int
    definition_id: int
    crawl_id: int
    url: str
    state: str = Field(description="pending, delivered or failed")
    attempts: int
    created_at: dt.datetime
    next_attempt_at: dt.datetime | None = Field(description="None unless pending")
    last_status: int | None
    last_error: str | None
    finished_at: dt.datetime | None


class DeliveryList(BaseModel):
    definition_id: int
    deliveries: list[DeliveryView]
