"""Logging setup: structlog to stderr, as console lines or JSON.

stdout belongs to the report; logs never go there.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

from crawler import redact

LogFormat = Literal["console", "json"]
LEVELS = ("debug", "info", "warning", "error")


def configure(level: str = "warning", fmt: LogFormat = "console") -> None:
    """Route structlog (and stdlib logging) to stderr at ``level``."""
    numeric = getattr(logging, level.upper())
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact.log_processor,  # no user:password@ of a URL in a log line
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
