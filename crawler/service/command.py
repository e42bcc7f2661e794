"""``crawler serve``: the command line of the HTTP service.

``add_serve_command`` adds the subcommand to ``crawler``'s parser (its
``handler`` is ``run_serve``); ``python -m crawler.service`` takes the same
options without the subcommand. Every option has a ``CRAWLER_*`` variable;
flags win over the environment, which wins over the defaults.

Exit codes: 0 after a graceful stop, 3 for bad options or an unsafe setup
(a non-loopback address without a token), 1 when the port cannot be bound.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from crawler.errors import CrawlerError, UsageError
from crawler.service.flags import ENVIRONMENT, add_serve_options

if TYPE_CHECKING:
    from crawler.service.config import ServiceConfig

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 3


class _Parser(argparse.ArgumentParser):
    """Bad usage exits 3, as in ``crawler``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_serve_command(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``serve`` to ``crawler``'s subcommands."""
    serve: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run the HTTP service: JSON API, dashboard, metrics",
        description="Run crawls over HTTP: a JSON API (OpenAPI at /openapi.json), "
        "a dashboard at /, Prometheus metrics at /metrics.",
    )
    add_serve_options(serve)
    serve.set_defaults(handler=run_serve)
    return serve


def run_serve(args: argparse.Namespace) -> int:
    """Serve until SIGTERM; returns the exit code."""
    from crawler.service import config as service_config  # pydantic's model: only when serving

    flags = {field: getattr(args, field, None) for field in ENVIRONMENT}
    try:
        config = service_config.resolve(flags)
        _check_safe(config)
        if config.db is None:
            config.crawls_dir.mkdir(parents=True, exist_ok=True)
        config = service_config.with_token(config)
    except UsageError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"crawler: cannot create {config.crawls_dir}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    from crawler import aio, log  # structlog and the loop: only when serving

    log.configure(config.log_level, config.log_format)
    if config.log_format == "json":
        _stdlib_logs_as_json()
    from crawler.service.app import serve  # aiohttp's server only when serving

    try:
        aio.run(serve(config))
    except UsageError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (CrawlerError, OSError) as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _stdlib_logs_as_json() -> None:
    """aiohttp and other libraries log through ``logging``: one JSON object per line too."""
    import structlog

    formatter = structlog.stdlib.ProcessorFormatter(
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.JSONRenderer(),
        ],
        foreign_pre_chain=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_logger_name,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
        ],
    )
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)


def _check_safe(config: ServiceConfig) -> None:
    from crawler.service.config import is_loopback_bind

    if config.token is None and not is_loopback_bind(config.host):
        raise UsageError(
            f"refusing to listen on {config.host} without a token: anyone who can reach it "
            f"could start crawls. Set {ENVIRONMENT['token']} (or --token), or listen on "
            "127.0.0.1"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m crawler.service [options]``."""
    parser = _Parser(prog="python -m crawler.service", description="Run the crawler service.")
    add_serve_options(parser)
    return run_serve(parser.parse_args(argv))
