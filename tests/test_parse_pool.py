"""Parse helper processes: same links as parsing in-process, and losing one loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from crawler import outcome
from crawler.config import CrawlSettings
from crawler.engine import loop as engine
from crawler.engine import runner
from crawler.engine.parse_pool import ParsePool
from crawler.fetch_types import Fetched
from crawler.models import LeasedUrl, UrlKind
from crawler.outcome import parse_body
from crawler.scope import Scope

from kit.clikit import plant_decoy_crawler
from kit.crawlkit import comparable, crawl
from kit.sitekit import Page, page_html, wait_until, wait_until_sync

BOUND_S = 30.0
BASE = "http://127.0.0.1:8000/docs/a/page.html"


def _row(url: str = BASE) -> LeasedUrl:
    return LeasedUrl(id=1, url=url, host="127.0.0.1:8000", kind=UrlKind.PAGE, depth=2, hop=0,
                     attempts=0)  # fmt: skip


def _page(links: list[str]) -> Fetched:
    body = page_html(links=links, assets=["/s.css", "img/x.png"]).encode()
    return Fetched(method="GET", status=200, content_type="text/html; charset=utf-8", body=body)


@pytest.fixture
async def pool():
    scope = Scope.build(CrawlSettings(), ["http://127.0.0.1:8000/docs/"])
    started = ParsePool(scope, include_fragments=True, processes=1)
    await asyncio.wait_for(started.start(), BOUND_S)
    yield started, scope
    await asyncio.wait_for(started.close(), BOUND_S)


async def test_helper_finds_what_the_crawler_would(pool) -> None:
    helpers, scope = pool
    links = ["../b/x.html#s1", "/docs/", "mailto:a@b.c", "http://other.test/%7Ey?q=é", "#top"]
    fetched = _page(links)
    expected = parse_body(_row(), fetched, scope, include_fragments=True)
    got = await asyncio.wait_for(helpers.parse(_row(), fetched), BOUND_S)
    assert got is not None
    assert got.children == expected.children
    assert got.anchors == expected.anchors
    assert {c.url for c in got.children} >= {"http://127.0.0.1:8000/docs/b/x.html"}


async def test_a_helper_runs_the_installed_crawler_whatever_the_working_directory(
    tmp_path, monkeypatch
) -> None:
    """A ``crawler/`` folder where the crawl was started (a checkout, a project of
    that name) is not what the helper imports."""
    plant_decoy_crawler(tmp_path)
    monkeypatch.chdir(tmp_path)
    scope = Scope.build(CrawlSettings(), ["http://127.0.0.1:8000/docs/"])
    helpers = ParsePool(scope, include_fragments=True, processes=1)
    await asyncio.wait_for(helpers.start(), BOUND_S)
    try:
        got = await asyncio.wait_for(helpers.parse(_row(), _page(["../b/x.html"])), BOUND_S)
    finally:
        await asyncio.wait_for(helpers.close(), BOUND_S)
    assert got is not None, "the helper died: it imported the working directory's crawler"
    assert [c.url for c in got.children][:1] == ["http://127.0.0.1:8000/docs/b/x.html"]


async def test_a_lost_helper_hands_every_page_back(pool) -> None:
    helpers, _ = pool
    pending = [asyncio.ensure_future(helpers.parse(_row(), _page([f"/p{i}"]))) for i in range(50)]
    helpers._helpers[0].process.kill()
    results = await asyncio.wait_for(asyncio.gather(*pending), BOUND_S)
    # Whatever the helper answered before it died is right; the rest come back None.
    assert all(r is None or r.children for r in results)
    assert await asyncio.wait_for(helpers.parse(_row(), _page(["/late"])), BOUND_S) is None
    assert not helpers.alive


@pytest.mark.patches_compiled
async def test_pages_of_one_turn_go_as_one_batch(pool) -> None:
    helpers, scope = pool
    writes = 0
    channel = helpers._helpers[0].channel
    send = channel.send

    def counting(frame: bytes) -> None:
        nonlocal writes
        writes += 1
        send(frame)

    channel.send = counting
    pages = [_page([f"/p{i}", f"/q{i}"]) for i in range(40)]
    got = await asyncio.wait_for(
        asyncio.gather(*(helpers.parse(_row(), page) for page in pages)), BOUND_S
    )
    expected = [parse_body(_row(), page, scope, include_fragments=True) for page in pages]
    assert [g.children for g in got] == [e.children for e in expected]
    assert writes == 2  # 40 pages handed over in one turn: a full batch of 32, then the rest


async def test_a_helper_parses_while_this_thread_is_busy(pool) -> None:
    """Pages larger than a pipe reach the helper, and its replies leave it, while the
    event loop's thread is held (parsing a page itself): threads move the pipes."""
    helpers, scope = pool
    helper = helpers._helpers[0]
    pages = [_page([f"/p{i}-{n}" for n in range(6_000)]) for i in range(4)]  # ~400 KB each
    assert all(len(page.body or b"") > 256 * 1024 for page in pages)
    pending = [asyncio.ensure_future(helpers.parse(_row(), page)) for page in pages]
    await asyncio.sleep(0)  # one turn, no time: each task hands its page over, no more
    assert len(helper.pending) == len(pages)
    helpers.send_now()
    assert helper.queued_bytes() == sum(len(page.body or b"") for page in pages)
    # This thread held: no turn of the loop moves a byte until every page is parsed.
    wait_until_sync(lambda: helper.queued_bytes() == 0, BOUND_S, message="the helper's progress")
    got = await asyncio.wait_for(asyncio.gather(*pending), BOUND_S)
    expected = [parse_body(_row(), page, scope, include_fragments=True) for page in pages]
    assert [g.children for g in got] == [e.children for e in expected]


async def test_the_helpers_are_behind_when_each_holds_that_many_bytes(pool) -> None:
    helpers, _ = pool
    helper = helpers._helpers[0]
    page = _page([f"/p{n}" for n in range(100)])
    size = len(page.body or b"")
    assert not helpers.behind(1_000, size)
    helper.sent_bytes += size  # as if a page were sent and not parsed yet
    assert helpers.behind(1_000, size)
    assert not helpers.behind(1_000, size + 1)
    assert not helpers.behind(1_000)  # pages alone: one is not behind
    helper.sent_bytes -= size


async def test_a_helper_outlives_a_sigterm_to_the_process_group(pool) -> None:
    # `timeout`, a service manager or `kill -- -PGID` signal the whole group:
    # the crawler decides what stops, and closes the helper's stdin to do it.
    helpers, _ = pool
    # One answer first: the helper is past its start-up and has its handlers.
    assert await asyncio.wait_for(helpers.parse(_row(), _page(["/before"])), BOUND_S)
    helpers._helpers[0].process.send_signal(signal.SIGTERM)
    got = await asyncio.wait_for(helpers.parse(_row(), _page(["/after"])), BOUND_S)
    assert got is not None
    assert helpers.alive


def _linked_site() -> dict[str, Page]:
    """30 pages linking to each other, to images and to a missing page."""
    site = {"/": Page(links=[f"/p{i}" for i in range(30)] + ["/gone", "mailto:x@y.z"])}
    for i in range(30):
        site[f"/p{i}"] = Page(links=[f"/p{(i * 7) % 30}", f"/q{i % 3}.png", "/gone#x"])
    return site


def _count_helper_answers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each page handed to a helper from now on: True when the helper answered it."""
    answered: list[bool] = []
    parse = ParsePool.parse

    async def counting(self: ParsePool, leased: LeasedUrl, fetched: Fetched):  # type: ignore[no-untyped-def]
        parsed = await parse(self, leased, fetched)
        answered.append(parsed is not None)
        return parsed

    monkeypatch.setattr(ParsePool, "parse", counting)
    return answered


@pytest.mark.patches_compiled
async def test_crawl_with_a_helper_reports_what_one_without_does(
    site_server, tmp_path, monkeypatch
) -> None:
    server = await site_server(_linked_site())
    monkeypatch.setattr(engine, "PARSE_HELPERS_AFTER_PAGES", 5)
    answered = _count_helper_answers(monkeypatch)
    inline = await crawl(tmp_path / "inline.db", [server.url("/")])
    assert not answered
    helped = await crawl(tmp_path / "helped.db", [server.url("/")], parse_helpers=1)
    assert comparable(helped) == comparable(inline)
    assert sum(answered) >= 10  # the helper parsed most pages after the first five
    assert server.url("/gone") in {b.url for b in helped.broken}


@pytest.mark.patches_compiled
async def test_a_shutdown_cut_short_leaves_no_helper_running(
    site_server, tmp_path, monkeypatch
) -> None:
    """Cancelled again while its shutdown waits for a request in flight, a crawl never
    reaches the pool's close: its helper must stop all the same."""
    site = {"/": Page(links=["/slow", *(f"/p{i}" for i in range(10))]), "/slow": Page(delay_s=60)}
    site |= {f"/p{i}": Page(links=["/"]) for i in range(10)}
    server = await site_server(site)
    shutting_down = asyncio.Event()
    shutdown = engine.Engine._shutdown

    async def noted(self, *args):  # type: ignore[no-untyped-def]
        shutting_down.set()
        await shutdown(self, *args)

    monkeypatch.setattr(engine.Engine, "_shutdown", noted)
    job = runner.start(tmp_path / "c.db", [server.url("/")], CrawlSettings(max_retries=0))
    run = asyncio.create_task(job.run(parse_helpers=1, parse_helpers_after=0))
    try:
        await wait_until(
            lambda: (
                job.engine is not None
                and job.engine._parse_pool is not None
                and job.engine._parse_pool.alive
                and server.count("/slow") == 1
            ),
            timeout=BOUND_S,
        )
        assert job.engine is not None
        assert job.engine._parse_pool is not None
        helpers = [helper.process for helper in job.engine._parse_pool._helpers]
        assert helpers
        run.cancel()
        await asyncio.wait_for(shutting_down.wait(), BOUND_S)  # waiting for /slow now
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        for process in helpers:
            await asyncio.wait_for(process.wait(), BOUND_S)
    finally:
        run.cancel()
        job.close()


async def test_a_start_cancelled_while_spawning_leaves_no_pipe_open(monkeypatch) -> None:
    """A crawl cancelled while its helper starts (the service stopping it early) keeps
    none of the pipes it made for the helper: a long-lived process would leak them."""
    spawning = asyncio.Event()

    async def stuck(*args, **kwargs):  # type: ignore[no-untyped-def]
        spawning.set()
        await asyncio.Event().wait()  # a start that never completes

    monkeypatch.setattr(asyncio, "create_subprocess_exec", stuck)
    scope = Scope.build(CrawlSettings(), ["http://127.0.0.1:8000/docs/"])
    starting = ParsePool(scope, include_fragments=True, processes=1)
    before = sorted(os.listdir("/proc/self/fd"))
    start = asyncio.create_task(starting.start())
    await asyncio.wait_for(spawning.wait(), BOUND_S)
    assert len(os.listdir("/proc/self/fd")) > len(before)  # the pipes are open meanwhile
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
    assert sorted(os.listdir("/proc/self/fd")) == before
    assert not starting.alive


async def test_the_helpers_are_behind_when_each_holds_that_many_pages(pool) -> None:
    helpers, _ = pool
    helper = helpers._helpers[0]
    assert not helpers.behind(1)
    loop = asyncio.get_running_loop()
    held = {-1: loop.create_future(), -2: loop.create_future()}  # ids no reply will name
    helper.pending.update(held)
    assert helpers.behind(2)
    assert not helpers.behind(3)
    for request_id in held:
        del helper.pending[request_id]
    helper.alive = False  # a lost helper is never behind: nothing goes to it
    assert not helpers.behind(0)
    helper.alive = True


@pytest.mark.patches_compiled
async def test_pages_the_helpers_are_behind_on_are_parsed_here_alike(
    site_server, tmp_path, monkeypatch
) -> None:
    """Every other page parsed on the loop's thread: the same report as all parsed there."""
    server = await site_server(_linked_site())
    monkeypatch.setattr(engine, "PARSE_HELPERS_AFTER_PAGES", 5)
    inline = await crawl(tmp_path / "inline.db", [server.url("/")])
    asked: list[bool] = []

    def alternating(self: ParsePool, pages_each: int, bytes_each: int | None = None) -> bool:
        asked.append(len(asked) % 2 == 0)
        return asked[-1]

    monkeypatch.setattr(ParsePool, "behind", alternating)
    sent = _count_helper_answers(monkeypatch)
    shared = await crawl(tmp_path / "shared.db", [server.url("/")], parse_helpers=1)
    assert comparable(shared) == comparable(inline)
    assert sum(asked) >= 5  # parsed here: the helper was "behind"
    assert sum(sent) >= 5  # parsed by the helper
    assert len(sent) == len(asked) - sum(asked)


@pytest.mark.patches_compiled
async def test_helpers_start_after_so_much_html_however_few_pages(
    site_server, tmp_path, monkeypatch
) -> None:
    site = {"/": Page(links=[f"/p{i}" for i in range(20)])}
    big = page_html(links=["/"]).replace("</body>", "<p>" + "lorem " * 4_000 + "</p></body>")
    site |= {f"/p{i}": Page(body=big) for i in range(20)}  # 24 KB each
    server = await site_server(site)
    monkeypatch.setattr(engine, "PARSE_HELPERS_AFTER_PAGES", 1_000)
    monkeypatch.setattr(engine, "PARSE_HELPERS_AFTER_BYTES", 50_000)  # a few of these pages
    answered = _count_helper_answers(monkeypatch)
    await crawl(tmp_path / "c.db", [server.url("/")], parse_helpers=1, max_concurrency=2)
    assert sum(answered) >= 5  # the helper started after the first few pages, not never


def _note_parses(monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, str]], list[int]]:
    """Where each page is parsed from now on ("loop", "thread"; a helper's pages are
    counted by ``_count_helper_answers``), and each start of the helpers."""
    parsed: list[tuple[str, str]] = []

    def noting(where: str, parse):  # type: ignore[no-untyped-def]
        def noted(leased, fetched, *args):  # type: ignore[no-untyped-def]
            on_loop = threading.current_thread() is threading.main_thread()
            parsed.append(("loop" if on_loop else where, leased.url))
            return parse(leased, fetched, *args)

        return noted

    monkeypatch.setattr(engine, "parse_body", noting("thread", engine.parse_body))
    monkeypatch.setattr(outcome, "parse_body", noting("loop", outcome.parse_body))
    starts: list[int] = []
    start = ParsePool.start

    async def counted(self: ParsePool) -> None:
        starts.append(1)
        await start(self)

    monkeypatch.setattr(ParsePool, "start", counted)
    return parsed, starts


def _large_page(links: list[str]) -> Page:
    text = "<p>" + "lorem " * 4_000 + "</p></body>"
    return Page(body=page_html(links=links).replace("</body>", text))  # 24 KB


@pytest.mark.patches_compiled
@pytest.mark.parametrize("helpers", [0, 1])
async def test_a_page_too_large_for_the_loop_is_never_parsed_on_it(
    site_server, tmp_path, monkeypatch, helpers: int
) -> None:
    """While other work goes on, a page over the loop's limit goes to a helper, started
    for it however little was parsed before, or, with none allowed, to a thread: the
    loop's thread goes on fetching meanwhile."""
    site = {"/": Page(links=[f"/big{i}" for i in range(3)] + [f"/p{i}" for i in range(5)])}
    site |= {f"/big{i}": _large_page(["/", "/gone"]) for i in range(3)}
    site |= {f"/p{i}": Page(links=["/", "/gone"]) for i in range(5)}
    server = await site_server(site)
    inline = await crawl(tmp_path / "inline.db", [server.url("/")])
    monkeypatch.setattr(engine, "SHARE_MAX_BYTES", 20_000)
    monkeypatch.setattr(engine, "PARSE_HELPERS_AFTER_PAGES", 1_000)  # not by pages nor bytes
    monkeypatch.setattr(engine.Engine, "_other_work", lambda self: True)
    parsed, starts = _note_parses(monkeypatch)
    helped = _count_helper_answers(monkeypatch)
    spared = await crawl(tmp_path / "spared.db", [server.url("/")], parse_helpers=helpers)
    assert comparable(spared) == comparable(inline)
    bigs = {server.url(f"/big{i}") for i in range(3)}
    assert not bigs & {url for where, url in parsed if where == "loop"}
    threaded = {url for where, url in parsed if where == "thread"}
    if helpers:
        assert starts == [1]
        assert not threaded
        assert sum(helped) >= 3
    else:
        assert threaded == bigs
        assert not starts


@pytest.mark.patches_compiled
async def test_a_large_page_checked_alone_is_parsed_at_once(
    site_server, tmp_path, monkeypatch
) -> None:
    """With nothing else to do, a large page does not wait for a helper to start: it is
    parsed on a thread at once, and no helper starts."""
    server = await site_server({"/": _large_page(["/a", "/gone"]), "/a": Page()})
    monkeypatch.setattr(engine, "SHARE_MAX_BYTES", 20_000)
    parsed, starts = _note_parses(monkeypatch)
    data = await crawl(tmp_path / "c.db", [server.url("/")], parse_helpers=1, max_depth=0)
    assert parsed == [("thread", server.url("/"))]
    assert not starts
    assert [b.url for b in data.broken] == [server.url("/gone")]


def test_helper_exits_when_its_crawler_is_gone() -> None:
    """A SIGKILLed crawler closes the helper's stdin; the helper must not linger."""
    import pickle
    import subprocess
    import sys

    from crawler.engine import parse_child, parse_pool

    scope = Scope.build(CrawlSettings(), ["http://127.0.0.1:8000/"])
    child = subprocess.Popen(
        [sys.executable, *parse_pool.HELPER_ARGS],  # as the pool starts it
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    child.stdin.write(parse_child.encode((scope, False, None)))
    request = (7, parse_child.row_tuple(_row()), "text/html", None, b"<a href=x>")
    child.stdin.write(parse_child.encode([request]))
    child.stdin.flush()
    header = child.stdout.read(parse_child.FRAME.size)
    (size,) = parse_child.FRAME.unpack(header)
    [(request_id, children, _, error, _)] = pickle.loads(child.stdout.read(size))  # noqa: S301
    assert (request_id, error) == (7, None)
    assert [c[0] for c in children] == ["http://127.0.0.1:8000/docs/a/x"]
    child.stdin.close()
    assert child.wait(timeout=BOUND_S) == 0
    child.stdout.close()
