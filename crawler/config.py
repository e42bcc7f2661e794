"""The crawl's settings: one pydantic model, with the defaults as named constants.

The CLI's help text reuses these constants, so a default is written once.
Precedence (lowest first): defaults < config file < ``CRAWLER_*`` environment
< command-line flags.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_DB = "crawl.db"
DEFAULT_SCOPE: Literal["host", "domain", "prefix"] = "host"
DEFAULT_MAX_REDIRECTS = 10
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_RETRY_WAIT_S = 1.0
DEFAULT_MAX_RETRY_AFTER_S = 60.0
DEFAULT_MAX_CONCURRENCY = 32
DEFAULT_HOST_CONCURRENCY = 8
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
DEFAULT_USER_AGENT = "crawler/0.1 (link checker)"
DEFAULT_LEASE_TTL_S = 60.0
DEFAULT_LEASE_BATCH = 256
DEFAULT_SHUTDOWN_TIMEOUT_S = 10.0

Scope = Literal["host", "domain", "prefix"]
Durability = Literal["normal", "full"]


class CrawlSettings(BaseModel):
    """Everything that decides what a crawl does; stored with the crawl for resume."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: Scope = DEFAULT_SCOPE
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    no_follow: list[str] = Field(default_factory=list)
    max_depth: int | None = Field(default=None, ge=0)
    max_urls: int | None = Field(default=None, ge=1)
    internal_only: bool = False
    max_redirects: int = Field(default=DEFAULT_MAX_REDIRECTS, ge=0, le=100)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=3600)
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0, le=20)
    retry_wait_s: float = Field(default=DEFAULT_RETRY_WAIT_S, ge=0, le=600)
    max_retry_after_s: float = Field(default=DEFAULT_MAX_RETRY_AFTER_S, ge=0, le=3600)
    max_concurrency: int = Field(default=DEFAULT_MAX_CONCURRENCY, ge=1, le=4096)
    host_concurrency: int = Field(default=DEFAULT_HOST_CONCURRENCY, ge=1, le=1024)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)
    user_agent: str = DEFAULT_USER_AGENT
    headers: dict[str, str] = Field(default_factory=dict)
    lease_ttl_s: float = Field(default=DEFAULT_LEASE_TTL_S, ge=1)
    lease_batch: int = Field(default=DEFAULT_LEASE_BATCH, ge=1, le=10_000)

    @field_validator("include", "exclude", "no_follow")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
        return patterns

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                raise ValueError(f"invalid header name {name!r}")
            if "\n" in value or "\r" in value:
                raise ValueError(f"header {name!r} has a line break in its value")
        return headers
