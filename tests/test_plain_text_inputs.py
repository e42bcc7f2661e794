"""Plain-text inputs (``notes.txt``, ``README.rst``) have their URLs checked, as lychee checks
any file it is given; a crawled site's text files are only checked themselves.

The URLs point at a loopback server that records what it is asked: a URL
with the sentence's punctuation after it must arrive without it, and a URL in
a text file the crawl merely reached must never arrive.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from crawler.config import CrawlSettings
from crawler.fetch_types import Fetched
from crawler.models import LeasedUrl, UrlKind
from crawler.outcome import plain_text_parsed
from crawler.scope import Scope

from kit.clikit import broken_locations, run_cli
from kit.realsites import BehaviourServer, ThreadedBehaviour


async def answer(request: web.BaseRequest) -> web.StreamResponse:
    """/gone is 404; /list.txt is a plain-text list of URLs; /index.html links to it."""
    origin = f"http://{request.host}"
    if request.path.startswith("/gone"):
        return web.Response(status=404)
    if request.path == "/list.txt":
        return web.Response(text=f"{origin}/listed\n{origin}/gone-listed\n")
    if request.path == "/index.html":
        page = '<a href="/list.txt">the list</a>'
        return web.Response(text=page, content_type="text/html")
    return web.Response(text="<p>fine</p>", content_type="text/html")


@pytest.fixture
def server() -> Iterator[BehaviourServer]:
    with ThreadedBehaviour(answer) as running:
        yield running


def crawl(cwd: Path, *args: str | Path, db: str = "c.db", exits: int = 2) -> dict[str, Any]:
    """``crawler crawl ARGS -f json`` in ``cwd``, its exit code checked: its report."""
    result = run_cli("crawl", *args, "--db", cwd / db, "-n", "-f", "json", cwd=cwd)
    assert result.returncode == exits, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_the_urls_of_text_files_named_as_inputs_are_checked_where_they_are_written(
    server: BehaviourServer, tmp_path: Path
) -> None:
    origin = server.origin
    (tmp_path / "notes.txt").write_text(
        f"Release notes.\nSee {origin}/up. And ({origin}/paren), or\n  {origin}/gone!\n",
        encoding="utf-8",
    )
    (tmp_path / "README.rst").write_text(
        f"Project\n=======\n\nThe `guide <{origin}/guide>`_ and {origin}/gone-rst\n",
        encoding="utf-8",
    )
    report = crawl(tmp_path, "notes.txt", "README.rst")
    assert broken_locations(report) == {
        (f"{origin}/gone", "notes.txt", 3, 3),
        (f"{origin}/gone-rst", "README.rst", 4, len(f"The `guide <{origin}/guide>`_ and ") + 1),
    }
    for path in ("/up", "/paren", "/guide"):  # without the sentence's punctuation
        assert server.count(path) == 1, path
    asked = {a.path for a in server.arrivals} - {"/robots.txt"}
    assert asked == {"/up", "/paren", "/gone", "/guide", "/gone-rst"}


def test_a_text_url_given_as_input_is_read_and_one_only_reached_is_only_checked(
    server: BehaviourServer, tmp_path: Path
) -> None:
    report = crawl(tmp_path, server.url("/list.txt"))
    assert {entry["url"] for entry in report["broken"]} == {server.url("/gone-listed")}
    assert server.count("/listed") == 1

    server.arrivals.clear()
    crawl(tmp_path, server.url("/index.html"), db="d.db", exits=0)
    assert server.count("/list.txt") == 1
    assert server.count("/listed") == 0  # a text file the crawl reached: checked, not read


def test_a_text_input_keeps_the_links_cap_and_counts_the_rest() -> None:
    scope = Scope.build(CrawlSettings(), ["http://127.0.0.1:8000/"])
    leased = LeasedUrl(id=1, url="http://127.0.0.1:8000/list.txt", host="127.0.0.1:8000",
                       kind=UrlKind.PAGE, depth=0, hop=0, attempts=0)  # fmt: skip
    lines = "".join(f"http://127.0.0.1:8000/p{i}\n" for i in range(5))
    text = lines + "http://127.0.0.1:8000/end" + "." * 50_000  # the dots are not the URL's
    fetched = Fetched(method="GET", status=200, content_type="text/plain", body=text.encode())
    parsed = plain_text_parsed(leased, fetched, scope, max_links=3)
    assert [child.url for child in parsed.children] == [
        f"http://127.0.0.1:8000/p{i}" for i in range(3)
    ]
    assert [(child.line, child.column) for child in parsed.children] == [(1, 1), (2, 1), (3, 1)]
    assert parsed.dropped == 3
