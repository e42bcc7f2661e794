"""``--render``: a site whose links exist only after its scripts run, in headless Chromium.

Without ``--render`` the crawl finds what a crawler reading the sent HTML
finds; with it, every planted link (router with pushState, timer, "load
more" over JSON, a script that throws, a page that never stops loading, a
broken script URL), each broken one with its source, marked as found after
rendering in the database and the reports. Requests the page makes go
through the crawl's address guard: the loopback server it must not reach
never sees a request.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from crawler.engine.api import check_async
from crawler.report import csv as report_csv
from crawler.report import html as report_html
from crawler.report import json as report_json
from crawler.report import markdown as report_markdown
from crawler.report import text as report_text
from crawler.report.model import ReportData
from crawler.store import open as store_open

from kit.browser import chromium_or_skip
from kit.jssite import (
    BROKEN_RENDERED,
    CONSOLE_ERROR,
    PAGES,
    PLAIN,
    PLANTED,
    JsSite,
    serve_js_site,
)

GUARDED = {"exclude_all_private": True, "allow_networks": ["127.0.0.1/32"]}


def _urls(report: ReportData, site: JsSite) -> set[str]:
    return {row.url.removeprefix(site.base) for row in report.need_results()}


def _issues(report: ReportData, site: JsSite) -> set[tuple[str, str]]:
    return {(i.page.removeprefix(site.base), i.kind) for i in report.render_issues}


async def test_without_render_only_the_sent_html_is_read(tmp_path: Path) -> None:
    async with serve_js_site() as site:
        report = await check_async(site.url("/"), db=tmp_path / "c.db", **GUARDED)
    found = _urls(report, site)
    assert {"/", *PLAIN, *PAGES} <= found
    assert not found & set(PLANTED)
    assert report.render_issues == []
    assert [(b.url.removeprefix(site.base), b.sources) for b in report.broken] == [
        ("/missing.js", [site.url("/badscript")])
    ]


async def test_render_finds_every_planted_link_and_broken_link(any_db: str) -> None:
    chromium_or_skip()
    async with serve_js_site() as site:
        report = await check_async(
            site.url("/"), db=any_db, render=True, render_timeout_s=6, **GUARDED
        )
        secret_hits = sum(site.secret_hits.values())
    found = _urls(report, site)
    assert {"/", *PLAIN, *PAGES, *PLANTED} <= found
    broken = {(b.url.removeprefix(site.base), tuple(b.sources)) for b in report.broken}
    assert broken == {
        ("/missing.js", (site.url("/badscript"),)),
        *((url, (site.url(source),)) for url, source in BROKEN_RENDERED),
    }
    assert report.rendered_edges() == {
        (site.url(url), site.url(source)) for url, source in BROKEN_RENDERED
    }
    issues = _issues(report, site)
    assert {
        ("/throws", "script_error"),
        ("/throws", "console_error"),
        ("/forever", "not_settled"),
        ("/badscript", "request_failed"),
        ("/guard", "request_refused"),
    } <= issues
    assert ("/timer", "not_settled") not in issues
    console = [i.message for i in report.render_issues if i.kind == "console_error"]
    assert CONSOLE_ERROR in console
    refused = [i for i in report.render_issues if i.kind == "request_refused"]
    assert [i.url for i in refused] == [site.secret_url]
    assert secret_hits == 0  # the guard refused it before any connection


async def test_reports_mark_links_found_after_rendering(tmp_path: Path) -> None:
    chromium_or_skip()
    async with serve_js_site() as site:
        await check_async(
            site.url("/"), db=tmp_path / "c.db", render=True, render_timeout_s=6, **GUARDED
        )
    report = store_open.load_report(str(tmp_path / "c.db"))
    with sqlite3.connect(tmp_path / "c.db") as conn:
        marked = {
            (source.removeprefix(site.base), target.removeprefix(site.base), element)
            for source, target, element in conn.execute(
                "SELECT source, target, element FROM rendered_links"
            )
        }
    assert {
        ("/router/", "/router/a", "a"),
        ("/router/", "/router/b", "a"),
        ("/router/", "/router/deep", "a"),
        ("/timer", "/timer-target", "a"),
        ("/loadmore", "/more-1", "a"),
        ("/throws", "/before-throw", "a"),
        ("/forever", "/forever-link", "a"),
        ("/badscript", "/also-missing.js", "script"),
    } <= marked
    assert not any(target in ("/plain", "/missing.js") for _, target, _ in marked)
    more = site.url("/more-missing")
    text = report_text.render(report)
    assert f"✗ {more}  [404 Not Found]  (found after rendering)" in text
    assert "script_error: Error: planted failure" in text
    document = json.loads(report_json.render(report))
    assert {"url": more, "source": site.url("/loadmore")} in document["found_after_rendering"]
    assert any(i["kind"] == "not_settled" for i in document["render_issues"])
    assert "(found after rendering)" in report_markdown.render(report)
    assert "### Render issues" in report_markdown.render(report)
    html = report_html.render(report)
    assert 'class="rendered"' in html
    assert 'id="render-issues"' in html
    assert f"{more},404,404 Not Found,{site.url('/loadmore')},js:a" in report_csv.render(report)


@pytest.mark.parametrize("missing", ["/nonexistent/chromium", "no-such-browser-here", "true"])
def test_render_without_a_browser_fails_at_start(tmp_path: Path, missing: str) -> None:
    from kit.clikit import run_cli

    done = run_cli(
        "crawl", "http://127.0.0.1:9/", "--render", "--browser", missing, "-n", cwd=tmp_path
    )
    assert done.returncode == 3, done.stderr
    assert "apt-get install chromium" in done.stderr
    assert not (tmp_path / "crawl.db").exists()


async def test_the_browser_requests_go_out_as_the_crawl_s(tmp_path: Path) -> None:
    chromium_or_skip()
    async with serve_js_site() as site:
        await check_async(
            site.url("/"),
            db=tmp_path / "c.db",
            render=True,
            render_timeout_s=6,
            user_agent="render-test/1",
            headers={"X-Crawl": "yes"},
            **GUARDED,
        )
        sent = site.headers["/more.json"]  # asked by the page's script, sent by the crawler
        methods = site.methods
    assert sent["User-Agent"] == "render-test/1"
    assert sent["X-Crawl"] == "yes"
    assert "session=abc" in sent.get("Cookie", "")
    assert methods[("GET", "/pic.png")] == 0  # images are not downloaded by the browser
    assert methods[("HEAD", "/pic.png")] == 1  # the link is checked as always
    assert methods[("GET", "/")] == 1  # the document is fetched once, never again


async def test_the_browser_requests_pass_the_politeness_gate(tmp_path: Path) -> None:
    chromium_or_skip()
    async with serve_js_site() as site:
        await check_async(
            site.url("/parallel"),
            db=tmp_path / "c.db",
            render=True,
            render_timeout_s=6,
            host_concurrency=1,
            **GUARDED,
        )
        assert site.hits["/slow"] == 4  # the script's four fetches, one after the other
        assert site.max_in_flight == 1
