"""Where ``--render`` is asked for: the flag, a host of the config file, the service's request.

No browser is needed here: these are the settings and the refusals before a crawl starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.cli import options
from crawler.config import CrawlSettings, HostSettings
from crawler.engine import runner
from crawler.errors import UsageError
from crawler.service.safety import check_render_available, guard_settings
from crawler.service.schemas import CrawlCreate


def test_render_is_off_by_default() -> None:
    settings = CrawlSettings()
    assert not settings.render
    assert not settings.may_render()
    assert not settings.renders("a.test")
    assert runner.find_browser(settings) is None  # no browser looked for


def test_a_host_of_the_config_file_renders_alone(tmp_path: Path) -> None:
    config = tmp_path / "crawler.toml"
    config.write_text('[hosts."app.test"]\nrender = true\n[hosts."static.test"]\nconcurrency = 2\n')
    settings, _ = options.resolve({}, str(config), {})
    assert settings.may_render()
    assert settings.renders("app.test")
    assert settings.renders("app.test:8080")
    assert not settings.renders("static.test")


def test_a_host_can_opt_out_of_render() -> None:
    settings = CrawlSettings(render=True, hosts={"cdn.test": HostSettings(render=False)})
    assert settings.renders("www.test")
    assert not settings.renders("cdn.test")


def test_render_flags_resolve() -> None:
    settings, _ = options.resolve(
        {"render": True, "render_timeout_s": 2.5, "render_concurrency": 3}, None, {}
    )
    assert (settings.render, settings.render_timeout_s, settings.render_concurrency) == (
        True,
        2.5,
        3,
    )


def test_render_without_a_browser_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match="apt-get install chromium"):
        runner.find_browser(CrawlSettings(render=True))


def test_the_service_takes_render_but_not_a_browser_path() -> None:
    body = CrawlCreate.model_validate(
        {"seeds": ["https://example.invalid/"], "settings": {"render": True}},
        context={"allow_private": False},
    )
    assert body.settings.render
    with pytest.raises(ValueError, match="browser"):
        guard_settings({"browser": "/bin/sh"}, allow_private=False)


def test_the_service_refuses_render_without_a_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    check_render_available(CrawlSettings())  # not rendering: nothing looked up
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ValueError, match=r"^render: .*apt-get install chromium"):
        check_render_available(CrawlSettings(render=True))
