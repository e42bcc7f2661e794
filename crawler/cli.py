"""Command line: ``crawler crawl``, ``crawler resume``, ``crawler report``.

Exit codes follow lychee, so CI pipelines work unchanged: 0 every link fine,
2 broken links found, 3 bad usage or configuration, 1 any other failure.
An interrupted crawl exits 130 (SIGINT) or 143 (SIGTERM) and says how to resume.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import pydantic
import structlog
from rich.console import Console

from crawler import __version__, config, log, progress, report, runner
from crawler.errors import CrawlerError, DiskFullError, UsageError
from crawler.store import db

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BROKEN = 2
EXIT_USAGE = 3
EXIT_SIGINT = 130
EXIT_SIGTERM = 143

logger = structlog.get_logger(__name__)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; lychee's code for that is 3."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; defaults come from ``crawler.config``."""
    parser = _Parser(prog="crawler", description="Recursive website link checker.")
    parser.add_argument("--version", action="version", version=f"crawler {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    crawl = commands.add_parser("crawl", help="crawl from seed URLs and check every link")
    crawl.add_argument("seeds", nargs="+", metavar="URL", help="where the crawl starts")
    _add_output_options(crawl)
    _add_run_options(crawl)
    _add_crawl_options(crawl)

    resume = commands.add_parser("resume", help="continue an interrupted crawl")
    resume.add_argument(
        "--crawl", type=int, dest="crawl_id", help="crawl id (default: latest unfinished)"
    )
    _add_output_options(resume)
    _add_run_options(resume)

    rep = commands.add_parser("report", help="print the report of a crawl (during or after it)")
    rep.add_argument("--crawl", type=int, dest="crawl_id", help="crawl id (default: latest)")
    _add_output_options(rep)
    return parser


def _add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", default=config.DEFAULT_DB, help=f"SQLite file (default {config.DEFAULT_DB})"
    )
    p.add_argument("-f", "--format", choices=report.FORMATS, default="text", help="report format")
    p.add_argument("-o", "--output", help="write the report to this file instead of stdout")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--no-progress", action="store_true", help="no live progress display")
    p.add_argument("--log-level", choices=log.LEVELS, default="warning")
    p.add_argument("--log-format", choices=("console", "json"), default="console")
    p.add_argument(
        "--durability",
        choices=("normal", "full"),
        default="normal",
        help="normal: survives a process crash; full: also a power loss (slower)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=float,
        default=config.DEFAULT_SHUTDOWN_TIMEOUT_S,
        metavar="SECONDS",
        help="on SIGINT/SIGTERM, how long in-flight requests may finish",
    )


def _add_crawl_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scope",
        choices=("host", "domain", "prefix"),
        default=config.DEFAULT_SCOPE,
        help="what is crawled: the seed's host, its domain and subdomains, "
        "or URLs under the seed's path",
    )
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="REGEX",
        help="check only URLs matching (wins over --exclude; repeatable)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="REGEX",
        help="do not check URLs matching (repeatable)",
    )
    p.add_argument(
        "--no-follow",
        action="append",
        default=[],
        metavar="REGEX",
        help="check URLs matching but do not crawl past them (repeatable)",
    )
    p.add_argument(
        "--max-depth", type=int, metavar="N", help="crawl at most N links deep from a seed"
    )
    p.add_argument("--max-urls", type=int, metavar="N", help="stop discovering new URLs after N")
    p.add_argument("--internal-only", action="store_true", help="check only in-scope links")
    p.add_argument(
        "-m", "--max-redirects", type=int, default=config.DEFAULT_MAX_REDIRECTS, metavar="N"
    )
    p.add_argument(
        "-t",
        "--timeout",
        type=float,
        default=config.DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        dest="timeout_s",
        help="per request",
    )
    p.add_argument("--max-retries", type=int, default=config.DEFAULT_MAX_RETRIES, metavar="N")
    p.add_argument(
        "--retry-wait-time",
        type=float,
        default=config.DEFAULT_RETRY_WAIT_S,
        metavar="SECONDS",
        dest="retry_wait_s",
        help="first backoff, doubled each retry",
    )
    p.add_argument(
        "--max-concurrency", type=int, default=config.DEFAULT_MAX_CONCURRENCY, metavar="N"
    )
    p.add_argument(
        "--host-concurrency", type=int, default=config.DEFAULT_HOST_CONCURRENCY, metavar="N"
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=config.DEFAULT_MAX_BODY_BYTES,
        metavar="N",
        help="cap on the HTML parsed per page",
    )
    p.add_argument("-u", "--user-agent", default=config.DEFAULT_USER_AGENT)
    p.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra request header (repeatable)",
    )


def settings_from_args(args: argparse.Namespace) -> config.CrawlSettings:
    """Build and validate the crawl settings from parsed flags."""
    headers: dict[str, str] = {}
    for header in args.header:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {header!r}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    values: dict[str, Any] = {
        "scope": args.scope,
        "include": args.include,
        "exclude": args.exclude,
        "no_follow": args.no_follow,
        "max_depth": args.max_depth,
        "max_urls": args.max_urls,
        "internal_only": args.internal_only,
        "max_redirects": args.max_redirects,
        "timeout_s": args.timeout_s,
        "max_retries": args.max_retries,
        "retry_wait_s": args.retry_wait_s,
        "max_concurrency": args.max_concurrency,
        "host_concurrency": args.host_concurrency,
        "max_body_bytes": args.max_body_bytes,
        "user_agent": args.user_agent,
        "headers": headers,
    }
    return validate_settings(values)


def validate_settings(values: dict[str, Any]) -> config.CrawlSettings:
    """Validate settings, turning pydantic's error into one line naming the field."""
    try:
        return config.CrawlSettings(**values)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "settings"
        raise UsageError(f"invalid {field.replace('_', '-')}: {first['msg']}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (and exits with it when run as a script)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    log.configure(getattr(args, "log_level", "warning"), getattr(args, "log_format", "console"))
    try:
        if args.command == "crawl":
            code = _crawl(args)
        elif args.command == "resume":
            code = _resume(args)
        else:
            code = _report(args)
    except UsageError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        code = EXIT_USAGE
    except DiskFullError as exc:
        print(
            f"crawler: {exc}. Free some space, then run `crawler resume --db {args.db}`.",
            file=sys.stderr,
        )
        code = EXIT_FAILURE
    except CrawlerError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        code = EXIT_FAILURE
    return code


def _crawl(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    job = runner.start(args.db, list(args.seeds), settings, durability=args.durability)
    return _run_and_report(args, job)


def _resume(args: argparse.Namespace) -> int:
    job, record = runner.open_existing(args.db, args.crawl_id, durability=args.durability)
    if record.state == "finished":
        print(f"crawler: crawl {record.id} has already finished", file=sys.stderr)
    return _run_and_report(args, job)


def _run_and_report(args: argparse.Namespace, job: runner.CrawlJob) -> int:
    try:
        finished, signum = asyncio.run(_run(args, job))
    finally:
        job.close()
    code = _print_report(args, job.crawl_id)
    if not finished:
        print(
            f"crawler: crawl {job.crawl_id} interrupted; continue it with "
            f"`crawler resume --db {args.db}`",
            file=sys.stderr,
        )
        return EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT
    return code


async def _run(args: argparse.Namespace, job: runner.CrawlJob) -> tuple[bool, int | None]:
    received: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if received:  # a second signal: stop at once; SQLite stays consistent
            os._exit(EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT)
        received.append(signum)
        job.stop()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    shower = None
    console = Console(stderr=True)
    if not args.no_progress and console.is_terminal:
        shower = asyncio.create_task(progress.show(job, console))
    try:
        finished = await job.run(shutdown_timeout_s=args.shutdown_timeout)
    finally:
        if shower is not None:
            shower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await shower
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return finished, (received[0] if received else None)


def _report(args: argparse.Namespace) -> int:
    return _print_report(args, args.crawl_id)


def _print_report(args: argparse.Namespace, crawl_id: int | None) -> int:
    try:
        reader = db.open_reader(args.db)
    except sqlite3.Error as exc:
        raise UsageError(f"{args.db}: {exc}") from exc
    try:
        data = report.load(reader, crawl_id)
    finally:
        reader.close()
    text = report.render(data, args.format)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write report to {args.output}: {exc.strerror}") from exc
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return EXIT_BROKEN if data.summary.broken else EXIT_OK


def run() -> NoReturn:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
