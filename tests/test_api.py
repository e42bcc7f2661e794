"""``crawler.check(url, **options) -> Report``: the crawler as a typed, quiet library call."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import crawler
from crawler.errors import UsageError

from kit.clikit import clean_env
from kit.serve_site import ThreadedSite
from kit.sitekit import Page

FIXTURE = Path(__file__).parent / "fixtures" / "built-site"


@pytest.fixture
def site():
    server = ThreadedSite(
        {"/": Page(links=["/a", "/gone"]), "/a": Page(links=["/", "/deep"]), "/deep": Page()}
    ).start()
    yield server
    server.close()


def test_check_returns_the_report(site: ThreadedSite, tmp_path: Path) -> None:
    report = crawler.check(site.url("/"), db=tmp_path / "c.db", max_retries=0)
    assert isinstance(report, crawler.Report)
    assert not report.ok
    assert [(b.url, b.status, b.sources) for b in report.broken] == [
        (site.url("/gone"), 404, [site.url("/")])
    ]
    assert report.summary.pages == 3
    assert (tmp_path / "c.db").exists()  # the database stays for SQL


def test_options_are_the_settings_fields(site: ThreadedSite) -> None:
    report = crawler.check(site.url("/"), max_depth=0, exclude=["/gone$"])
    assert report.ok
    assert report.summary.pages == 1
    with pytest.raises(UsageError, match="unknown option 'max_dept'"):
        crawler.check(site.url("/"), max_dept=1)
    with pytest.raises(UsageError, match="max_concurrency"):
        crawler.check(site.url("/"), max_concurrency=0)


async def test_check_async_runs_in_the_callers_loop(site: ThreadedSite) -> None:
    report = await crawler.check_async(site.url("/"), max_retries=0)
    assert report.summary.broken == 1


def test_a_built_site_by_path(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "public")
    report = crawler.check(
        tmp_path / "public", base_url="https://example.org/", fallback_extensions=["html"]
    )
    assert {b.url for b in report.broken} == {
        "https://example.org/missing.html",
        "https://example.org/img/bg.png",
        "https://example.org/img/large.png",
    }


def test_quiet_by_default_and_light_to_import(site: ThreadedSite) -> None:
    program = (
        "import sys, crawler\n"
        "assert 'crawler.engine' not in sys.modules\n"
        f"report = crawler.check({site.url('/')!r}, max_retries=0)\n"
        "sys.exit(0 if report.summary.broken == 1 else 1)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == ""
