"""The dashboard's view of a recurring crawl in headless Chromium: runs over time as an
inline SVG chart, and the diff of the last two runs, with hostile URLs shown as text."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.cdp import Browser, chromium_path
from kit.definitionkit import config, harness
from kit.serve_site import ThreadedSite
from kit.service_sites import small_site
from kit.servicekit import TOKEN
from kit.sitekit import Page

pytestmark = pytest.mark.skipif(
    chromium_path() is None and not os.environ.get("CI"),
    reason="needs chromium (apt-get install chromium)",
)
HOSTILE = "/x%22%3E%3Cimg%20src=x%20onerror=window.pwned=1%3E"


@pytest.fixture
def site() -> Iterator[ThreadedSite]:
    with ThreadedSite(small_site()) as server:
        yield server


async def test_a_definition_shows_its_runs_chart_and_last_diff(
    tmp_path: Path, site: ThreadedSite
) -> None:
    async for svc in harness(config(tmp_path / "data", None)):
        body = {"seeds": [site.url("/")], "settings": {"max_retries": 0}}
        created = await svc.ok(
            "POST", "/definitions", {**body, "schedule": {"every": "1h"}}, status=201
        )
        await svc.wait_run(created["active_run"])
        site.server.site["/a"] = Page(links=["/b", "/new-missing", HOSTILE])
        svc.clock.advance(3600)
        (second,) = await svc.tick()
        await svc.wait_run(second)
        base = str(svc.client.make_url("/"))
        async with Browser(tmp_path) as browser:
            page = await browser.new_page()
            await page.goto(base)
            await page.eval(f"sessionStorage.setItem('crawler-token', {json.dumps(TOKEN)})")
            await page.goto(base)
            assert await page.wait_for(
                "document.querySelectorAll('#definitions tbody tr').length === 1"
            )
            await page.eval(f"location.hash = '#/definitions/{created['id']}'")
            dots = await page.wait_for(
                "(() => { const d = [...document.querySelectorAll('#runs-chart circle')];"
                " return d.length === 2 ? d.map((c) => c.textContent) : null; })()"
            )
            assert dots == [
                f"run {created['active_run']}: 2 broken",
                f"run {second}: 3 broken",
            ]
            summary = await page.wait_for(
                "(() => { const t = document.getElementById('diff-summary').textContent;"
                " return t.startsWith('Run') ? t : null; })()"
            )
            assert "2 new broken, 1 fixed, 1 still broken" in summary
            new = await page.eval(
                "[...document.querySelectorAll('#diff .diff')[0]"
                ".querySelectorAll('a')].map((a) => a.textContent)"
            )
            assert site.url("/new-missing") in new
            assert any("onerror" in url for url in new)
            assert await page.eval("window.pwned === undefined") is True
            assert await page.eval("document.querySelectorAll('#diff img').length") == 0
            await page.screenshot(tmp_path / "definition.png")
