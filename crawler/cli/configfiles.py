"""Config files, named with ``-c`` or found in the working directory, and ignore files.

Three dialects, one result (field values of ``CrawlSettings``/``RunOptions``):

* our own TOML (``crawler.toml``, or any file given with ``-c``): the field names;
* ``[tool.crawler]`` in ``pyproject.toml``: the same keys in a table;
* ``lychee.toml``: lychee's own key names (``timeout``, ``header``,
  ``retry_wait_time``, …) mapped to ours, so a project moving from lychee keeps
  its file. A key that means nothing to a crawler backed by a database
  (``cache``, ``threads``, ``mode``…) is named as ignored; an unknown key is an
  error naming it, as in our own files.

Without ``-c``, ``pyproject.toml`` then ``crawler.toml`` are read from the
working directory (the latter wins); ``lychee.toml`` is read only when neither
has crawler settings. ``.crawlerignore`` and ``.lycheeignore`` (one regex per
line, ``#`` comments) add to ``exclude`` whatever file is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawler import config
from crawler.errors import UsageError

AUTO_FILES = ("pyproject.toml", "crawler.toml")
LYCHEE_FILES = ("lychee.toml", ".lychee.toml")
IGNORE_FILES = (".crawlerignore", ".lycheeignore")
DURATION_FIELDS = frozenset(
    {
        "max_cache_age_s",
        "timeout_s",
        "retry_wait_s",
        "host_request_interval_s",
        "shutdown_timeout_s",
        "max_retry_after_s",
        "lease_ttl_s",
    }
)
Parse = Callable[[Any, str], float]


@dataclass
class Loaded:
    """Field values read from files, and notes for the user (ignored keys)."""

    values: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a dict; UsageError naming the file when it cannot be read."""
    import tomllib  # only when there is a file to read

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path}: {exc}") from exc


def is_lychee_file(path: Path) -> bool:
    """Is this lychee's config file (read with lychee's key names)?"""
    return path.name in LYCHEE_FILES


def load(path: Path, parse_duration: Parse) -> Loaded:
    """One named file in whichever dialect its name says."""
    data = read_toml(path)
    if is_lychee_file(path):
        return from_lychee(data, path, parse_duration)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("crawler", {})
        return Loaded(ours(table, f"{path} [tool.crawler]", parse_duration), files=[path])
    return Loaded(ours(data, str(path), parse_duration), files=[path])


def discover(cwd: Path, parse_duration: Parse) -> Loaded:
    """The config files of the working directory, when no ``-c`` was given."""
    found = Loaded()
    for name in AUTO_FILES:
        path = cwd / name
        if not path.is_file():
            continue
        if name == "pyproject.toml" and "crawler" not in read_toml(path).get("tool", {}):
            continue
        loaded = load(path, parse_duration)
        found.values.update(loaded.values)
        found.files.append(path)
    if found.files:
        return found
    for name in LYCHEE_FILES:
        path = cwd / name
        if path.is_file():
            return load(path, parse_duration)
    return found


def ours(data: dict[str, Any], source: str, parse_duration: Parse) -> dict[str, Any]:
    """Our own keys; unknown keys are an error naming the key."""
    known = set(config.CrawlSettings.model_fields) | set(config.RunOptions.model_fields)
    for key in data:
        if key not in known:
            raise UsageError(f"config file {source}: unknown key {key!r}")
    values = dict(data)
    if isinstance(values.get("include_fragments"), str):
        values["include_fragments"] = fragments_setting(values["include_fragments"], source, [])
    for key in DURATION_FIELDS & set(values):
        values[key] = parse_duration(values[key], f"{source}: {key}")
    if "hosts" in values and isinstance(values["hosts"], dict):
        values["hosts"] = {
            host: _host_durations(table, f"{source}: hosts.{host}", parse_duration)
            for host, table in values["hosts"].items()
        }
    return values


def _host_durations(table: Any, source: str, parse_duration: Parse) -> Any:
    if isinstance(table, dict) and "request_interval_s" in table:
        table = {**table, "request_interval_s": parse_duration(table["request_interval_s"], source)}
    return table


# lychee key -> our field; the value is converted by _LYCHEE_CONVERT where it differs.
LYCHEE_KEYS = {
    "verbose": "log_level",
    "format": "format",
    "no_progress": "no_progress",
    "output": "output",
    "max_cache_age": "max_cache_age_s",
    "cookie_jar": "cookie_jar",
    "max_redirects": "max_redirects",
    "max_retries": "max_retries",
    "max_concurrency": "max_concurrency",
    "user_agent": "user_agent",
    "timeout": "timeout_s",
    "retry_wait_time": "retry_wait_s",
    "accept": "accept",
    "insecure": "insecure",
    "method": "method",
    "header": "headers",
    "headers": "headers",
    "basic_auth": "basic_auth",
    "include_fragments": "include_fragments",
    "exclude": "exclude",
    "exclude_path": "exclude_path",
    "root_dir": "root_dir",
    "base_url": "base_url",
    "base": "base_url",  # lychee's name before base_url
    "remap": "remap",
    "fallback_extensions": "fallback_extensions",
    "index_files": "index_files",
    "include": "include",
    "exclude_all_private": "exclude_all_private",
    "host_concurrency": "host_concurrency",
    "host_request_interval": "host_request_interval_s",
    "hosts": "hosts",
}
# lychee keys that mean nothing here (or are not supported yet), named when ignored.
LYCHEE_IGNORED = {
    "mode": "output styling",
    "host_stats": "per-host statistics are SQL views in the database",
    "dump": "lychee's dry run",
    "dump_inputs": "lychee's dry run",
    "cache": "the database is the cache (see max_cache_age)",
    "cache_exclude_status": "the database is the cache",
    "threads": "use --workers",
    "default_extension": "a file is read by its extension",
    "github_token": "no GitHub API is used",
    "preprocess": "not supported",
    "scheme": "only http(s) links are checked",
    "require_https": "not supported",
    "min_tls": "not supported",
    "skip_missing": "a missing file seed is an error",
    "hidden": "hidden files of a directory are not read",
    "no_ignore": "use --exclude-path",
    "include_verbatim": "code in Markdown is not read",
    "glob_ignore_case": "patterns match as the shell's do",
    "extensions": "a directory's HTML and Markdown files are read",
    "include_mail": "mail addresses are skipped",
    "exclude_mail": "mail addresses are skipped",
    "include_wikilinks": "not supported",
    "offline": "use --internal-only",
    "accept_timeouts": "timeouts are failures",
    "files_from": "name the seeds on the command line",
    "generate": "use `crawler --help`",
    "archive": "not supported",
    "suggest": "not supported",
    "exclude_private": "use exclude_all_private",
    "exclude_link_local": "use exclude_all_private",
    "exclude_loopback": "use exclude_all_private",
    "exclude_file": "use .crawlerignore or .lycheeignore",
    "quiet": "use -q",
}
_LOG_LEVELS = {"error": "error", "warn": "warning", "info": "info", "debug": "debug"}
_LOG_LEVELS["trace"] = "debug"


def from_lychee(data: dict[str, Any], path: Path, parse_duration: Parse) -> Loaded:
    """A lychee.toml read with lychee's key names."""
    loaded = Loaded(files=[path])
    ignored = []
    for key, value in data.items():
        if key in LYCHEE_IGNORED:
            ignored.append(f"{key} ({LYCHEE_IGNORED[key]})")
            continue
        target = LYCHEE_KEYS.get(key)
        if target is None:
            raise UsageError(f"config file {path}: unknown lychee key {key!r}")
        source = f"{path}: {key}"
        loaded.values[target] = _lychee_value(key, value, source, parse_duration, loaded.notes)
    if ignored:
        loaded.notes.append(f"{path}: ignored lychee keys: {', '.join(ignored)}")
    return loaded


def _lychee_value(
    key: str, value: Any, source: str, parse_duration: Parse, notes: list[str]
) -> Any:
    if key in ("timeout", "retry_wait_time", "max_cache_age", "host_request_interval"):
        return parse_duration(value, source)
    if key == "verbose":
        level = str(value).lower()
        if level not in _LOG_LEVELS:
            raise UsageError(f"{source}: expected one of {', '.join(_LOG_LEVELS)}")
        return _LOG_LEVELS[level]
    if key == "accept":
        items = value if isinstance(value, list) else [value]
        return [str(item) for item in items]
    if key == "method":
        return str(value).lower()
    if key in ("header", "headers"):
        return _lychee_headers(value, source)
    if key == "include_fragments":
        return fragments_setting(value, source, notes)
    if key == "hosts":
        return _lychee_hosts(value, source, parse_duration)
    return value


def _lychee_headers(value: Any, source: str) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(name): str(text) for name, text in value.items()}
    if isinstance(value, list):  # older lychee: ["Name: value", ...] or ["Name=value"]
        headers = {}
        for entry in value:
            name, sep, text = str(entry).replace("=", ":", 1).partition(":")
            if not sep:
                raise UsageError(f"{source}: expected 'Name: value', got {entry!r}")
            headers[name.strip()] = text.strip()
        return headers
    raise UsageError(f"{source}: expected a table of headers")


def _lychee_hosts(value: Any, source: str, parse_duration: Parse) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f'{source}: expected tables [hosts."name"]')
    hosts: dict[str, Any] = {}
    for host, table in value.items():
        if not isinstance(table, dict):
            raise UsageError(f"{source}.{host}: expected a table")
        entry: dict[str, Any] = {}
        for name, item in table.items():
            if name == "concurrency":
                entry["concurrency"] = item
            elif name == "request_interval":
                entry["request_interval_s"] = parse_duration(item, f"{source}.{host}.{name}")
            elif name == "headers":
                entry["headers"] = _lychee_headers(item, f"{source}.{host}.{name}")
            else:
                raise UsageError(f"{source}.{host}: unknown lychee key {name!r}")
        hosts[host] = entry
    return hosts


FRAGMENT_MODES = ("none", "anchor-only", "text-only", "full")


def fragments_setting(value: Any, source: str, notes: list[str]) -> bool:
    """lychee's fragment modes as our switch: anchors are checked, text fragments are not."""
    if isinstance(value, bool):
        return value
    mode = str(value).lower()
    if mode not in FRAGMENT_MODES:
        raise UsageError(f"{source}: expected one of {', '.join(FRAGMENT_MODES)}, got {value!r}")
    if mode in ("text-only", "full"):
        notes.append(
            f"{source}: {mode}: anchor fragments (#id) are checked; "
            "text fragments (#:~:text=) are not checked yet"
        )
    return mode != "none"


def ignore_patterns(cwd: Path) -> list[str]:
    """Regexes from ``.crawlerignore`` and ``.lycheeignore``: one per line, ``#`` comments."""
    patterns: list[str] = []
    for name in IGNORE_FILES:
        path = cwd / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from exc
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                patterns.append(line)
    return patterns
