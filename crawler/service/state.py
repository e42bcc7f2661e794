"""What every handler reaches through the app, and the one error type they raise.

``ApiError`` becomes the JSON ``ErrorBody`` in ``middleware``; handlers never
build error responses themselves, so every error has the same shape.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic
from aiohttp import web

from crawler.service.config import ServiceConfig
from crawler.service.manager import CrawlManager
from crawler.service.metrics import ServiceMetrics
from crawler.service.scheduler import Scheduler
from crawler.service.schemas import ErrorBody, ErrorDetail
from crawler.service.webhooks import WebhookSender
from crawler.settings_model import SettingsError


@dataclass
class Service:
    """The running service: its settings, its crawls and its metrics."""

    config: ServiceConfig
    metrics: ServiceMetrics
    manager: CrawlManager
    scheduler: Scheduler
    started_at: float = field(default_factory=time.time)
    stopping: bool = False

    @classmethod
    def create(cls, config: ServiceConfig) -> Service:
        metrics = ServiceMetrics()
        manager = CrawlManager(config, metrics)
        webhooks = WebhookSender(
            lambda: manager.store,
            time.time,
            lambda definition_id: None,  # the scheduler's, below
            allow_private=config.allow_private,
            allow_networks=list(config.allow_networks),
        )
        scheduler = Scheduler(manager, webhooks, public_url=config.public_url)
        webhooks.secret_of = scheduler.secret_of
        return cls(config, metrics, manager, scheduler)


SERVICE = web.AppKey("service", Service)
OPENAPI = web.AppKey("openapi", dict[str, Any])


class ApiError(Exception):
    """An answer other than success; ``field`` names the offending input."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: str | None = None,
        details: Sequence[ErrorDetail] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(error=message, field=field, details=list(details))
        self.headers = headers or {}

    @classmethod
    def from_validation(cls, exc: pydantic.ValidationError, prefix: str = "") -> ApiError:
        """422 naming each field; malformed JSON is a 400."""
        details = []
        for error in exc.errors(include_url=False):
            loc = field_path(error["loc"], prefix)
            message = error["msg"].removeprefix("Value error, ")
            details.append(ErrorDetail(field=loc, message=message, type=error["type"]))
        if details[0].type == "json_invalid":
            return cls(400, details[0].message, details=details)
        return cls.unprocessable(details)

    @classmethod
    def from_settings(cls, exc: SettingsError, prefix: str = "") -> ApiError:
        """422 naming the field of the crawl settings that did not validate."""
        message = exc.message.removeprefix("Value error, ")
        field = field_path(exc.loc, prefix)
        return cls.unprocessable([ErrorDetail(field=field, message=message, type="value_error")])

    @classmethod
    def unprocessable(cls, details: list[ErrorDetail]) -> ApiError:
        """422 naming the first detail's field (the body when it has none)."""
        first = details[0]
        where = first.field or "body"
        return cls(422, f"invalid {where}: {first.message}", field=first.field, details=details)


def field_path(loc: Sequence[int | str], prefix: str = "") -> str | None:
    """``("settings", "include", 0)`` -> ``settings.include[0]``."""
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or None
