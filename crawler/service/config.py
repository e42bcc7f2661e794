"""The service's own settings: where it listens, where it keeps crawls, who may write.

One pydantic model with named defaults, like ``crawler.config``. Precedence,
lowest first: defaults < ``CRAWLER_*`` environment < command-line flags. Crawl
settings are not here: each crawl brings its own in the request body.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from crawler import netguard
from crawler.config import DEFAULT_SHUTDOWN_TIMEOUT_S
from crawler.errors import UsageError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_DATA_DIR = "crawler-data"
DEFAULT_MAX_RUNNING = 2
DEFAULT_LOG_LEVEL: Literal["info"] = "info"
DEFAULT_LOG_FORMAT: Literal["json"] = "json"
MIN_TOKEN_CHARS = 16
MAX_BODY_BYTES = 64 * 1024
MAX_SEEDS = 100
MAX_QUEUED = 1000
MAX_HOST_LABELS = 50

# field -> environment variable; flags are derived from the same names.
ENVIRONMENT = {
    "host": "CRAWLER_HOST",
    "port": "CRAWLER_PORT",
    "data_dir": "CRAWLER_DATA_DIR",
    "token": "CRAWLER_TOKEN",
    "max_running": "CRAWLER_MAX_RUNNING",
    "allow_private": "CRAWLER_ALLOW_PRIVATE",
    "allow_networks": "CRAWLER_ALLOW_NETWORKS",
    "log_level": "CRAWLER_LOG_LEVEL",
    "log_format": "CRAWLER_LOG_FORMAT",
    "shutdown_timeout_s": "CRAWLER_SHUTDOWN_TIMEOUT_S",
}

# Flags whose name is not the field's (a repeatable flag is singular).
FLAGS = {"allow_networks": "--allow-network"}


class ServiceConfig(BaseModel):
    """How ``crawler serve`` runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default=DEFAULT_HOST, min_length=1)
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    data_dir: Path = Path(DEFAULT_DATA_DIR)
    token: str | None = None
    max_running: int = Field(default=DEFAULT_MAX_RUNNING, ge=1, le=64)
    allow_private: bool = False
    allow_networks: list[str] = Field(default_factory=list)
    log_level: Literal["debug", "info", "warning", "error"] = DEFAULT_LOG_LEVEL
    log_format: Literal["console", "json"] = DEFAULT_LOG_FORMAT
    shutdown_timeout_s: float = Field(default=DEFAULT_SHUTDOWN_TIMEOUT_S, ge=0, le=600)

    @pydantic.field_validator("token")
    @classmethod
    def _token_strength(cls, token: str | None) -> str | None:
        if token is None or token == "":
            return None
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"must be at least {MIN_TOKEN_CHARS} characters")
        return token

    @pydantic.field_validator("allow_networks")
    @classmethod
    def _networks(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            netguard.check_network(entry)  # ValueError names it; 0.0.0.0/0 refused
        return entries

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
    if isinstance(values.get("allow_networks"), str):  # CRAWLER_ALLOW_NETWORKS=a,b
        values["allow_networks"] = [n for n in values["allow_networks"].split(",") if n.strip()]
    if isinstance(values.get("allow_private"), str):
        values["allow_private"] = _env_bool(values["allow_private"], sources["allow_private"])
    try:
        return ServiceConfig.model_validate(values)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        raise UsageError(f"invalid {sources.get(field, field)}: {first['msg']}") from exc


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
