"""From what the user typed to settings: flags, config file, environment, defaults.

Every option is declared once, in ``OPTIONS``; the argparse flags, the config
file keys (the field names), the ``CRAWLER_*`` variables and the README's
option table are all derived from it. Precedence, lowest first: model defaults
< config files (``-c``, repeatable, later wins; without ``-c`` the working
directory's ``crawler.toml`` or ``[tool.crawler]``, else ``lychee.toml``:
``crawler.cli.configfiles``) < environment < flags. ``.crawlerignore`` and
``.lycheeignore`` add to ``exclude``. Seconds are taken with units too
(``50ms``, ``1s``, ``2m``), and lychee's spellings (``-V``, ``-v``, ``-q``,
``-X``, ``-f compact``) work.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from crawler import config, report
from crawler.cli import configfiles
from crawler.errors import UsageError
from crawler.settings_model import SettingsError, SettingsModel

Kind = Literal["value", "flag", "negated", "list", "headers", "duration", "fragments"]
Target = Literal["crawl", "run"]
M = TypeVar("M", bound=SettingsModel)
ENV_PREFIX = "CRAWLER_"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|[smhdw]?)\s*$")
_UNITS = {"": 1, "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
DURATION_HELP = " (units: 500ms, 20s, 2m, 1h)"


@dataclass(frozen=True, slots=True)
class Option:
    """One setting as the user sees it."""

    field: str
    flags: tuple[str, ...]
    help: str
    target: Target = "crawl"
    kind: Kind = "value"
    metavar: str | None = None
    type: type = str
    choices: tuple[str, ...] | None = None
    separator: str | None = None  # a CRAWLER_* list may be split on this, not only JSON


OPTIONS: tuple[Option, ...] = (
    # how this run behaves and reports
    Option("db", ("--db",), "the SQLite file", "run", metavar="PATH"),
    Option(
        "format",
        ("-f", "--format"),
        f"report format: {', '.join(report.FORMATS)} (lychee's compact and detailed: text)",
        "run",
        metavar="FORMAT",
    ),
    Option("output", ("-o", "--output"), "write the report to this file", "run", metavar="FILE"),
    Option(
        "fail_on",
        ("--fail-on",),
        "exit 2 for any broken link, or only for links newly broken since the previous "
        "finished crawl of the same seeds",
        "run",
        choices=("any", "new"),
    ),
    Option("no_progress", ("-n", "--no-progress"), "no live progress display", "run", "flag"),
    Option(
        "log_level",
        ("--log-level",),
        "log level (logs go to stderr)",
        "run",
        choices=("debug", "info", "warning", "error"),
    ),
    Option("log_format", ("--log-format",), "log format", "run", choices=("console", "json")),
    Option(
        "durability",
        ("--durability",),
        "normal survives a process crash; full also a power loss (slower)",
        "run",
        choices=("normal", "full"),
    ),
    Option(
        "workers",
        ("--workers",),
        "processes crawling the database together, one per core",
        "run",
        metavar="N",
        type=int,
    ),
    Option(
        "parse_helpers",
        ("--parse-helpers",),
        "processes that parse pages beside the one fetching them; default: one on 2+ "
        "cores with --workers 1, started after 200 pages or 4 MB of HTML",
        "run",
        metavar="N",
        type=int,
    ),
    Option(
        "shutdown_timeout_s",
        ("--shutdown-timeout",),
        "on SIGINT/SIGTERM, how long in-flight requests may finish",
        "run",
        "duration",
        metavar="DURATION",
    ),
    # what is crawled
    Option(
        "scope",
        ("--scope",),
        "crawl the seed's host, its domain and subdomains, or URLs under the seed's path",
        choices=("host", "domain", "prefix"),
    ),
    Option(
        "include",
        ("--include",),
        "check only URLs matching (wins over --exclude)",
        kind="list",
        metavar="REGEX",
    ),
    Option("exclude", ("--exclude",), "do not check URLs matching", kind="list", metavar="REGEX"),
    Option(
        "no_follow",
        ("--no-follow",),
        "check URLs matching but do not crawl past them",
        kind="list",
        metavar="REGEX",
    ),
    Option(
        "max_depth", ("--max-depth",), "crawl at most N links from a seed", metavar="N", type=int
    ),
    Option("max_urls", ("--max-urls",), "stop adding new URLs after N", metavar="N", type=int),
    Option("internal_only", ("--internal-only",), "check only in-scope links", kind="flag"),
    Option(
        "sitemaps",
        ("--sitemap",),
        "seed the crawl from a sitemap or sitemap index",
        kind="list",
        metavar="URL",
    ),
    Option(
        "use_sitemaps",
        ("--use-sitemaps",),
        "also seed from the sitemaps robots.txt lists",
        kind="flag",
    ),
    Option("robots", ("--no-robots",), "ignore robots.txt", kind="negated"),
    Option(
        "exclude_all_private",
        ("-E", "--exclude-all-private"),
        "skip private, loopback and link-local targets (checked after DNS)",
        kind="flag",
    ),
    Option(
        "allow_networks",
        ("--allow-network",),
        "with -E, still reach this network (e.g. 10.1.0.0/16 for an intranet)",
        kind="list",
        metavar="CIDR",
        separator=",",
    ),
    # a built site in a directory (CI)
    Option(
        "root_dir",
        ("--root-dir",),
        "a directory of built HTML, crawled as the site (the seed when no URL is given)",
        metavar="DIR",
    ),
    Option(
        "base_url",
        ("--base-url",),
        "where the site in --root-dir is deployed: links to it are checked in the directory",
        metavar="URL",
    ),
    Option(
        "remap",
        ("--remap",),
        "rewrite URLs matching before checking them (re.sub, \\1 for groups)",
        kind="list",
        metavar="'REGEX REPLACEMENT'",
    ),
    Option(
        "fallback_extensions",
        ("--fallback-extensions",),
        "in a directory, /about also finds about.EXT (comma-separated)",
        kind="list",
        metavar="EXT,...",
        separator=",",
    ),
    Option(
        "index_files",
        ("--index-files",),
        "in a directory, the files a directory URL answers with (comma-separated)",
        kind="list",
        metavar="NAME,...",
        separator=",",
    ),
    Option(
        "exclude_path",
        ("--exclude-path",),
        "in a directory, files whose path from its root matches are not read for links "
        "(links to them are still checked)",
        kind="list",
        metavar="REGEX",
    ),
    # how links are judged
    Option(
        "include_fragments",
        ("--include-fragments",),
        "a link page#id is broken when the page has no such anchor; "
        "MODE none|anchor-only (the default when given)",
        kind="fragments",
        metavar="MODE",
    ),
    Option(
        "accept",
        ("-a", "--accept"),
        "statuses that count as fine, e.g. '200..=299, 403'",
        kind="list",
        metavar="RANGES",
    ),
    Option(
        "blocked_as_broken",
        ("--blocked-as-broken",),
        "report bot walls (Cloudflare challenge, 999) as broken, not blocked",
        kind="flag",
    ),
    Option(
        "max_redirects",
        (
            "-m",
            "--max-redirects",
        ),
        "longer redirect chains are broken",
        metavar="N",
        type=int,
    ),
    Option(
        "max_cache_age_s",
        ("--max-cache-age",),
        "reuse fine results of external links from an earlier crawl younger than this",
        kind="duration",
        metavar="AGE",
    ),
    # how requests are made
    Option("timeout_s", ("-t", "--timeout"), "per request", kind="duration", metavar="DURATION"),
    Option(
        "max_retries",
        ("--max-retries",),
        "retries for timeouts, connection errors, 5xx, 429",
        metavar="N",
        type=int,
    ),
    Option(
        "retry_wait_s",
        ("--retry-wait-time",),
        "first backoff, doubled each retry",
        kind="duration",
        metavar="DURATION",
    ),
    Option(
        "max_concurrency",
        ("--max-concurrency",),
        "requests in flight in all",
        metavar="N",
        type=int,
    ),
    Option(
        "host_concurrency",
        ("--host-concurrency",),
        "requests in flight per host",
        metavar="N",
        type=int,
    ),
    Option(
        "host_request_interval_s",
        ("--host-request-interval",),
        "minimum time between two requests to one host",
        kind="duration",
        metavar="DURATION",
    ),
    Option(
        "max_body_bytes",
        ("--max-body-bytes",),
        "cap on the HTML read and parsed per page",
        metavar="N",
        type=int,
    ),
    Option(
        "method",
        ("-X", "--method"),
        "how links are checked (a HEAD that says broken is confirmed with GET)",
        choices=("head", "get"),
    ),
    Option("user_agent", ("-u", "--user-agent"), "User-Agent header", metavar="TEXT"),
    Option(
        "headers",
        ("-H", "--header"),
        "extra request header",
        kind="headers",
        metavar="'NAME: VALUE'",
    ),
    Option(
        "basic_auth",
        ("--basic-auth",),
        "credentials for URLs matching",
        kind="list",
        metavar="'URL-REGEX USER:PASS'",
    ),
    Option(
        "cookie_jar",
        ("--cookie-jar",),
        "import cookies from this file before the crawl, export them after (Netscape format)",
        metavar="FILE",
    ),
    Option(
        "cookies",
        ("--no-cookies",),
        "keep no cookies between requests (the crawl's jar is on by default)",
        kind="negated",
    ),
    Option("insecure", ("-i", "--insecure"), "do not verify TLS certificates", kind="flag"),
    # rendering
    Option(
        "render",
        ("--render",),
        "load in-scope HTML pages in headless Chromium and take links from the rendered DOM",
        kind="flag",
    ),
    Option(
        "render_timeout_s",
        ("--render-timeout",),
        "how long a rendered page may take to settle (network idle); then its DOM is taken",
        kind="duration",
        metavar="DURATION",
    ),
    Option(
        "render_concurrency",
        ("--render-concurrency",),
        "pages rendered at once",
        metavar="N",
        type=int,
    ),
    Option(
        "browser",
        ("--browser",),
        "the Chromium to render with (default: chromium, chromium-browser, google-chrome... "
        "on PATH)",
        metavar="PATH",
    ),
    Option(
        "render_media",
        ("--render-media",),
        "let rendered pages load images, media and fonts (blocked by default)",
        kind="flag",
    ),
    Option(
        "render_restart_pages",
        ("--render-restart-pages",),
        "restart the browser after this many pages (bounds its memory)",
        metavar="N",
        type=int,
    ),
    Option(
        "render_max_rss_mb",
        ("--render-max-rss",),
        "restart the browser when its processes use more memory than this (MB)",
        metavar="MB",
        type=int,
    ),
)

BY_FIELD = {option.field: option for option in OPTIONS}
FRAGMENT_WORDS = frozenset(configfiles.FRAGMENT_MODES)


# The --help sections, in order: (title, what they decide, fields).
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "scope",
        "what is crawled, and which links are checked",
        (
            "scope",
            "include",
            "exclude",
            "no_follow",
            "max_depth",
            "max_urls",
            "internal_only",
            "sitemaps",
            "use_sitemaps",
            "exclude_all_private",
            "allow_networks",
        ),
    ),
    (
        "built site",
        "a directory of built HTML, checked before it is deployed",
        ("root_dir", "base_url", "remap", "fallback_extensions", "index_files", "exclude_path"),
    ),
    (
        "checking",
        "how links are requested and judged",
        (
            "include_fragments",
            "accept",
            "blocked_as_broken",
            "max_redirects",
            "max_cache_age_s",
            "timeout_s",
            "max_retries",
            "retry_wait_s",
            "max_body_bytes",
            "method",
            "user_agent",
            "headers",
            "basic_auth",
            "cookies",
            "cookie_jar",
            "insecure",
        ),
    ),
    (
        "politeness",
        "how hard servers are pressed",
        ("robots", "max_concurrency", "host_concurrency", "host_request_interval_s"),
    ),
    (
        "rendering",
        "pages whose links are written by JavaScript, loaded in headless Chromium",
        (
            "render",
            "render_timeout_s",
            "render_concurrency",
            "browser",
            "render_media",
            "render_restart_pages",
            "render_max_rss_mb",
        ),
    ),
    (
        "output",
        "the report and the logs",
        ("format", "output", "fail_on", "no_progress", "log_level", "log_format"),
    ),
    (
        "storage",
        "the database and the processes that share it",
        ("db", "durability", "workers", "parse_helpers", "shutdown_timeout_s"),
    ),
)
# What `crawler report` takes: it reads a database and writes a report, nothing more.
REPORT_FIELDS = frozenset({"db", "format", "output", "log_level", "log_format"})
RUN_FIELDS = frozenset(option.field for option in OPTIONS if option.target == "run")
# What `crawler recrawl` shows besides the run options: the stored crawl's settings
# stand, these (and any other crawl option given) are laid over them.
RECRAWL_FIELDS = frozenset(
    {
        "max_cache_age_s",
        "timeout_s",
        "max_concurrency",
        "host_concurrency",
        "host_request_interval_s",
    }
)


def add_arguments(
    parser: argparse.ArgumentParser,
    target: Target | None = None,
    only: frozenset[str] | None = None,
) -> None:
    """Add the options (all, or one target's) in their --help groups.

    With ``only``, the target's other options are still accepted (scripts
    pass ``-n`` to every command) but not shown in --help.
    """
    if only is not None:
        for option in OPTIONS:
            if (target is None or option.target == target) and option.field not in only:
                _add(parser, option, shown=False)
    for title, description, fields in GROUPS:
        chosen = [
            BY_FIELD[name]
            for name in fields
            if (target is None or BY_FIELD[name].target == target)
            and (only is None or name in only)
        ]
        if chosen:
            group = parser.add_argument_group(title, description)
            for option in chosen:
                _add(group, option)


def _add(
    group: argparse.ArgumentParser | argparse._ArgumentGroup, option: Option, shown: bool = True
) -> None:
    kwargs: dict[str, Any] = {
        "dest": option.field,
        "default": argparse.SUPPRESS,
        "help": _help(option) if shown else argparse.SUPPRESS,
    }
    if option.kind == "flag":
        kwargs.update(action="store_const", const=True)
    elif option.kind == "fragments":
        kwargs.update(nargs="?", const="anchor-only", metavar=option.metavar)
    elif option.kind == "negated":
        kwargs.update(action="store_const", const=False)
    elif option.kind in ("list", "headers"):
        kwargs.update(action="append", metavar=option.metavar)
    else:
        kwargs.update(metavar=option.metavar, choices=option.choices)
        if option.kind == "value":
            kwargs["type"] = str.lower if option.choices else option.type
    group.add_argument(*option.flags, **kwargs)


def help_text(option: Option) -> str:
    """The option's --help line (also the man page's and the completions')."""
    return _help(option)


def _help(option: Option) -> str:
    default = default_text(option)
    repeat = " (repeatable)" if option.kind in ("list", "headers") else ""
    units = DURATION_HELP if option.kind == "duration" else ""
    return f"{option.help}{units}{repeat}" + (f" [default: {default}]" if default else "")


def default_text(option: Option) -> str:
    """The default as shown in --help and the README."""
    model = config.RunOptions if option.target == "run" else config.CrawlSettings
    field = model.model_fields[option.field]
    value = field.get_default(call_default_factory=True)
    if option.kind in ("flag", "negated", "fragments") or value in (None, [], {}):
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def flags_from_namespace(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the user gave as flags, converted to model values."""
    values: dict[str, Any] = {}
    for name, raw in vars(args).items():
        option = BY_FIELD.get(name)
        if option is None:
            continue
        values[name] = _convert(option, raw, f"{option.flags[-1]}")
    verbose, quiet = getattr(args, "verbose", 0) or 0, getattr(args, "quiet", 0) or 0
    if "log_level" not in values and (verbose or quiet):
        values["log_level"] = "error" if quiet > verbose else ("info", "debug")[min(verbose, 2) - 1]
    if quiet:
        values.setdefault("no_progress", True)
    return values


def add_common(parser: argparse.ArgumentParser) -> None:
    """``-c``, ``-v`` and ``-q``: every command that runs or reads a crawl takes them."""
    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        action="append",
        help="TOML file with any of the options below (repeatable, later wins; "
        "a lychee.toml is read with lychee's keys); default: ./crawler.toml, "
        "[tool.crawler] in ./pyproject.toml, else ./lychee.toml",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more logs on stderr: -v info, -vv debug",
    )
    parser.add_argument(
        "-q", "--quiet", action="count", default=0, help="errors only, no progress display"
    )


def _convert(option: Option, raw: Any, source: str) -> Any:
    if option.kind == "fragments":
        return configfiles.fragments_setting(raw, source, [])
    if option.kind == "headers":
        return parse_headers(raw, source)
    if option.kind == "duration":
        return parse_duration(raw, source)
    return raw


def parse_headers(entries: Sequence[str], source: str = "--header") -> dict[str, str]:
    """``['Name: value', ...]`` as a dict; UsageError for a malformed entry."""
    headers: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"{source} {entry!r}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    return headers


def parse_duration(value: Any, source: str = "--max-cache-age") -> float:
    """``90``, ``50ms``, ``30s``, ``15m``, ``2h``, ``1d``, ``1w`` as seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise UsageError(f"{source}: invalid duration {value!r} (use e.g. 90, 500ms, 15m, 2h, 1d)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def load_file(path: str | Path) -> dict[str, Any]:
    """A TOML config file as field values; unknown keys are an error naming the key."""
    return configfiles.load(Path(path), parse_duration).values


def load_environment(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``CRAWLER_<FIELD>`` variables for known fields (others are left to other commands)."""
    environ = os.environ if environ is None else environ
    fields = {**config.CrawlSettings.model_fields, **config.RunOptions.model_fields}
    values: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        field = name[len(ENV_PREFIX) :].lower()
        if field not in fields:
            continue
        values[field] = _from_env(field, raw, name)
    return values


def _from_env(field: str, raw: str, name: str) -> Any:
    option = BY_FIELD.get(field)
    text = raw.strip()
    if option is not None and option.kind == "duration":
        return parse_duration(text, name)
    if option is not None and option.kind == "fragments" and text.lower() in FRAGMENT_WORDS:
        return configfiles.fragments_setting(text, name, [])
    if option is not None and option.kind in ("flag", "negated"):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off", ""):
            return False
        raise UsageError(f"{name}: expected true or false, got {raw!r}")
    if text.startswith(("[", "{")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{name}: invalid JSON: {exc}") from exc
    if option is not None and option.kind == "list":
        if option.separator:
            return [part.strip() for part in text.split(option.separator) if part.strip()]
        return [text]
    if option is not None and option.kind == "headers":
        return parse_headers([text], name)
    return text


def resolve(
    flag_values: Mapping[str, Any],
    config_path: str | Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
    notes: list[str] | None = None,
) -> tuple[config.CrawlSettings, config.RunOptions]:
    """Merge defaults < files < environment < flags and validate both models.

    With ``cwd``, its config files are read when no file is named, and its
    ignore files add to ``exclude``; ``notes`` collects what the user should
    be told (lychee keys ignored).
    """
    merged = given(flag_values, config_path, environ, cwd=cwd, notes=notes)
    if cwd is not None:
        ignored = configfiles.ignore_patterns(cwd)
        if ignored:
            merged["exclude"] = [*merged.get("exclude", []), *ignored]
    run_fields = set(config.RunOptions.model_fields)
    crawl_values = {k: v for k, v in merged.items() if k not in run_fields}
    run_values = {k: v for k, v in merged.items() if k in run_fields}
    return validate(config.CrawlSettings, crawl_values), validate(config.RunOptions, run_values)


def given(
    flag_values: Mapping[str, Any],
    config_path: str | Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """The values the user gave, files < environment < flags, without the defaults
    (``resolve`` lays them over the defaults, ``crawler recrawl`` over the previous
    crawl's settings) and without the ignore files' patterns."""
    paths = [config_path] if isinstance(config_path, str) else list(config_path or [])
    loaded = configfiles.Loaded()
    for path in paths:
        one = configfiles.load(Path(path), parse_duration)
        loaded.values.update(one.values)
        loaded.notes.extend(one.notes)
    if not paths and cwd is not None:
        loaded = configfiles.discover(cwd, parse_duration)
    if notes is not None:
        notes.extend(loaded.notes)
    merged: dict[str, Any] = dict(loaded.values)
    merged.update(load_environment(environ))
    merged.update(flag_values)
    return merged


def recrawl_values(
    flag_values: Mapping[str, Any],
    config_path: str | Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    cwd: Path | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """What ``crawler recrawl`` lays over the previous crawl's settings: every crawl
    setting given in a config file, the environment or a flag (the same precedence as
    ``crawler crawl``, with the previous crawl's settings in place of the defaults);
    and the ignore files' patterns, added to whichever ``exclude`` results."""
    values = given(flag_values, config_path, environ, cwd=cwd)
    run_fields = set(config.RunOptions.model_fields)
    crawl_values = {k: v for k, v in values.items() if k not in run_fields}
    ignored = configfiles.ignore_patterns(cwd) if cwd is not None else []
    return crawl_values, ignored


def validate(model: type[M], values: Mapping[str, Any]) -> M:
    """Validate, turning the error into one line naming the option."""
    try:
        return model.model_validate(dict(values))
    except SettingsError as exc:
        loc = [str(p) for p in exc.loc]
        option = BY_FIELD.get(loc[0]) if loc else None
        name = option.flags[-1] if option else ".".join(loc) or "settings"
        message = exc.message.removeprefix("Value error, ")
        raise UsageError(f"invalid {name}: {message}") from exc


def markdown_table() -> str:
    """The README's option table, generated so it cannot drift from the code."""
    lines = ["| flag | config key / `CRAWLER_*` | default | meaning |", "|---|---|---|---|"]
    for option in OPTIONS:
        flags = ", ".join(f"`{flag}`" for flag in option.flags)
        if option.kind == "fragments":
            flags += f" `[={option.metavar}]`"
        elif option.metavar:
            flags += f" `{option.metavar}`"
        elif option.choices:
            flags += " `" + "\\|".join(option.choices) + "`"
        default = default_text(option)
        meaning = option.help.replace("|", "\\|")
        if option.kind in ("list", "headers"):
            meaning += " (repeatable)"
        lines.append(
            f"| {flags} | `{option.field}` | {f'`{default}`' if default else ''} | {meaning} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
