"""crawler(1): the manual page, in troff, from the same option table as ``--help``.

``crawler man`` prints it; ``make man`` writes ``docs/crawler.1``, and a test
fails when that file and the code differ.
"""

from __future__ import annotations

import argparse

from crawler import __version__
from crawler.cli import completion, options

SECTIONS_AFTER = """\
.SH CONFIGURATION
Every option is also a key of a TOML config file (\\fB\\-c\\fR FILE, repeatable) and a
\\fBCRAWLER_\\fIKEY\\fR environment variable. Precedence, lowest first: defaults,
config files, environment, flags. Without \\fB\\-c\\fR, \\fIcrawler.toml\\fR and the
\\fB[tool.crawler]\\fR table of \\fIpyproject.toml\\fR in the working directory are read,
else \\fIlychee.toml\\fR (with lychee's key names). \\fI.crawlerignore\\fR and
\\fI.lycheeignore\\fR hold one regular expression per line, added to \\fB\\-\\-exclude\\fR.
.SH EXIT STATUS
.TP
.B 0
every link is fine
.TP
.B 2
broken links were found
.TP
.B 1
any other failure, including a seed that could not be reached at all
.TP
.B 3
bad usage or configuration (checked before any request)
.TP
.B 130, 143
interrupted by SIGINT or SIGTERM; \\fBcrawler resume\\fR continues
.SH EXAMPLES
.nf
crawler crawl https://example.org/
crawler crawl public \\-\\-base\\-url https://example.org/ \\-f sarif \\-o links.sarif
crawler resume \\-\\-db crawl.db
crawler report \\-f markdown \\-o links.md
.fi
.SH SEE ALSO
The README of the project, and its SQL views: the database is the report.
"""


def render(parser: argparse.ArgumentParser) -> str:
    """The manual page as troff text."""
    lines = [
        f'.TH CRAWLER 1 "" "crawler {__version__}" "User Commands"',
        ".SH NAME",
        "crawler \\- recursive website link checker with its frontier on disk",
        ".SH SYNOPSIS",
    ]
    table = completion.commands(parser)
    for name in table:
        lines.append(
            f".B crawler {name}\n.RI [ options ]" + (" [ URL ...]" if name == "crawl" else "")
        )
        lines.append(".br")
    lines += [".SH DESCRIPTION", _escape(parser.description or ""), ".SH COMMANDS"]
    for name, (summary, _) in table.items():
        lines += [".TP", f".B {name}", _escape(summary)]
    lines += [
        ".SH OPTIONS",
        ".TP",
        '.BR \\-c ", " \\-\\-config " " \\fIFILE\\fR',
        "TOML file with any of the options below (repeatable)",
        ".TP",
        '.BR \\-v ", " \\-\\-verbose',
        "more logs: \\-v info, \\-vv debug",
        ".TP",
        '.BR \\-q ", " \\-\\-quiet',
        "errors only, no progress display",
        ".TP",
        '.BR \\-V ", " \\-\\-version',
        "print the version",
    ]
    for title, description, fields in options.GROUPS:
        lines += [
            f".SS {title.capitalize()}",
            _escape(description[0].upper() + description[1:] + "."),
        ]
        for name in fields:
            option = options.BY_FIELD[name]
            flags = ", ".join(f"\\fB{_escape(flag)}\\fR" for flag in option.flags)
            if option.metavar:
                flags += f" \\fI{_escape(option.metavar)}\\fR"
            elif option.choices:
                flags += " \\fI" + _escape("|".join(option.choices)) + "\\fR"
            lines += [".TP", flags, _escape(options.help_text(option))]
    return "\n".join(lines) + "\n" + SECTIONS_AFTER


def _escape(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(
        "\\&" + line if line.startswith((".", "'")) else line for line in text.split("\n")
    )
