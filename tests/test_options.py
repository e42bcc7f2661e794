"""Options are declared once: the README, --help and the models must agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crawler.cli import main as cli
from crawler.cli import options
from crawler.config import CrawlSettings, RunOptions
from crawler.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
CONFIG_ONLY = {"hosts", "lease_ttl_s", "lease_batch", "max_retry_after_s", "max_links_per_page"}


def test_readme_option_table_is_generated_from_the_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(
        r"<!-- options-table:start -->\n(.*?)<!-- options-table:end -->", readme, re.S
    )
    assert match, "README lost its options table markers"
    assert match.group(1) == options.markdown_table()


def test_every_model_field_is_an_option_or_documented_as_config_only() -> None:
    fields = set(CrawlSettings.model_fields) | set(RunOptions.model_fields)
    assert fields - set(options.BY_FIELD) == CONFIG_ONLY
    assert set(options.BY_FIELD) <= fields
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for key in CONFIG_ONLY:
        assert key in readme


def test_help_lists_every_flag_with_its_default() -> None:
    crawl_help = cli.build_parser()._subparsers._group_actions[0].choices["crawl"].format_help()
    text = " ".join(crawl_help.split())
    for option in options.OPTIONS:
        for flag in option.flags:
            assert flag in text
        default = options.default_text(option)
        if default:
            assert f"[default: {default}]" in text, option.field


def test_precedence_defaults_file_environment_flags(tmp_path: Path) -> None:
    config = tmp_path / "crawler.toml"
    config.write_text(
        "max_concurrency = 5\nhost_concurrency = 3\ntimeout_s = 7\n"
        'db = "from-file.db"\n[hosts."example.org"]\nconcurrency = 1\n'
    )
    env = {"CRAWLER_HOST_CONCURRENCY": "4", "CRAWLER_TIMEOUT_S": "8", "CRAWLER_TOKEN": "x"}
    settings, run = options.resolve({"timeout_s": 9.0}, str(config), env)
    assert settings.max_concurrency == 5  # file
    assert settings.host_concurrency == 4  # environment over file
    assert settings.timeout_s == 9.0  # flag over environment
    assert settings.max_retries == CrawlSettings().max_retries  # default
    assert run.db == "from-file.db"
    assert settings.host_settings("example.org").concurrency == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("max_concurrenc = 3\n", "unknown key 'max_concurrenc'"),
        ("max_concurrency = 'many'\n", "--max-concurrency"),
        ("exclude = ['(']\n", "invalid regular expression"),
        ("[hosts.'x.org']\nspeed = 1\n", "hosts"),
        ("not toml at all [", "config file"),
    ],
)
def test_bad_config_files_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(content)
    with pytest.raises(UsageError, match=re.escape(message)):
        options.resolve({}, str(config), {})


def test_unreadable_config_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read config file"):
        options.resolve({}, str(tmp_path / "missing.toml"), {})


def test_environment_lists_booleans_and_durations() -> None:
    env = {
        "CRAWLER_EXCLUDE": '["a", "b"]',
        "CRAWLER_INCLUDE": "only",
        "CRAWLER_INCLUDE_FRAGMENTS": "yes",
        "CRAWLER_MAX_CACHE_AGE_S": "2h",
    }
    settings, _ = options.resolve({}, None, env)
    assert settings.exclude == ["a", "b"]
    assert settings.include == ["only"]
    assert settings.include_fragments is True
    assert settings.max_cache_age_s == 7200
    with pytest.raises(UsageError, match="CRAWLER_INSECURE"):
        options.resolve({}, None, {"CRAWLER_INSECURE": "maybe"})


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("15m", 900), ("1d", 86400), ("1.5h", 5400), ("2w", 1209600)]
)
def test_durations(text: str, seconds: float) -> None:
    assert options.parse_duration(text) == seconds


def test_allow_networks_from_the_environment_are_comma_separated() -> None:
    env = {"CRAWLER_ALLOW_NETWORKS": "10.0.0.0/8, 192.168.1.0/24"}
    settings, _ = options.resolve({}, None, env)
    assert settings.allow_networks == ["10.0.0.0/8", "192.168.1.0/24"]
    with pytest.raises(UsageError, match="--allow-network"):
        options.resolve({}, None, {"CRAWLER_ALLOW_NETWORKS": "10.0.0.0/33"})
