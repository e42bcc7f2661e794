"""The browser's life under ``--render``: restarts that bound its memory, crashes survived,
and no browser left behind when the crawler is killed with ``kill -9`` (then ``resume``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from crawler.config import CrawlSettings
from crawler.net.fetch import Fetcher
from crawler.net.render import renderer as renderer_module
from crawler.net.render.renderer import Renderer, RenderLimits

from kit.browser import chromium_or_skip
from kit.clikit import clean_env, cli, run_cli
from kit.jssite import PLANTED, JsSite, serve_js_site
from kit.sitekit import wait_until


@pytest.fixture
async def js_site() -> AsyncIterator[JsSite]:
    async with serve_js_site() as site:
        yield site


async def _render(renderer: Renderer, fetcher: Fetcher, url: str) -> list[str]:
    document = await fetcher.fetch_page(url)

    async def load(target: str, method: str, headers: dict[str, str]):  # type: ignore[no-untyped-def]
        return await fetcher.fetch_resource(target, method, headers)

    rendered = await renderer.render(url, document, load)
    return [issue.kind for issue in rendered.issues]


def _limits(**changes: float) -> RenderLimits:
    values = {"timeout_s": 8.0, "concurrency": 2, "restart_pages": 100, "max_rss_bytes": 1 << 40}
    return RenderLimits(**{**values, **changes})  # type: ignore[arg-type]


def _group_alive(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                return True
    return False


def _browser_children(parent: int) -> list[int]:
    """Process groups led by the crawler's children (its browsers)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent and int(fields[2]) == int(entry):
                found.append(int(entry))
    return found


async def test_a_browser_that_does_not_start_costs_the_render_not_the_page(
    js_site: JsSite,
) -> None:
    async with Fetcher(CrawlSettings()) as fetcher:
        renderer = Renderer("/bin/true", "test", _limits())
        try:
            assert await _render(renderer, fetcher, js_site.url("/plain")) == ["render_failed"]
        finally:
            await renderer.aclose()


async def test_the_browser_is_restarted_every_n_pages(js_site: JsSite) -> None:
    chromium = chromium_or_skip()
    async with Fetcher(CrawlSettings()) as fetcher:
        renderer = Renderer(chromium, "test", _limits(restart_pages=2))
        pids = []
        try:
            for _ in range(5):
                assert await _render(renderer, fetcher, js_site.url("/plain")) == []
                pids.append(renderer.browser_pid)
        finally:
            await renderer.aclose()
    assert renderer.restarts == 2
    assert len(set(pids)) == 3
    assert not any(_group_alive(pid) for pid in set(pids) if pid is not None)


async def test_the_browser_is_restarted_over_its_memory_limit(
    js_site: JsSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    chromium = chromium_or_skip()
    monkeypatch.setattr(renderer_module, "RSS_CHECK_PAGES", 2)
    async with Fetcher(CrawlSettings()) as fetcher:
        renderer = Renderer(chromium, "test", _limits(max_rss_bytes=1024))
        try:
            for _ in range(3):
                await _render(renderer, fetcher, js_site.url("/plain"))
        finally:
            await renderer.aclose()
    assert renderer.restarts == 1
    assert renderer.peak_rss_bytes > 1024


async def test_a_crashed_browser_is_restarted_and_the_page_retried(js_site: JsSite) -> None:
    chromium = chromium_or_skip()
    async with Fetcher(CrawlSettings()) as fetcher:
        renderer = Renderer(chromium, "test", _limits(timeout_s=2.0))
        try:
            rendering = asyncio.create_task(_render(renderer, fetcher, js_site.url("/forever")))
            await wait_until(lambda: js_site.hits["/ping"] >= 2, timeout=30)
            first = renderer.browser_pid
            assert first is not None
            os.killpg(first, signal.SIGKILL)
            kinds = await asyncio.wait_for(rendering, 60)
            # The retry ran to its end on a new browser: the page never settles.
            assert kinds == ["not_settled"]
            assert renderer.restarts == 1
            assert renderer.browser_pid != first
            assert await _render(renderer, fetcher, js_site.url("/plain")) == []
        finally:
            await renderer.aclose()


async def test_a_hung_browser_is_restarted_and_the_page_retried(
    js_site: JsSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    chromium = chromium_or_skip()
    monkeypatch.setattr(renderer_module, "HANG_GRACE_S", 1.0)
    async with Fetcher(CrawlSettings()) as fetcher:
        renderer = Renderer(chromium, "test", _limits())
        try:
            assert await _render(renderer, fetcher, js_site.url("/plain")) == []
            hung = renderer.browser_pid
            assert hung is not None
            os.killpg(hung, signal.SIGSTOP)  # alive, answering nothing
            assert await _render(renderer, fetcher, js_site.url("/timer")) == []
            assert renderer.restarts == 1
            assert renderer.browser_pid != hung
        finally:
            await renderer.aclose()
    await wait_until(lambda: not _group_alive(hung), timeout=20, message="the hung browser lives")


async def test_kill_9_leaves_no_browser_and_resume_finishes(
    js_site: JsSite, tmp_path: Path
) -> None:
    chromium_or_skip()
    db = tmp_path / "c.db"
    args = ("--db", db, "--render", "--render-timeout", "6s", "-n", "--max-retries", "0")
    proc = subprocess.Popen(  # noqa: ASYNC220 - returns at once; the site runs on this loop
        cli("crawl", js_site.url("/"), *args, "-f", "json"),
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_until(lambda: js_site.hits["/ping"] >= 2, timeout=60)  # rendering /forever
        browsers = _browser_children(proc.pid)
        assert browsers, "no browser under the crawler"
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
    await wait_until(
        lambda: not any(_group_alive(pid) for pid in browsers),
        timeout=20,
        message="a browser outlived the crawler",
    )
    done = await asyncio.to_thread(run_cli, "resume", "--db", db, "-f", "json", "-n", cwd=tmp_path)
    assert done.returncode == 2, done.stderr  # finished, with broken links
    report = json.loads(done.stdout)
    assert report["crawl"]["state"] == "finished"
    found = {entry["url"] for entry in report["found_after_rendering"]}
    assert js_site.url("/more-missing") in found
    assert all(js_site.hits[path] >= 1 for path in PLANTED if "missing" not in path)


def test_bench_render_smoke(tmp_path: Path) -> None:
    """bench/render.py runs and every page of its client-rendered site is crawled."""
    chromium_or_skip()
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "bench/render.py", "--pages", "12", "--concurrency", "2"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["pages"] == 12
    assert figures["exit"] == 0
