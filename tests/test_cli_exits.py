"""Exit codes and early refusals a CI pipeline relies on (issue: meet users where they are).

A seed that gets no HTTP answer exits 1 (the site was not checked), as lychee
does for an input it cannot read; a seed answering 404 is a broken link (2).
An ``-o`` that cannot be written is refused before any request (3).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.clikit import run_cli
from kit.ports import refused_port
from kit.serve_site import ThreadedSite
from kit.sitekit import Page


@pytest.fixture
def site() -> Iterator[ThreadedSite]:
    server = ThreadedSite({"/": Page(links=["/a"]), "/a": Page()}).start()
    yield server
    server.close()


def test_an_unreachable_seed_exits_1_naming_it(tmp_path: Path) -> None:
    with refused_port() as port:
        seed = f"http://127.0.0.1:{port}/"
        result = run_cli(
            "crawl", seed, "--db", tmp_path / "c.db", "-n", "--max-retries", "0", cwd=tmp_path
        )
    assert result.returncode == 1, result.stderr
    assert f"seed {seed} could not be reached" in result.stderr
    assert "Traceback" not in result.stderr
    # the report is still printed, and `report` decides the same way
    assert seed in result.stdout
    again = run_cli("report", "--db", tmp_path / "c.db", cwd=tmp_path)
    assert again.returncode == 1


def test_a_seed_answering_404_is_a_broken_link_exit_2(tmp_path: Path) -> None:
    server = ThreadedSite({"/": Page()}).start()
    try:
        result = run_cli(
            "crawl", server.url("/nope"), "--db", tmp_path / "c.db", "-n", cwd=tmp_path
        )
    finally:
        server.close()
    assert result.returncode == 2, result.stderr
    assert "could not be reached" not in result.stderr


def test_output_into_a_missing_directory_exits_3_before_crawling(
    site: ThreadedSite, tmp_path: Path
) -> None:
    out = tmp_path / "no" / "such" / "report.json"
    result = run_cli("crawl", site.url("/"), "--db", tmp_path / "c.db", "-o", out, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert "no such directory" in result.stderr
    assert str(out.parent) in result.stderr
    assert site.request_count() == 0
    assert not (tmp_path / "c.db").exists()


def test_output_naming_a_directory_exits_3_before_crawling(
    site: ThreadedSite, tmp_path: Path
) -> None:
    result = run_cli(
        "crawl", site.url("/"), "--db", tmp_path / "c.db", "-o", tmp_path, cwd=tmp_path
    )
    assert result.returncode == 3, result.stderr
    assert "is a directory" in result.stderr
    assert site.request_count() == 0
