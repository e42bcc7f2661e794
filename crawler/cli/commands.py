"""The commands that open a database: ``crawl``, ``resume``, ``work`` and ``report``.

Imported by ``crawler.cli.main`` only once one of them was asked for, so
``crawler --version``, ``--help``, ``completion``, ``man`` and ``serve``'s
argument errors import none of the crawl's modules (aiohttp, selectolax,
structlog, the stores): start-up is a user-visible cost of every run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import structlog

from crawler import aio, log, report, urls
from crawler.cli import options
from crawler.cli.exits import (
    EXIT_BROKEN,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_SIGTERM,
)
from crawler.config import CrawlSettings, RunOptions
from crawler.engine import runner, workers
from crawler.errors import DatabaseFailedError, DiskFullError, InvalidURLError, UsageError
from crawler.net import localsite, locations
from crawler.report.model import BrokenEdge
from crawler.store import open as store_open

logger = structlog.get_logger(__name__)

# Failure kinds meaning "no HTTP answer at all": a seed failing so was never checked.
UNREACHABLE_KINDS = frozenset({"timeout", "connection", "dns", "tls", "private_address"})


def execute(args: argparse.Namespace) -> int:
    """Run the parsed command; the exit code. UsageError and CrawlerError go to the caller."""
    run_options = RunOptions()
    try:
        notes: list[str] = []
        settings, run_options = options.resolve(
            options.flags_from_namespace(args), args.config, cwd=Path.cwd(), notes=notes
        )
        if getattr(args, "include_fragments", None) in ("full", "text-only"):
            notes.append(
                "--include-fragments: anchor fragments (#id) are checked; "
                "text fragments (#:~:text=) are not checked yet"
            )
        for note in notes:
            print(f"crawler: note: {note}", file=sys.stderr)
        log.configure(run_options.log_level, run_options.log_format)
        if args.command == "diff":
            return _diff(args, run_options)
        if run_options.format not in report.FORMATS:
            raise UsageError(
                f"invalid --format {run_options.format!r}: choose from {', '.join(report.FORMATS)}"
            )
        _check_output(run_options.output)
        if args.command == "crawl":
            return _crawl(args, settings, run_options)
        if args.command == "recrawl":
            return _recrawl(args, run_options)
        if args.command == "resume":
            return _resume(args, run_options)
        if args.command == "work":
            return _work(args, run_options)
        return _print_report(run_options, args.crawl_id)
    except DiskFullError as exc:
        print(
            f"crawler: {exc}. Free some space, then run `crawler resume --db {run_options.db}`.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    except DatabaseFailedError as exc:  # the database failed under us (I/O error, …)
        print(
            f"crawler: {exc}. What was committed is kept; "
            f"continue with `crawler resume --db {run_options.db}`.",
            file=sys.stderr,
        )
        return EXIT_FAILURE


def _crawl(args: argparse.Namespace, settings: CrawlSettings, run: RunOptions) -> int:
    seeds = localsite.expand_globs(list(args.seeds))
    if settings.root_dir is None:
        top = localsite.checkout_above(seeds, settings.index_files)
        if top is not None:  # recorded, so that resume, recrawl and reports root it alike
            settings = settings.model_copy(update={"root_dir": str(top)})
    job = runner.start(run.db, seeds, settings, durability=run.durability)
    return _run_and_report(run, job)


def _recrawl(args: argparse.Namespace, run: RunOptions) -> int:
    """A new crawl with the stored crawl's seeds and settings, the crawl settings of the
    config files, the environment and the flags laid over them (in that order)."""
    overrides, ignored = options.recrawl_values(
        options.flags_from_namespace(args), args.config, cwd=Path.cwd()
    )
    job = runner.start_recrawl(
        run.db,
        overrides,
        crawl_id=args.crawl_id,
        durability=run.durability,
        add_exclude=ignored,
    )
    return _run_and_report(run, job)


def _diff(args: argparse.Namespace, run: RunOptions) -> int:
    """Print what changed between two crawls; exit 2 when links broke since, else 0."""
    from crawler.report import diff_formats  # only for this command

    if run.format not in report.DIFF_FORMATS:
        raise UsageError(
            f"invalid --format {run.format!r} for diff: "
            f"choose from {', '.join(report.DIFF_FORMATS)}"
        )
    _check_output(run.output)
    diff = store_open.load_diff(run.db, args.from_crawl, args.to_crawl)
    record = store_open.load_record(run.db, diff.to_crawl)
    diff = locations.diff_named(diff, record.seeds, record.config, Path.cwd())
    _write(run, diff_formats.render(diff, run.format))
    return EXIT_BROKEN if diff.new_broken else EXIT_OK


def _resume(args: argparse.Namespace, run: RunOptions) -> int:
    job, record = runner.open_existing(run.db, args.crawl_id, durability=run.durability)
    if record.state != "finished":
        return _run_and_report(run, job)
    # A crawl recorded finished with an empty frontier (killed before its seeds were
    # enqueued, then resumed by an older version) is crawled from its seeds now.
    reseeded: list[bool] = []

    def seeding() -> None:
        reseeded.append(True)
        print(
            f"crawler: crawl {record.id} was marked finished before its seeds were crawled; "
            "crawling from them now",
            file=sys.stderr,
        )

    job.on_seeding = seeding
    code = _run_and_report(run, job)
    if not reseeded:
        print(f"crawler: crawl {record.id} has already finished", file=sys.stderr)
    return code


def _work(args: argparse.Namespace, run: RunOptions) -> int:
    if args.service:
        if args.crawl_id is not None:
            raise UsageError("--service joins whichever crawls run; leave out --crawl")
        return _join_service(run, exit_when_idle=args.exit_when_idle)
    job, record = runner.open_existing(run.db, args.crawl_id, durability=run.durability)
    job.records_elapsed = False
    if record.state == "finished":
        job.close()
        return EXIT_OK
    try:
        finished, signum = aio.run(_run(run, job))
    finally:
        job.close()
    if finished:
        return EXIT_OK
    return EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT


def _join_service(run: RunOptions, *, exit_when_idle: bool) -> int:
    """``crawler work --service``: join the service's crawls until a signal (or idle)."""

    from crawler.engine import joiner as joiner_mod  # the service's store: not for a crawl

    async def serve() -> int | None:
        joiner = joiner_mod.Joiner(run, exit_when_idle=exit_when_idle)
        received: list[int] = []
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            if received:  # a second signal: stop at once; leases expire or are reclaimed
                os._exit(EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT)
            received.append(signum)
            joiner.stop()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            await joiner.serve()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        return received[0] if received else None

    signum = aio.run(serve())
    if signum is None:
        return EXIT_OK
    return EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT


def _run_and_report(run: RunOptions, job: runner.CrawlJob) -> int:
    procs: list[subprocess.Popen[bytes]] = []
    if run.workers > 1:
        job.on_seeded = lambda: procs.extend(workers.spawn(run, job.crawl_id, run.workers - 1))
    try:
        finished, signum = aio.run(_run(run, job))
    finally:
        ended = time.monotonic()
        job.close()
        logger.info("store_closed", seconds=_since(ended))
        workers.finish(procs, stop=True, timeout_s=run.shutdown_timeout_s)
        logger.info("workers_finished", seconds=_since(ended))
    code = _print_report(run, job.crawl_id)
    logger.info("report_written", seconds=_since(ended))
    if not finished:
        print(
            f"crawler: crawl {job.crawl_id} interrupted; continue it with "
            f"`crawler resume --db {run.db}`",
            file=sys.stderr,
        )
        return EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT
    return code


async def _run(run: RunOptions, job: runner.CrawlJob) -> tuple[bool, int | None]:
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
    if not run.no_progress and _may_draw_on_stderr():
        # Imported here: rich is only needed when progress is shown (__init__.py).
        from crawler.cli import progress

        console = progress.stderr_console()
        if console.is_terminal:
            shower = asyncio.create_task(progress.show(job, console))
    try:
        finished = await job.run(
            shutdown_timeout_s=run.shutdown_timeout_s, parse_helpers=run.helper_processes()
        )
    finally:
        if shower is not None:
            shower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await shower
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return finished, (received[0] if received else None)


def _may_draw_on_stderr() -> bool:
    """Whether rich could find a terminal on stderr; it decides, but is not imported for a pipe."""
    forced = any(os.environ.get(name) for name in ("FORCE_TERMINAL", "TTY_COMPATIBLE"))
    try:
        return forced or sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


def _check_output(output: str | None) -> None:
    """Refuse an ``-o`` that cannot be written before crawling, not after."""
    if output is None:
        return
    path = Path(output)
    parent = path.parent
    if path.is_dir():
        raise UsageError(f"cannot write report to {output}: it is a directory")
    if not parent.is_dir():
        raise UsageError(f"cannot write report to {output}: no such directory {str(parent)!r}")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"cannot write report to {output}: permission denied")


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _print_report(run: RunOptions, crawl_id: int | None) -> int:
    started = time.monotonic()
    data = store_open.load_report(run.db, crawl_id, run.format)
    logger.info("report_loaded", seconds=_since(started))
    unreachable = unreachable_seeds(data)
    data = locations.report_named(data, Path.cwd())  # files and lines, not local URLs
    _write(run, report.render(data, run.format))
    for edge in unreachable:
        print(f"crawler: seed {edge.url} could not be reached: {edge.error}", file=sys.stderr)
    if unreachable:
        return EXIT_FAILURE
    if not data.summary.broken:
        return EXIT_OK
    if run.fail_on == "new":
        return _new_broken_exit(run, data.crawl.id)
    return EXIT_BROKEN


def _new_broken_exit(run: RunOptions, crawl_id: int) -> int:
    """``--fail-on new``: exit 2 only for links broken now and not in the previous crawl."""
    diff = store_open.load_diff(run.db, None, crawl_id)
    counts = diff.counts()
    since = f"crawl {diff.from_crawl}" if diff.from_crawl else "no earlier crawl of these seeds"
    print(
        f"crawler: {counts['new_broken']} newly broken, {counts['still_broken']} still broken, "
        f"{counts['fixed']} fixed (since {since})",
        file=sys.stderr,
    )
    return EXIT_BROKEN if diff.new_broken else EXIT_OK


def _write(run: RunOptions, text: str) -> None:
    """The report (or diff) to ``-o`` or stdout."""
    if run.output:
        try:
            Path(run.output).write_text(text, encoding="utf-8", newline="")
        except OSError as exc:
            raise UsageError(
                f"cannot write report to {run.output}: {exc.strerror}. The crawl is saved "
                f"in {run.db}: `crawler report --db {run.db} -f {run.format} -o FILE` "
                f"writes it elsewhere"
            ) from exc
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def unreachable_seeds(data: report.ReportData) -> list[BrokenEdge]:
    """The seeds that got no HTTP answer at all (their crawl never started)."""
    seeds = set()
    for seed in data.crawl.seeds:
        if "://" not in seed:  # a directory: read, never unreachable
            continue
        with contextlib.suppress(InvalidURLError):
            seeds.add(urls.normalize(seed)[0])
    return [
        edge
        for edge in data.edges
        if edge.source is None and edge.url in seeds and edge.kind in UNREACHABLE_KINDS
    ]
