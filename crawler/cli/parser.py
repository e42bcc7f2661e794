"""The command line's shape: commands, their descriptions, examples and option groups.

Everything a user reads in ``crawler --help`` is here; the options themselves
come from ``crawler.cli.options`` (one table for flags, config keys,
environment, README, completions and the man page).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from crawler import __version__
from crawler.cli import completion, options
from crawler.cli.exits import EXIT_USAGE
from crawler.report import DIFF_FORMATS, FORMATS
from crawler.service import command as service_cli

EXIT_CODES = (
    "exit codes: 0 every link fine, 2 broken links found, 3 bad usage or configuration,\n"
    "  1 any other failure (a seed that could not be reached, too)"
)
DESCRIPTION = """\
Recursive website link checker: follows every page of a site, checks every
link it finds, and keeps the frontier and the results in a database (SQLite,
or PostgreSQL for many workers), so a crawl survives a crash and the results
are queryable with SQL."""
EXAMPLES = """\
examples:
  crawler crawl https://example.org/
  crawler crawl public --base-url https://example.org/ -f sarif -o links.sarif
  crawler crawl https://example.org/ --max-depth 2 --exclude '/archive/' -f json -o links.json
  crawler report -f markdown -o links.md
  crawler recrawl --fail-on new && crawler diff -f markdown
"""


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; lychee's code for that is 3."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _command(
    commands: argparse._SubParsersAction[_Parser], name: str, summary: str, text: str, examples: str
) -> argparse.ArgumentParser:
    return commands.add_parser(
        name,
        help=summary,
        description=text,
        epilog=f"examples:\n{examples}\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, derived from ``crawler.cli.options.OPTIONS``."""
    parser = _Parser(
        prog="crawler",
        description=DESCRIPTION,
        epilog=f"{EXAMPLES}\n{EXIT_CODES}\nEach command has its own --help.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"crawler {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )

    crawl = _command(
        commands,
        "crawl",
        "crawl from seed URLs (or a directory, or files) and check every link",
        "Crawl the seeds' site and check every link found; print the report when done.\n"
        f"Report formats (-f): {', '.join(FORMATS)}.",
        "  crawler crawl https://example.org/\n"
        "  crawler crawl --root-dir public --base-url https://example.org/ -f sarif -o l.sarif\n"
        "  crawler crawl https://example.org/ -X get -t 5s --max-concurrency 8 -vv\n",
    )
    crawl.add_argument(
        "seeds",
        nargs="*",
        metavar="URL",
        help="where the crawl starts: URLs, a directory (built HTML, or Markdown), or files",
    )
    options.add_common(crawl)
    options.add_arguments(crawl)

    resume = _command(
        commands,
        "resume",
        "continue an interrupted crawl",
        "Continue a crawl that was stopped (Ctrl-C, kill -9, a full disk) where it stopped.",
        "  crawler resume --db crawl.db\n  crawler resume --crawl 3 -f json -o links.json\n",
    )
    resume.add_argument(
        "--crawl", type=int, dest="crawl_id", help="crawl id (default: latest unfinished)"
    )
    options.add_common(resume)
    options.add_arguments(resume, "run")

    work = _command(
        commands,
        "work",
        "join a running crawl as one more worker process",
        "Crawl from the same database as a running crawl (SQLite on this machine, "
        "PostgreSQL anywhere).",
        "  crawler work --db postgresql://crawler@db/crawls\n"
        "  crawler work --service --db postgresql://crawler@db/crawls\n",
    )
    work.add_argument(
        "--crawl", type=int, dest="crawl_id", help="crawl id (default: latest unfinished)"
    )
    work.add_argument(
        "--service",
        action="store_true",
        help="join the running crawls of `crawler serve` on this PostgreSQL --db, one after "
        "another, leaving each when it finishes or is paused, cancelled or deleted",
    )
    work.add_argument(
        "--exit-when-idle",
        action="store_true",
        help="with --service: exit when no crawl is running (default: wait for the next one)",
    )
    options.add_common(work)
    options.add_arguments(work, "run")

    recrawl = _command(
        commands,
        "recrawl",
        "crawl again what the latest crawl crawled, asking only for what changed",
        "Start a new crawl with the seeds and settings of the latest crawl (or --crawl ID).\n"
        "Pages that crawl stored an ETag or Last-Modified for are asked conditionally\n"
        "(If-None-Match, If-Modified-Since); a page answered 304 Not Modified is not\n"
        "downloaded: its links are the ones the previous crawl found. The report is the\n"
        "one a full crawl would give. Settings, lowest first: the stored ones, then the\n"
        "config files (as for crawl), then CRAWLER_* variables, then the options given here.",
        "  crawler recrawl --db site.db\n"
        "  crawler recrawl --db site.db --fail-on new -f markdown -o changes.md\n",
    )
    recrawl.add_argument(
        "--crawl", type=int, dest="crawl_id", help="the crawl to re-crawl (default: latest)"
    )
    options.add_common(recrawl)
    options.add_arguments(recrawl, only=options.RECRAWL_FIELDS | options.RUN_FIELDS)

    diff = _command(
        commands,
        "diff",
        "what changed between two crawls: new, fixed and still broken links, pages",
        "Compare two crawls in the database: links newly broken (with their sources),\n"
        "fixed, still broken; pages that appeared and disappeared. Default: the last\n"
        f"two finished crawls of the same seeds. Formats (-f): {', '.join(DIFF_FORMATS)}.",
        "  crawler diff --db site.db\n  crawler diff --db site.db --from 3 --to 5 -f json\n",
    )
    diff.add_argument("--from", type=int, dest="from_crawl", help="the earlier crawl's id")
    diff.add_argument(
        "--to", type=int, dest="to_crawl", help="the later crawl's id (default: latest finished)"
    )
    options.add_common(diff)
    options.add_arguments(diff, "run", only=options.REPORT_FIELDS)

    rep = _command(
        commands,
        "report",
        "print the report of a crawl, during or after it",
        f"Render a crawl's report from the database. Formats (-f): {', '.join(FORMATS)}.",
        "  crawler report\n  crawler report --crawl 1 -f csv -o broken.csv\n",
    )
    rep.add_argument("--crawl", type=int, dest="crawl_id", help="crawl id (default: latest)")
    options.add_common(rep)
    options.add_arguments(rep, "run", only=options.REPORT_FIELDS)

    service_cli.add_serve_command(commands)

    shells = _command(
        commands,
        "completion",
        "print a shell completion script (bash, zsh, fish)",
        "Print the completion script for a shell; load it from the shell's startup file.",
        '  eval "$(crawler completion bash)"          # in ~/.bashrc\n'
        '  eval "$(crawler completion zsh)"           # in ~/.zshrc\n'
        "  crawler completion fish > ~/.config/fish/completions/crawler.fish\n",
    )
    shells.add_argument("shell", choices=completion.SHELLS)
    shells.set_defaults(handler=_completion)

    man = _command(
        commands,
        "man",
        "print the manual page (troff)",
        "Print crawler(1), generated from the same option table as --help.",
        "  crawler man | man -l -\n  crawler man > /usr/local/share/man/man1/crawler.1\n",
    )
    man.set_defaults(handler=_man)
    return parser


def _completion(args: argparse.Namespace) -> int:
    sys.stdout.write(completion.script(build_parser(), args.shell))
    return 0


def _man(args: argparse.Namespace) -> int:
    del args
    from crawler.cli import manpage  # only for --man

    sys.stdout.write(manpage.render(build_parser()))
    return 0
