"""The service's pure pieces: address rules, redaction, token, config, progress, metrics."""

from __future__ import annotations

import argparse
from pathlib import Path

import pydantic
import pytest

from crawler.cli import main as cli
from crawler.errors import UsageError
from crawler.models import Counts
from crawler.service import config as service_config
from crawler.service import flags as service_flags
from crawler.service import safety
from crawler.service.command import add_serve_command, run_serve
from crawler.service.metrics import OTHER_HOST, HostLabels, ServiceMetrics, host_deltas
from crawler.service.progress import RunTracker, settled
from crawler.service.schemas import CrawlCreate
from crawler.service.state import field_path


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1",
        "0x7f.1",
        "2130706433",
        "10.0.0.1",  # private hosts here are only classified, never connected to
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "[::1]",
        "::1",
        "[fe80::1]",
        "[fd00::1]",
        "[::ffff:127.0.0.1]",
        "localhost",
        "LOCALHOST.",
        "api.localhost",
        "100.64.0.1",
    ],
)
def test_private_hosts(host: str) -> None:
    # These hosts (and the public ones below) are only classified, never connected to.
    assert safety.is_private_host(host)


@pytest.mark.parametrize(
    "host", ["example.org", "93.184.216.34", "[2606:4700::1111]", "10.example"]
)
def test_public_hosts(host: str) -> None:
    assert not safety.is_private_host(host)


@pytest.mark.parametrize(
    "seed",
    [
        "http://127.0.0.1:8080/",
        "http://[::1]/",
        "http://localhost/x",
        "http://0x7f.1/",
        "https://user@10.1.2.3/",
        "http://169.254.169.254/latest/meta-data/",
    ],
)
def test_private_seeds_are_refused_unless_allowed(seed: str) -> None:
    body = {"seeds": [seed]}
    with pytest.raises(pydantic.ValidationError) as caught:
        CrawlCreate.model_validate(body, context={"allow_private": False})
    error = caught.value.errors()[0]
    assert error["loc"] == ("seeds", 0)
    assert "--allow-private" in error["msg"]
    assert CrawlCreate.model_validate(body, context={"allow_private": True}).seeds == [seed]


def test_guarded_settings_exclude_private_addresses_and_refuse_server_paths() -> None:
    assert safety.guard_settings({}, allow_private=False)["exclude_all_private"] is True
    assert "exclude_all_private" not in safety.guard_settings({}, allow_private=True)
    with pytest.raises(ValueError, match="cookie_jar"):
        safety.guard_settings({"cookie_jar": "/etc/shadow"}, allow_private=True)
    with pytest.raises(ValueError, match="root_dir"):  # a directory on the server: never
        safety.guard_settings({"root_dir": "/etc"}, allow_private=True)


def test_a_directory_on_the_server_is_not_a_seed(tmp_path: Path) -> None:
    body = {"seeds": [str(tmp_path)]}
    with pytest.raises(pydantic.ValidationError, match="not an http"):
        CrawlCreate.model_validate(body, context={"allow_private": True})


def test_settings_shown_to_readers_hide_credentials() -> None:
    shown = safety.redact_settings(
        {
            "headers": {"Authorization": "Bearer s3cret"},
            "basic_auth": ["example\\.org alice:s3cret"],
            "hosts": {"a.example": {"headers": {"Cookie": "s3cret"}, "concurrency": 2}},
            "max_depth": 3,
        }
    )
    assert "s3cret" not in repr(shown)
    assert shown["headers"] == {"Authorization": safety.REDACTED}
    assert shown["basic_auth"][0].startswith("example\\.org ")
    assert shown["hosts"]["a.example"]["concurrency"] == 2
    assert shown["max_depth"] == 3


def test_token_comparison() -> None:
    token = "t" * 20
    assert safety.token_matches(f"Bearer {token}", token)
    assert safety.token_matches(f"bearer {token}", token)
    assert not safety.token_matches(f"Bearer {token}x", token)
    assert not safety.token_matches(f"Basic {token}", token)
    assert not safety.token_matches(None, token)
    assert not safety.token_matches("", token)


@pytest.mark.parametrize(
    ("header", "loopback"),
    [
        ("127.0.0.1:8080", True),
        ("localhost:8080", True),
        ("[::1]:8080", True),
        ("localhost", True),
        ("evil.example:8080", False),
        ("10.0.0.1", False),  # a Host header value, only compared, never connected to
        (None, False),
    ],
)
def test_host_header_guard(header: str | None, loopback: bool) -> None:
    assert safety.is_loopback_host_header(header) is loopback


def test_config_precedence_flags_over_environment_over_defaults(tmp_path: Path) -> None:
    environ = {"CRAWLER_PORT": "9000", "CRAWLER_MAX_RUNNING": "5", "CRAWLER_ALLOW_PRIVATE": "yes"}
    config = service_config.resolve({"port": 9100, "host": None}, environ)
    assert config.port == 9100
    assert config.max_running == 5
    assert config.allow_private is True
    assert config.host == service_flags.DEFAULT_HOST
    assert service_config.resolve({}, {}).max_running == service_flags.DEFAULT_MAX_RUNNING


@pytest.mark.parametrize(
    ("flags", "environ", "named"),
    [
        ({}, {"CRAWLER_PORT": "http"}, "CRAWLER_PORT"),
        ({"port": 70000}, {}, "--port"),
        ({"max_running": 0}, {}, "--max-running"),
        ({}, {"CRAWLER_TOKEN": "short"}, "CRAWLER_TOKEN"),
        ({}, {"CRAWLER_ALLOW_PRIVATE": "maybe"}, "CRAWLER_ALLOW_PRIVATE"),
    ],
)
def test_bad_config_names_its_source(
    flags: dict[str, object], environ: dict[str, str], named: str
) -> None:
    with pytest.raises(UsageError, match=named):
        service_config.resolve(flags, environ)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("example.org", False),
    ],
)
def test_loopback_binds(host: str, loopback: bool) -> None:
    assert service_config.is_loopback_bind(host) is loopback


def test_serve_refuses_a_public_address_without_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_serve_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert args.handler is run_serve
    assert run_serve(args) == 3
    assert "without a token" in capsys.readouterr().err


def test_the_crawler_command_dispatches_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As wired in cli.py: the subcommand's handler is called by ``crawler.cli.main``."""
    code = cli.main(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert code == 3
    assert "CRAWLER_TOKEN" in capsys.readouterr().err


def test_field_paths() -> None:
    assert field_path(("settings", "include", 0)) == "settings.include[0]"
    assert field_path(("seeds", 3)) == "seeds[3]"
    assert field_path(()) is None
    assert field_path(("max_depth",), "settings") == "settings.max_depth"


def test_host_labels_are_bounded() -> None:
    labels = HostLabels(limit=3)
    assert [labels(h) for h in ("a", "b", "c", "d", "a", "e")] == [
        "a",
        "b",
        "c",
        OTHER_HOST,
        "a",
        OTHER_HOST,
    ]
    metrics = ServiceMetrics(max_hosts=2)
    metrics.add_host_totals({f"h{i}.example": (1, 1) for i in range(10)})
    text = metrics.render().decode()
    assert f'crawler_host_requests_total{{host="{OTHER_HOST}"}} 8.0' in text
    assert text.count("crawler_host_requests_total{") == 3


def test_host_deltas_never_go_down() -> None:
    before = {"a": (5, 1), "b": (2, 0)}
    after = {"a": (7, 1), "b": (2, 0), "c": (1, 1)}
    assert host_deltas(before, after) == {"a": (2, 0), "c": (1, 1)}
    assert host_deltas(after, before) == {}


def test_progress_rates_and_eta() -> None:
    tracker = RunTracker()
    tracker.observe(Counts(pending=100, leased=10, done=0, pages=0, broken=0), 0.0)
    assert tracker.progress(in_flight=3).eta_s is None
    tracker.observe(Counts(pending=60, leased=10, done=40, pages=20, broken=2), 2.0)
    progress = tracker.progress(in_flight=3)
    assert progress.urls_per_s == 20.0
    assert progress.pages_per_s == 10.0
    assert progress.eta_s == 3.5  # (60 + 10) / 20
    assert progress.in_flight == 3
    done = settled(Counts(pending=0, leased=0, done=50, pages=25, broken=1), 5.0)
    assert (done.pages_per_s, done.eta_s) == (5.0, None)


def test_allowed_networks_come_from_the_operator_only() -> None:
    from crawler.netguard import parse_networks
    from crawler.service.safety import guard_settings, is_private_host

    intranet = parse_networks(["10.1.0.0/16"])
    assert is_private_host("10.1.2.3") is True
    assert is_private_host("10.1.2.3", intranet) is False
    assert is_private_host("10.2.0.1", intranet) is True
    asked = {"exclude_all_private": False, "allow_networks": ["0.0.0.0/0"]}
    guarded = guard_settings(asked, allow_private=False, allow_networks=["10.1.0.0/16"])
    assert guarded["exclude_all_private"] is True
    assert guarded["allow_networks"] == ["10.1.0.0/16"]
