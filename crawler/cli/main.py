"""Command line: ``crawler crawl``, ``recrawl``, ``resume``, ``report``, ``diff``…

Exit codes follow lychee, so CI pipelines work unchanged: 0 every link fine,
2 broken links found (with ``--fail-on new``: links newly broken since the
previous finished crawl of the same seeds), 3 bad usage or configuration, 1 any other failure,
including a seed that could not be reached at all (no HTTP answer: DNS,
connection, TLS, timeout), as lychee exits 1 when an input cannot be read: the
site was not checked, which is not the same news as "it has broken links".
An interrupted crawl exits 130 (SIGINT) or 143 (SIGTERM) and says how to resume.

This module parses and dispatches only: the commands that crawl live in
``crawler.cli.commands``, imported when one of them runs, so ``--version``
and ``--help`` start in a fraction of the crawl's import time.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from crawler import __version__
from crawler.cli.exits import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from crawler.errors import CrawlerError, UsageError

if TYPE_CHECKING:
    import argparse

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "build_parser", "main", "run"]


DISTRIBUTION = "crawler-linkcheck"
# Modules of the optional extras: what needs them, and the extra to install.
EXTRAS = {"asyncpg": ("a PostgreSQL --db", "postgres"), "prometheus_client": ("serve", "service")}
VERSION_FLAGS = (["-V"], ["--version"])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments in VERSION_FLAGS:  # argparse's answer, without building the parser
        print(f"crawler {__version__}")
        return EXIT_OK
    # pydantic (the service's API models) looks for plugins in every installed
    # distribution's entry points when it builds the first model: no use here.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args = build_parser().parse_args(arguments)
    try:
        handler = getattr(args, "handler", None)
        if handler is not None:
            return int(handler(args))
        from crawler.allocator import pin_malloc_thresholds
        from crawler.cli import commands  # the crawl's modules: only for a command that opens a db

        pin_malloc_thresholds()  # a freed page's memory leaves the process (crawler/allocator.py)
        return commands.execute(args)
    except UsageError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:
        if exc.name not in EXTRAS:
            raise
        what, extra = EXTRAS[exc.name]
        print(
            f"crawler: {what} needs the {extra!r} extra: pip install '{DISTRIBUTION}[{extra}]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except CrawlerError as exc:
        print(f"crawler: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (``crawler.cli.parser``), imported when first needed."""
    from crawler.cli import parser

    return parser.build_parser()


def run() -> NoReturn:
    """Console-script entry point."""
    exit_now(main())


def exit_now(code: int) -> NoReturn:
    """Exit with ``code`` without the interpreter's teardown.

    After a crawl, freeing every module's objects one by one was a good part of
    a small crawl's time (bench/RESULTS.md), for nothing: the process is gone
    a moment later. What teardown does that matters still happens, in its
    order: threads are waited for (``threading._shutdown``, which first stops
    idle executor threads), the ``atexit`` functions run (logging's flush, the
    parse helpers' joins), the standard streams are flushed. When a flush fails
    (a closed pipe), the ordinary exit reports it as before.
    """
    threading = sys.modules.get("threading")
    if threading is not None:
        getattr(threading, "_shutdown", lambda: None)()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    run()
