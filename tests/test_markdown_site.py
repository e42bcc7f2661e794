"""Markdown checked as lychee users check it: ``crawler crawl .`` in a repository, a README
as a seed, and Markdown pages served over HTTP.

The repository's external links point at a loopback server that counts what
it is asked: links in code blocks, in hidden folders and in node_modules must
never reach it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kit.clikit import broken_locations, run_cli
from kit.realsites import BehaviourServer, ThreadedBehaviour

DOC = "# Doc\n\nOn to [the child](/child.html) and [a dead end](/gone).\n"


async def answer(request: web.BaseRequest) -> web.StreamResponse:
    """Loopback answers: /gone is 404, /doc.md is Markdown linking on, the rest a plain page."""
    if request.path == "/gone":
        return web.Response(status=404)
    if request.path == "/doc.md":
        return web.Response(text=DOC, content_type="text/markdown")
    if request.path in ("/raw/README.md", "/raw/notes.txt"):  # a forge's raw view
        return web.Response(text="[child](/from-raw.html)\n", content_type="text/plain")
    return web.Response(text="<p>fine</p>", content_type="text/html")


@pytest.fixture
def server() -> Iterator[BehaviourServer]:
    with ThreadedBehaviour(answer) as running:
        yield running


def write_repo(root: Path, origin: str) -> None:
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text(
        "# Project\n"
        "\n"
        "Read the [guide](docs/guide.md#install), then the [API](docs/api.md).\n"
        f"Status: [up]({origin}/up) and [gone]({origin}/gone).\n"
        "\n"
        "```sh\n"
        f"curl {origin}/in-code-block\n"
        "```\n",
        encoding="utf-8",
    )
    (root / "docs" / "guide.md").write_text(
        "## Install\n\nBack [home](../README.md#project); [no such part](#setup).\n",
        encoding="utf-8",
    )
    (root / "notes.html").write_text(f'<a href="{origin}/from-html">x</a>\n', encoding="utf-8")
    for hidden in (root / ".git", root / "node_modules" / "pkg"):
        hidden.mkdir(parents=True)
        (hidden / "README.md").write_text(f"[x]({origin}/hidden)\n", encoding="utf-8")


def check_repo(server: BehaviourServer, tmp_path: Path, *args: str) -> tuple[Path, dict[str, Any]]:
    """``crawler crawl ARGS -f json`` in a fresh copy of the repository: it, and the report.

    The crawl must find broken links (exit 2): every repository here has some.
    """
    repo = tmp_path / "repo"
    write_repo(repo, server.origin)
    result = run_cli("crawl", *args, "--db", tmp_path / "c.db", "-n", "-f", "json", cwd=repo)
    assert result.returncode == 2, result.stderr
    return repo, json.loads(result.stdout)


def place(path: Path, needle: str) -> tuple[int, int]:
    """1-based line and column of the first ``needle`` in a file."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(f"{needle!r} not in {path}")


def test_a_repository_without_a_home_page_has_every_document_checked(
    server: BehaviourServer, tmp_path: Path
) -> None:
    repo, report = check_repo(server, tmp_path, ".", "--include-fragments")
    readme, guide = repo / "README.md", repo / "docs" / "guide.md"
    assert broken_locations(report) == {
        ("docs/api.md", "README.md", *place(readme, "docs/api.md")),
        (f"{server.origin}/gone", "README.md", *place(readme, f"{server.origin}/gone")),
        ("docs/guide.md#setup", "docs/guide.md", *place(guide, "#setup")),
    }
    assert server.count("/up") == 1
    assert server.count("/from-html") == 1  # an HTML file of the repository is a seed too
    assert server.count("/in-code-block") == 0
    assert server.count("/hidden") == 0


def test_a_readme_given_as_a_seed_has_its_links_checked(
    server: BehaviourServer, tmp_path: Path
) -> None:
    _, report = check_repo(server, tmp_path, "README.md")
    urls = {entry["url"] for entry in report["broken"]}
    assert urls == {"docs/api.md", f"{server.origin}/gone"}
    assert server.count("/from-html") == 0  # not linked from the README


def test_a_directory_with_a_home_page_is_still_followed_from_it(
    server: BehaviourServer, tmp_path: Path
) -> None:
    site = tmp_path / "public"
    write_repo(site, server.origin)
    (site / "index.html").write_text('<a href="notes.html">notes</a>\n', encoding="utf-8")
    result = run_cli("crawl", site, "--db", tmp_path / "c.db", "-n", "-f", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert server.count("/from-html") == 1
    assert server.count("/up") == 0  # README.md is not linked from the home page


def test_markdown_served_over_http_is_followed(server: BehaviourServer, tmp_path: Path) -> None:
    result = run_cli(
        "crawl", server.url("/doc.md"), "--db", tmp_path / "c.db", "-n", "-f", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert server.count("/child.html") == 1
    report = json.loads(result.stdout)
    assert broken_locations(report) == {
        (server.url("/gone"), server.url("/doc.md"), 3, DOC.splitlines()[2].index("/gone") + 1)
    }


def test_exclude_path_leaves_files_unread_but_links_to_them_checked(
    server: BehaviourServer, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    write_repo(repo, server.origin)
    (repo / "drafts").mkdir()
    (repo / "drafts" / "wip.md").write_text(f"[x]({server.origin}/from-drafts)\n")
    (repo / "lychee.toml").write_text('exclude_path = ["^drafts/", "notes"]\n')
    (repo / "README.md").write_text("[notes](notes.html) and [gone](notes-old.html)\n")
    result = run_cli("crawl", ".", "--db", tmp_path / "c.db", "-n", "-f", "json", cwd=repo)
    assert result.returncode == 2, result.stderr
    report = json.loads(result.stdout)
    assert {entry["url"] for entry in report["broken"]} == {"notes-old.html"}
    assert report["summary"]["ok"] >= 2  # notes.html checked: it exists
    assert server.count("/from-drafts") == 0  # not a seed
    assert server.count("/from-html") == 0  # notes.html answered, its links not read
    assert server.count("/up") == 0  # the README was rewritten without it


def test_a_quoted_file_pattern_is_expanded_and_one_matching_nothing_refused(
    server: BehaviourServer, tmp_path: Path
) -> None:
    repo, report = check_repo(server, tmp_path, "docs/**/*.md", "--include-fragments")
    urls = {entry["url"] for entry in report["broken"]}
    # ../README.md, linked from the guide, is in the site: the repository is its root
    assert urls == {"docs/guide.md#setup", "docs/api.md", f"{server.origin}/gone"}
    assert report["crawl"]["seeds"] == [str(repo / "docs" / "guide.md")]
    result = run_cli("crawl", "nowhere/*.md", "--db", tmp_path / "d.db", "-n", cwd=repo)
    assert result.returncode == 3
    assert "no file matches" in result.stderr


def test_in_a_source_tree_a_link_to_a_folder_is_fine_as_on_github(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    (repo / "examples" / "run.py").write_text("print()\n")
    (repo / "README.md").write_text("[examples](examples/) and [gone](gone/)\n")
    result = run_cli("crawl", ".", "--db", tmp_path / "c.db", "-n", "-f", "json", cwd=repo)
    assert result.returncode == 2, result.stderr
    assert {entry["url"] for entry in json.loads(result.stdout)["broken"]} == {"gone/"}
    # a built site (a home page at its root) answers 404 for a folder without one
    site = tmp_path / "site"
    (site / "examples").mkdir(parents=True)
    (site / "index.html").write_text('<a href="examples/">examples</a>\n')
    result = run_cli("crawl", site, "--db", tmp_path / "d.db", "-n", "-f", "json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert {entry["url"] for entry in json.loads(result.stdout)["broken"]} == {"site/examples/"}


def test_a_directory_with_nothing_to_check_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty" / "img").mkdir(parents=True)
    result = run_cli("crawl", "empty", "--db", tmp_path / "c.db", "-n", cwd=tmp_path)
    assert result.returncode == 3
    assert "no HTML or Markdown file" in result.stderr


def test_a_markdown_headings_anchor_matches_whatever_the_case_as_on_github(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text(
        "## Быстрый старт\n\n"
        "[up](#Быстрый-старт) [guide](guide.md#Setup-Steps) [html](page.html#Top-Part)\n"
        "[missing](guide.md#No-Such-Part)\n"
    )
    (repo / "guide.md").write_text('## Setup steps\n\n<a id="Legacy"></a>\n')
    (repo / "page.html").write_text('<h2 id="top-part">Top</h2>\n')
    (repo / "links.md").write_text("[legacy](guide.md#legacy)\n")
    result = run_cli(
        "crawl", ".", "--db", tmp_path / "c.db", "--include-fragments", "-n", "-f", "json",
        cwd=repo,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    broken = {entry["url"] for entry in json.loads(result.stdout)["broken"]}
    # HTML ids stay case-sensitive; Markdown's anchors are compared lowercased
    assert broken == {"page.html#Top-Part", "guide.md#no-such-part"}


def test_markdown_served_as_plain_text_is_read_by_its_name(
    server: BehaviourServer, tmp_path: Path
) -> None:
    for path in ("/raw/README.md", "/raw/notes.txt"):
        result = run_cli("crawl", server.url(path), "--db", tmp_path / "c.db", "-n", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    assert server.count("/from-raw.html") == 1  # from README.md, not from notes.txt


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_in_a_git_checkout_what_gitignore_leaves_out_is_not_checked(tmp_path: Path) -> None:
    """A Rust ``target/doc`` or a Python ``venv/`` holds thousands of pages nobody wrote."""
    repo = tmp_path / "repo"
    (repo / "target" / "doc").mkdir(parents=True)
    (repo / "docs").mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("target/\n")
    (repo / "README.md").write_text("[guide](docs/guide.md)\n")
    (repo / "docs" / "guide.md").write_text("[gone](gone.md)\n")  # untracked: still checked
    (repo / "target" / "doc" / "api.html").write_text('<a href="missing.html">x</a>\n')
    git(repo, "add", "README.md")
    # A checkout's configuration must not run a program when it is listed.
    marker = tmp_path / "ran"
    git(repo, "config", "core.fsmonitor", f"touch {marker}; false")
    result = run_cli("crawl", ".", "--db", tmp_path / "c.db", "-n", "-f", "json", cwd=repo)
    assert result.returncode == 2, result.stderr
    assert {entry["url"] for entry in json.loads(result.stdout)["broken"]} == {"docs/gone.md"}
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_folder_of_a_checkout_is_checked_within_the_checkout(tmp_path: Path) -> None:
    """``crawler crawl docs``: its ``../README.md`` resolves as on GitHub, not as a 404."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "README.md").write_text("# Top\n")
    (repo / "docs" / "guide.md").write_text("[home](../README.md#top) [gone](../gone.md)\n")
    result = run_cli(
        "crawl", "docs", "--include-fragments", "--db", tmp_path / "c.db", "-n", "-f", "json",
        cwd=repo,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    report = json.loads(result.stdout)
    assert [(b["url"], b["sources"]) for b in report["broken"]] == [
        ("gone.md", ["docs/guide.md:1:33"])
    ]
    # the checkout is recorded as the crawl's root: a later report roots it alike
    again = run_cli("report", "--db", tmp_path / "c.db", "-f", "json", cwd=repo)
    assert json.loads(again.stdout)["broken"] == report["broken"]


def test_a_file_name_that_is_not_utf8_is_crawled_on_both_backends(
    tmp_path: Path, any_db: str
) -> None:
    """Its URL escapes its bytes (%FF), which name it again; shown with U+FFFD.

    Before, listing the folder's files failed with a traceback (UnicodeEncodeError).
    """
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "README.md").write_text("# Top\n\n[odd](b%FFd.md), [gone](gone.md)\n")
    odd = docs / os.fsdecode(b"b\xffd.md")
    odd.write_text("# Odd\n\n[back](README.md#top), [lost](lost.md)\n")
    result = run_cli("crawl", ".", "--db", any_db, "-n", "-f", "json", cwd=docs)
    assert result.returncode == 2, result.stderr
    report = json.loads(result.stdout)
    assert report["summary"]["pages"] == 2
    broken = {entry["url"]: entry["sources"] for entry in report["broken"]}
    assert broken == {"gone.md": ["README.md:3:25"], "lost.md": ["b\ufffdd.md:3:31"]}
