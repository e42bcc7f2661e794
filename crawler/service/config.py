"""The service's own settings: where it listens, where it keeps crawls, who may write.

One pydantic model with named defaults, like ``crawler.config``. Precedence,
lowest first: defaults < ``CRAWLER_*`` environment < command-line flags. Crawl
settings are not here: each crawl brings its own in the request body.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from crawler import netguard
from crawler.config import DEFAULT_SHUTDOWN_TIMEOUT_S
from crawler.errors import UsageError
from crawler.service import budget
from crawler.service.flags import (
    BOOLEANS,
    DEFAULT_DATA_DIR,
    DEFAULT_HOST,
    DEFAULT_LOG_FORMAT,
    DEFAULT_LOG_LEVEL,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CRAWL_CONCURRENCY,
    DEFAULT_MAX_HOST_CONCURRENCY,
    DEFAULT_MAX_RUNNING,
    DEFAULT_PORT,
    DEFAULT_READ_TIMEOUT_S,
    ENVIRONMENT,
    FLAGS,
    LISTS,
    TOKEN_FILE,
)

MIN_TOKEN_CHARS = 16
MAX_BODY_BYTES = 64 * 1024
MAX_SEEDS = 100
MAX_QUEUED = 1000
MAX_HOST_LABELS = 50


class ServiceConfig(BaseModel):
    """How ``crawler serve`` runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default=DEFAULT_HOST, min_length=1)
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    db: str | None = Field(
        default=None,
        description="postgresql://… keeps the index and the crawls in PostgreSQL; "
        "unset: SQLite files under data_dir",
    )
    token: str | None = None
    max_running: int = Field(default=DEFAULT_MAX_RUNNING, ge=1, le=64)
    allow_private: bool = False
    allow_networks: list[str] = Field(default_factory=list)
    log_level: Literal["debug", "info", "warning", "error"] = DEFAULT_LOG_LEVEL
    log_format: Literal["console", "json"] = DEFAULT_LOG_FORMAT
    shutdown_timeout_s: float = Field(default=DEFAULT_SHUTDOWN_TIMEOUT_S, ge=0, le=600)
    no_token: bool = False
    public_reads: bool = False
    allowed_hosts: list[str] = Field(default_factory=list)
    local_roots: list[Path] = Field(default_factory=list)
    max_crawl_concurrency: int = Field(default=DEFAULT_MAX_CRAWL_CONCURRENCY, ge=1, le=4096)
    max_host_concurrency: int = Field(default=DEFAULT_MAX_HOST_CONCURRENCY, ge=1, le=1024)
    read_timeout_s: float = Field(default=DEFAULT_READ_TIMEOUT_S, gt=0, le=3600)
    max_connections: int = Field(default=DEFAULT_MAX_CONNECTIONS, ge=1, le=100_000)
    memory_budget: int | None = Field(
        default=None, description="bytes the running crawls share; None: budget.default_budget()"
    )
    public_url: str | None = Field(
        default=None,
        description="the address users reach the service at (its proxy's, say): webhook "
        "bodies link to reports under it; None: they link relative paths",
    )

    @pydantic.field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        """An http(s) URL with a host, maybe a path prefix; kept without its last slash."""
        if value is None or not value.strip():
            return None
        text = value.strip()
        try:
            parsed = urllib.parse.urlsplit(text)
            parsed.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError as exc:
            raise ValueError(f"{text[:100]!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"{text[:100]!r}: an http:// or https:// URL with a host")
        if parsed.query or parsed.fragment or parsed.username or parsed.password:
            raise ValueError(f"{text[:100]!r}: no query, fragment or credentials")
        return text.rstrip("/")

    @pydantic.field_validator("memory_budget", mode="before")
    @classmethod
    def _size(cls, value: Any) -> Any:
        if isinstance(value, str):
            return budget.parse_size(value) if value.strip() else None
        return value

    @pydantic.model_validator(mode="after")
    def _budget_fits(self) -> ServiceConfig:
        if self.memory_budget is not None and self.memory_budget < budget.MIN_MEMORY_BUDGET_BYTES:
            raise ValueError(
                f"--memory-budget: at least {budget.MIN_MEMORY_BUDGET_BYTES // budget.MIB} MiB"
            )
        try:
            budget.check_budget(self.memory_budget_bytes, self.max_running)
        except ValueError as exc:
            raise ValueError(f"--memory-budget: {exc}") from None
        return self

    @property
    def memory_budget_bytes(self) -> int:
        return self.memory_budget if self.memory_budget is not None else budget.default_budget()

    @pydantic.field_validator("token")
    @classmethod
    def _token_strength(cls, token: str | None) -> str | None:
        # A token read from a file or a secret often ends with a newline: the
        # client sends it without, so it would never match.
        token = None if token is None else token.strip()
        if not token:
            return None
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"must be at least {MIN_TOKEN_CHARS} characters")
        if not token.isascii() or not token.isprintable() or " " in token:
            raise ValueError("must be printable ASCII without spaces")
        return token

    @pydantic.field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, names: list[str]) -> list[str]:
        return [name.strip().lower() for name in names if name.strip()]

    @pydantic.field_validator("local_roots")
    @classmethod
    def _roots(cls, roots: list[Path]) -> list[Path]:
        return [root.resolve() for root in roots]

    @pydantic.model_validator(mode="after")
    def _one_token_mode(self) -> ServiceConfig:
        if self.no_token and self.token is not None:
            raise ValueError("--no-token and a token: choose one")
        return self

    @pydantic.field_validator("allow_networks")
    @classmethod
    def _networks(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            netguard.check_network(entry)  # ValueError names it; 0.0.0.0/0 refused
        return entries

    @pydantic.field_validator("db")
    @classmethod
    def _postgres_only(cls, db: str | None) -> str | None:
        if db is None or db == "":
            return None
        if not db.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (SQLite needs no --db: --data-dir)")
        return db

    @property
    def crawls_dir(self) -> Path:
        return self.data_dir / "crawls"

    @property
    def index_path(self) -> Path:
        return self.data_dir / "service.db"


def resolve(flags: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> ServiceConfig:
    """Merge defaults < environment < flags (flags given as None are unset)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field, name in ENVIRONMENT.items():
        if name in environ:
            values[field] = environ[name]
            sources[field] = name
    for field, value in flags.items():
        if value is not None:
            values[field] = value
            sources[field] = FLAGS.get(field, "--" + field.removesuffix("_s").replace("_", "-"))
    for name in LISTS:
        if isinstance(values.get(name), str):  # CRAWLER_ALLOW_NETWORKS=a,b
            values[name] = [n for n in values[name].split(",") if n.strip()]
    for name in BOOLEANS:
        if isinstance(values.get(name), str):
            values[name] = _env_bool(values[name], sources[name])
    try:
        return ServiceConfig.model_validate(values)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        if not field:
            raise UsageError(message) from exc
        raise UsageError(f"invalid {sources.get(field, field)}: {message}") from exc


def with_token(config: ServiceConfig) -> ServiceConfig:
    """The config with a token: the configured one, else the one kept in the data
    directory (``token``, mode 0600), created on first start. ``--no-token`` keeps none.

    Without a token anyone who reaches the port may read and write, and a
    reverse proxy on this machine makes every request look local; so the
    service that starts with no options is the safe one.
    """
    if config.token is not None or config.no_token:
        return config
    path = config.data_dir / TOKEN_FILE
    try:
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        token = secrets.token_urlsafe(32)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(token + "\n")
    try:
        return ServiceConfig.model_validate({**config.model_dump(), "token": token})
    except pydantic.ValidationError as exc:
        reason = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise UsageError(f"invalid token in {path}: {reason}; delete it to get a new one") from exc


def _env_bool(raw: str, name: str) -> bool:
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise UsageError(f"invalid {name}: expected true or false, got {raw!r}")


def is_loopback_bind(host: str) -> bool:
    """Does listening on ``host`` keep the service to this machine?"""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
