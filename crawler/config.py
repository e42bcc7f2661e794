"""The crawl's settings, with the defaults as named constants.

``CrawlSettings`` decides what a crawl does and is stored with the crawl, so a
resume continues it exactly. ``RunOptions`` decides how this process runs and
reports (database path, output, logging) and is not stored. The CLI's flags,
the config file keys and the ``CRAWLER_*`` variables are all derived from the
field names here (see ``crawler.cli.options``), and the service's API models
are built from them (``crawler.service.settings_schema``), so a setting is
declared once. They are ``SettingsModel``s, not pydantic models: every crawl
validates them at start-up, and pydantic's import was most of that start-up.
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Literal

from crawler import netguard
from crawler.patterns import compile_pattern, compile_substitution
from crawler.settings_model import SettingsModel, setting, validates
from crawler.status import parse_accept

DEFAULT_DB = "crawl.db"
DEFAULT_FORMAT = "text"
# lychee's names for its terminal formats; ours is text.
FORMAT_ALIASES = {"compact": "text", "detailed": "text"}
DEFAULT_SCOPE: Literal["host", "domain", "prefix"] = "host"
DEFAULT_MAX_REDIRECTS = 10
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_RETRY_WAIT_S = 1.0
DEFAULT_MAX_RETRY_AFTER_S = 60.0
DEFAULT_MAX_CONCURRENCY = 32
DEFAULT_HOST_CONCURRENCY = 8
DEFAULT_HOST_REQUEST_INTERVAL_S = 0.0
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
DEFAULT_USER_AGENT = "crawler/0.1 (link checker)"
DEFAULT_ACCEPT = ["200..=299"]
DEFAULT_LEASE_TTL_S = 60.0
DEFAULT_LEASE_BATCH = 256
DEFAULT_SHUTDOWN_TIMEOUT_S = 10.0
DEFAULT_INDEX_FILES = ["index.html", "index.htm"]
# A crawl's cookie jar keeps at most this many cookies per host (RFC 6265
# section 6.1 asks for at least 50 per domain); further new ones are refused.
DEFAULT_MAX_COOKIES_PER_HOST = 50
# A host whose links are only checked gets its robots.txt read (for its
# Crawl-delay) once this process has more than this many URLs to check on it.
DEFAULT_CHECKED_HOST_ROBOTS_AFTER = 3
# Rendering (--render): pages loaded in headless Chromium, a few at a time.
DEFAULT_RENDER_TIMEOUT_S = 10.0
DEFAULT_RENDER_CONCURRENCY = 2
DEFAULT_RENDER_RESTART_PAGES = 500
DEFAULT_RENDER_MAX_RSS_MB = 1024

Scope = Literal["host", "domain", "prefix"]
Durability = Literal["normal", "full"]
Method = Literal["head", "get"]


class HostSettings(SettingsModel):
    """Per-host overrides, as lychee's ``[hosts."github.com"]``."""

    concurrency: int | None = setting(default=None, ge=1, le=1024)
    request_interval_s: float | None = setting(default=None, ge=0, le=3600)
    headers: dict[str, str] = setting(default_factory=dict)
    render: bool | None = None  # None: as the crawl's --render


class CrawlSettings(SettingsModel):
    """Everything that decides what a crawl does; stored with the crawl for resume."""

    scope: Scope = DEFAULT_SCOPE
    include: list[str] = setting(default_factory=list)
    exclude: list[str] = setting(default_factory=list)
    no_follow: list[str] = setting(default_factory=list)
    max_depth: int | None = setting(default=None, ge=0)
    max_urls: int | None = setting(default=None, ge=1)
    internal_only: bool = False
    include_fragments: bool = False
    robots: bool = True
    sitemaps: list[str] = setting(default_factory=list)
    use_sitemaps: bool = False
    accept: list[str] = setting(default_factory=lambda: list(DEFAULT_ACCEPT))
    blocked_as_broken: bool = False
    exclude_all_private: bool = False
    allow_networks: list[str] = setting(default_factory=list)
    max_cache_age_s: float | None = setting(default=None, ge=0)
    max_redirects: int = setting(default=DEFAULT_MAX_REDIRECTS, ge=0, le=100)
    timeout_s: float = setting(default=DEFAULT_TIMEOUT_S, gt=0, le=3600)
    max_retries: int = setting(default=DEFAULT_MAX_RETRIES, ge=0, le=20)
    retry_wait_s: float = setting(default=DEFAULT_RETRY_WAIT_S, ge=0, le=600)
    max_retry_after_s: float = setting(default=DEFAULT_MAX_RETRY_AFTER_S, ge=0, le=3600)
    max_concurrency: int = setting(default=DEFAULT_MAX_CONCURRENCY, ge=1, le=4096)
    host_concurrency: int = setting(default=DEFAULT_HOST_CONCURRENCY, ge=1, le=1024)
    host_request_interval_s: float = setting(default=DEFAULT_HOST_REQUEST_INTERVAL_S, ge=0, le=3600)
    max_body_bytes: int = setting(default=DEFAULT_MAX_BODY_BYTES, ge=1024, le=1 << 31)
    user_agent: str = DEFAULT_USER_AGENT
    headers: dict[str, str] = setting(default_factory=dict)
    basic_auth: list[str] = setting(default_factory=list)
    cookie_jar: str | None = None
    cookies: bool = True
    insecure: bool = False
    method: Method = "head"
    hosts: dict[str, HostSettings] = setting(default_factory=dict)
    root_dir: str | None = None
    base_url: str | None = None
    remap: list[str] = setting(default_factory=list)
    fallback_extensions: list[str] = setting(default_factory=list)
    index_files: list[str] = setting(default_factory=lambda: list(DEFAULT_INDEX_FILES))
    exclude_path: list[str] = setting(default_factory=list)  # local files not read for links
    lease_ttl_s: float = setting(default=DEFAULT_LEASE_TTL_S, ge=1, le=3600)
    lease_batch: int = setting(default=DEFAULT_LEASE_BATCH, ge=1, le=10_000)
    render: bool = False
    render_timeout_s: float = setting(default=DEFAULT_RENDER_TIMEOUT_S, gt=0, le=600)
    render_concurrency: int = setting(default=DEFAULT_RENDER_CONCURRENCY, ge=1, le=64)
    browser: str | None = None
    render_media: bool = False
    render_restart_pages: int = setting(default=DEFAULT_RENDER_RESTART_PAGES, ge=1, le=1_000_000)
    render_max_rss_mb: int = setting(default=DEFAULT_RENDER_MAX_RSS_MB, ge=64, le=1 << 20)
    # Links followed per page (the rest are dropped, with a warning); None: all.
    # The service sets it from its memory budget (crawler/service/budget.py).
    max_links_per_page: int | None = setting(default=None, ge=1)

    @validates("include", "exclude", "no_follow", "exclude_path")
    def _compiles(patterns: list[str]) -> list[str]:
        for pattern in patterns:
            compile_pattern(pattern)  # ValueError naming the pattern and RE2's reason
        return patterns

    @validates("headers")
    def _header_names(headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                raise ValueError(f"invalid header name {name!r}")
            if "\n" in value or "\r" in value:
                raise ValueError(f"header {name!r} has a line break in its value")
        return headers

    @validates("accept")
    def _accept_parses(ranges: list[str]) -> list[str]:
        parse_accept(ranges)
        return ranges

    @validates("basic_auth")
    def _basic_auth_form(entries: list[str]) -> list[str]:
        for entry in entries:
            pattern, sep, credentials = entry.partition(" ")
            if not sep or ":" not in credentials:
                raise ValueError(f"expected 'URL-REGEX user:password', got {entry!r}")
            compile_pattern(pattern)
        return entries

    @validates("remap")
    def _remap_form(entries: list[str]) -> list[str]:
        for entry in entries:
            parts = entry.split()
            if len(parts) != 2:
                raise ValueError(f"expected 'REGEX REPLACEMENT', got {entry!r}")
            compile_substitution(parts[0])  # ValueError with RE2's reason
        return entries

    @validates("fallback_extensions", "index_files")
    def _comma_lists(entries: list[str]) -> list[str]:
        names = [part.strip() for entry in entries for part in entry.split(",")]
        names = [name.lstrip(".") if name.startswith(".") else name for name in names if name]
        for name in names:
            if "/" in name or "\\" in name or name in (".", ".."):
                raise ValueError(f"expected a file name or extension, got {name!r}")
        return names

    @validates("base_url")
    def _base_is_http(url: str | None) -> str | None:
        if url is not None and not url.lower().startswith(("http://", "https://")):
            raise ValueError(f"expected an http(s) URL, got {url!r}")
        return url

    @validates("allow_networks")
    def _networks_parse(entries: list[str]) -> list[str]:
        for entry in entries:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError as exc:
                raise ValueError(f"invalid network {entry!r}: {exc}") from exc
            netguard.check_network(entry)  # 0.0.0.0/0 would switch the guard off
        return entries

    def renders(self, host: str) -> bool:
        """Are this host's pages loaded in the browser (``--render``, or its host setting)?"""
        overrides = self.host_settings(host)
        if overrides is not None and overrides.render is not None:
            return overrides.render
        return self.render

    def may_render(self) -> bool:
        """Is any page of this crawl rendered (so a browser is needed)?"""
        return self.render or any(h.render for h in self.hosts.values())

    def host_settings(self, host: str) -> HostSettings | None:
        """The per-host overrides for ``host`` (authority, or hostname alone)."""
        if not self.hosts:
            return None
        return self.hosts.get(host) or self.hosts.get(host.rsplit(":", 1)[0])


class RunOptions(SettingsModel):
    """How this process runs and reports; not part of the crawl."""

    db: str = DEFAULT_DB
    format: str = DEFAULT_FORMAT
    output: str | None = None
    no_progress: bool = False
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    log_format: Literal["console", "json"] = "console"
    durability: Durability = "normal"
    workers: int = setting(default=1, ge=1, le=64)
    parse_helpers: int | None = setting(default=None, ge=0, le=64)
    shutdown_timeout_s: float = setting(default=DEFAULT_SHUTDOWN_TIMEOUT_S, ge=0, le=3600)
    # Exit 2 on any broken link, or only on links newly broken since the previous
    # finished crawl of the same seeds (``crawler.report.diff``).
    fail_on: Literal["any", "new"] = "any"

    @validates("format")
    def _format_alias(name: str) -> str:
        name = name.lower()
        return FORMAT_ALIASES.get(name, name)

    def helper_processes(self) -> int:
        """Parse helpers to start: as given, else one when this process has a core to spare."""
        if self.parse_helpers is not None:
            return self.parse_helpers
        return 1 if self.workers == 1 and (os.cpu_count() or 1) >= 2 else 0
