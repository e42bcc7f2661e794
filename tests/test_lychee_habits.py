"""lychee's spellings and files work here: a lychee user's habits carry over.

Flags (``-V``, ``-v``, ``-q``, ``-X``, ``-f compact``, durations with units),
config files found in the working directory, a ``lychee.toml`` read with
lychee's own keys, and ``.crawlerignore`` / ``.lycheeignore``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawler import __version__
from crawler.cli import main as cli
from crawler.cli import options
from crawler.config import CrawlSettings, RunOptions
from crawler.errors import UsageError

from kit.clikit import run_cli
from kit.serve_site import ThreadedSite
from kit.sitekit import Page


def resolve_argv(*argv: str, cwd: Path | None = None, notes: list[str] | None = None):
    args = cli.build_parser().parse_args(["crawl", "http://127.0.0.1/", *argv])
    return options.resolve(
        options.flags_from_namespace(args), args.config, {}, cwd=cwd, notes=notes
    )


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag: str, tmp_path: Path) -> None:
    result = run_cli(flag, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"crawler {__version__}"


@pytest.mark.parametrize(
    ("argv", "level", "no_progress"),
    [
        ((), "warning", False),
        (("-v",), "info", False),
        (("-vv",), "debug", False),
        (("-v", "-v", "-v"), "debug", False),
        (("-q",), "error", True),
        (("-v", "--log-level", "error"), "error", False),  # the explicit flag wins
    ],
)
def test_verbosity(argv: tuple[str, ...], level: str, no_progress: bool) -> None:
    _, run = resolve_argv(*argv)
    assert run.log_level == level
    assert run.no_progress is no_progress


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (("-X", "GET"), "method", "get"),
        (("--method", "Head"), "method", "head"),
        (("-t", "50ms"), "timeout_s", 0.05),
        (("--timeout", "2m"), "timeout_s", 120.0),
        (("--timeout", "7"), "timeout_s", 7.0),
        (("--retry-wait-time", "500ms"), "retry_wait_s", 0.5),
        (("--host-request-interval", "1s"), "host_request_interval_s", 1.0),
        (("--max-cache-age", "2d"), "max_cache_age_s", 172800.0),
        (("--include-fragments",), "include_fragments", True),
        (("--include-fragments=anchor-only",), "include_fragments", True),
        (("--include-fragments=full",), "include_fragments", True),
        (("--include-fragments=none",), "include_fragments", False),
    ],
)
def test_lychee_flag_spellings(argv: tuple[str, ...], field: str, value: Any) -> None:
    settings, _ = resolve_argv(*argv)
    assert getattr(settings, field) == value


def test_shutdown_timeout_takes_units() -> None:
    _, run = resolve_argv("--shutdown-timeout", "1m")
    assert run.shutdown_timeout_s == 60.0


@pytest.mark.parametrize("name", ["compact", "detailed", "TEXT"])
def test_lychee_format_names_are_text(name: str) -> None:
    _, run = resolve_argv("-f", name)
    assert run.format == "text"


def test_unknown_format_and_bad_duration_say_what_is_accepted(tmp_path: Path) -> None:
    result = run_cli("crawl", "http://127.0.0.1:9/", "-f", "raw", cwd=tmp_path)
    assert result.returncode == 3
    assert "invalid --format 'raw': choose from text, json" in result.stderr
    result = run_cli("crawl", "http://127.0.0.1:9/", "-t", "5 parsecs", cwd=tmp_path)
    assert result.returncode == 3
    assert "invalid duration '5 parsecs'" in result.stderr
    result = run_cli("crawl", "http://127.0.0.1:9/", "--include-fragments=some", cwd=tmp_path)
    assert result.returncode == 3
    assert "none, anchor-only, text-only, full" in result.stderr


def test_repeated_config_files_later_wins(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("max_concurrency = 5\ntimeout_s = '3s'\n")
    (tmp_path / "b.toml").write_text("max_concurrency = 6\n")
    settings, _ = resolve_argv("-c", str(tmp_path / "a.toml"), "-c", str(tmp_path / "b.toml"))
    assert settings.max_concurrency == 6
    assert settings.timeout_s == 3.0


def test_crawler_toml_and_pyproject_are_found_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "site"\n[tool.crawler]\nmax_concurrency = 4\nhost_concurrency = 2\n'
    )
    settings, _ = resolve_argv(cwd=tmp_path)
    assert (settings.max_concurrency, settings.host_concurrency) == (4, 2)
    (tmp_path / "crawler.toml").write_text("max_concurrency = 9\n")
    settings, _ = resolve_argv(cwd=tmp_path)
    assert (settings.max_concurrency, settings.host_concurrency) == (9, 2)  # crawler.toml wins
    (tmp_path / "other.toml").write_text("max_retries = 5\n")
    settings, _ = resolve_argv("-c", str(tmp_path / "other.toml"), cwd=tmp_path)
    assert settings.max_concurrency == CrawlSettings().max_concurrency  # -c: no discovery
    assert settings.max_retries == 5


def test_a_pyproject_without_our_table_is_not_a_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.ruff]\nline-length = 1\n'
    )
    (tmp_path / "lychee.toml").write_text("max_concurrency = 3\n")
    settings, _ = resolve_argv(cwd=tmp_path)
    assert settings.max_concurrency == 3  # lychee.toml is the fallback


LYCHEE_TOML = """\
verbose = "info"
format = "detailed"
mode = "emoji"
no_progress = true
cache = true
max_cache_age = "2d"
threads = 2
max_redirects = 5
max_retries = 4
max_concurrency = 14
user_agent = "curl/7.83.1"
timeout = 20
retry_wait_time = 2
accept = [200, "429", "500..=503"]
insecure = true
scheme = ["https"]
method = "get"
header = { "accept" = "text/html", "x-custom-header" = "value" }
basic_auth = ["example\\\\.com user:pwd"]
include_fragments = "anchor-only"
exclude = ['^https://(www\\.)?linkedin\\.com', '^https://example\\.com/home$']
exclude_path = ["\\\\.txt$"]
include = ['gist\\.github\\.com.*']
exclude_all_private = true
host_concurrency = 5
host_request_interval = "50ms"

[hosts."blog.example.com"]
concurrency = 3
request_interval = "0"
headers = { "A" = "B" }
"""

SAME_AS_FLAGS = [
    *("--log-level", "info", "-f", "text", "-n", "--max-cache-age", "2d"),
    *("--max-redirects", "5", "--max-retries", "4", "--max-concurrency", "14"),
    *("-u", "curl/7.83.1", "-t", "20", "--retry-wait-time", "2"),
    *("-a", "200", "-a", "429", "-a", "500..=503", "-i", "-X", "get"),
    *("-H", "accept: text/html", "-H", "x-custom-header: value"),
    *("--basic-auth", "example\\.com user:pwd", "--include-fragments"),
    *("--exclude", "^https://(www\\.)?linkedin\\.com", "--exclude", "^https://example\\.com/home$"),
    *("--include", "gist\\.github\\.com.*", "-E", "--exclude-path", "\\.txt$"),
    *("--host-concurrency", "5", "--host-request-interval", "50ms"),
]


def test_a_lychee_toml_with_lychees_keys_gives_the_same_settings_as_the_flags(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lychee.toml"
    path.write_text(LYCHEE_TOML)
    notes: list[str] = []
    from_file = resolve_argv("-c", str(path), notes=notes)
    from_flags = resolve_argv(*SAME_AS_FLAGS)
    hosts = {"blog.example.com": {"concurrency": 3, "request_interval_s": 0, "headers": {"A": "B"}}}
    expected = (from_flags[0].model_copy(update={"hosts": from_file[0].hosts}), from_flags[1])
    assert from_file == expected
    assert from_file[0].hosts == CrawlSettings(hosts=hosts).hosts  # type: ignore[arg-type]
    assert from_file[1] == RunOptions(log_level="info", no_progress=True)
    # the keys that mean nothing here are named, each once
    (note,) = notes
    for key in ("mode", "cache", "threads", "scheme"):
        assert re.search(rf"\b{key} \(", note), key
    # found in the working directory too
    found = resolve_argv(cwd=tmp_path)
    assert found == from_file


def test_a_lychee_toml_with_an_unknown_key_names_it(tmp_path: Path) -> None:
    path = tmp_path / "lychee.toml"
    path.write_text("max_concurency = 3\n")
    with pytest.raises(UsageError, match="unknown lychee key 'max_concurency'"):
        resolve_argv("-c", str(path))


def test_a_config_value_holding_a_nul_is_a_usage_error_on_both_backends(
    tmp_path: Path, any_db: str
) -> None:
    # Settings are stored with the crawl: PostgreSQL failed with a traceback (exit 1).
    (tmp_path / "lychee.toml").write_text('exclude = ["a\\u0000"]\n')
    result = run_cli("crawl", "http://127.0.0.1:9/", "--db", any_db, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert "invalid --exclude: NUL characters are not allowed" in result.stderr
    assert "Traceback" not in result.stderr


def test_ignored_lychee_keys_are_named_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "lychee.toml").write_text('threads = 4\nexclude = ["."]\n')
    result = run_cli("crawl", "http://127.0.0.1:9/", "--db", tmp_path / "c.db", cwd=tmp_path)
    assert "ignored lychee keys: threads (use --workers)" in result.stderr
    assert result.returncode == 0, result.stderr  # "." excludes even the seed


@pytest.fixture
def site() -> Iterator[ThreadedSite]:
    server = ThreadedSite(
        {"/": Page(links=["/gone", "/also-gone", "/fine"]), "/fine": Page()}
    ).start()
    yield server
    server.close()


def test_ignore_files_exclude_their_patterns(site: ThreadedSite, tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    result = run_cli("crawl", site.url("/"), "--db", db, "-n", cwd=tmp_path)
    assert result.returncode == 2
    (tmp_path / ".crawlerignore").write_text("# broken on purpose\n/gone$\n\n")
    (tmp_path / ".lycheeignore").write_text("also-gone\n")
    result = run_cli("crawl", site.url("/"), "--db", db, "-n", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert site.request_count() > 0
    settings, _ = resolve_argv("--exclude", "x", cwd=tmp_path)
    assert settings.exclude == ["x", "/gone$", "also-gone"]
