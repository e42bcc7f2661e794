"""Hostile servers: each behaviour is a recorded failure on its link; the crawl goes on.

The seed page is on one loopback port and the hostile routes on others; with
``--scope domain`` (same host name, any port) they are all crawled with GET.
Both backends (``any_db``): a hostile answer must become a recorded failure
whichever store records it.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from kit.crawlkit import crawl
from kit.sitekit import (
    BIG_HTML_FIRST_LINK,
    BIG_HTML_LAST_LINK,
    DEEP_LINK,
    LATIN1_HREFS,
    MISLABELLED_HREF,
    HostileServer,
    Page,
)

HOSTILE = {
    "endless": "larger than --max-body-bytes",
    "drip?interval=0.5": "timed out",
    "huge-headers": "invalid response",
    "loop-a": "redirect loop",
    "chain/50": "more than 10 redirects",
    "bad-gzip": "invalid response",
    "bad-brotli": "invalid response",
    "bad-chunked": "invalid response",
    "reset": "",
    "big-html?size=5000000": "larger than --max-body-bytes",
    "silent": "timed out",
}
FINE = ["deep", "latin1", "mislabelled"]


@pytest.fixture
async def hostile() -> HostileServer:
    async with HostileServer(max_duration_s=20) as server:
        yield server


async def test_every_hostile_behaviour_is_a_recorded_failure(
    site_server, hostile: HostileServer, any_db: str
) -> None:
    long_url = hostile.url("/ok/" + "x" * 100_000)
    links = [hostile.url(name) for name in [*HOSTILE, *FINE]] + [long_url]
    server = await site_server({"/": Page(links=links)})
    data = await crawl(
        any_db,
        [server.url("/")],
        scope="domain",
        timeout_s=2,
        max_body_bytes=2_000_000,
        max_concurrency=32,
        host_concurrency=32,
    )
    broken = {b.url: b for b in data.broken}
    for name, message in HOSTILE.items():
        url = hostile.url(name)
        assert url in broken, f"{name} not reported broken"
        assert message in (broken[url].error or ""), (name, broken[url].error)
        assert broken[url].sources == [server.url("/")]
    for name in FINE:
        assert hostile.url(name) not in broken, broken.get(hostile.url(name))
    assert long_url in broken  # a 100 KB URL is recorded, not requested
    requested = {target.split("?")[0] for _, target in hostile.requests}
    assert DEEP_LINK in requested  # found 100,000 levels down
    assert BIG_HTML_FIRST_LINK in requested  # the part read is still parsed
    assert BIG_HTML_LAST_LINK not in requested
    targets = [target for _, target in hostile.requests]
    assert "/ok/latin1?q=caf%E9" in targets
    assert any(t.startswith(MISLABELLED_HREF.split("?")[0]) for t in targets)
    assert LATIN1_HREFS
    assert data.crawl.state == "finished"


async def test_a_100_mb_page_costs_bounded_memory(
    site_server, hostile: HostileServer, any_db: str
) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    server = await site_server({"/": Page(links=[hostile.url("big-html")])})
    data = await crawl(any_db, [server.url("/")], scope="domain")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert [b.url for b in data.broken] == [hostile.url("big-html")]
    assert grown_mb < 80, f"peak RSS grew {grown_mb:.0f} MB for a capped 100 MB page"


ODD_BYTES = ["00", "ff"]  # a NUL; a byte that is not UTF-8 (PostgreSQL refused both in a text)


async def test_bytes_no_store_keeps_in_a_text_are_recorded_as_replacement_characters(
    site_server, hostile: HostileServer, any_db: str
) -> None:
    """A NUL or a byte that is not UTF-8 from a server, or %00 in a fragment.

    Before, one such answer stopped a PostgreSQL crawl at every resume, and a
    SQLite crawl kept bytes its report could not read back.
    """
    odd = {
        (where, byte): hostile.url(f"odd-bytes?where={where}&byte={byte}")
        for where in ("reason", "type", "validators")
        for byte in ODD_BYTES
    }
    target = '<!DOCTYPE html><html><body><p id="x">x</p></body></html>'
    server = await site_server(
        {
            "/": Page(links=[*odd.values(), "/target#x%00y", "/target#x"]),
            "/target": Page(body=target),
        }
    )
    data = await crawl(any_db, [server.url("/")], scope="domain", include_fragments=True)
    assert data.crawl.state == "finished"
    broken = {b.url: b.error for b in data.broken}
    assert broken == {
        odd["reason", "00"]: "404 Not\ufffdFound",
        odd["reason", "ff"]: "404 Not\ufffdFound",
        # %00 stays escaped: no id holds a NUL, so the link is broken (cut at the
        # NUL, it read as "#x", which the page has).
        server.url("/target#x%00y"): "fragment #x%00y not found",
    }


async def test_a_location_with_bytes_not_utf8_is_followed_with_the_bytes_percent_encoded(
    site_server, hostile: HostileServer, any_db: str
) -> None:
    """``Location: /odd-target/caf\\xffe`` is asked as ``/odd-target/caf%FFe``, as browsers do.

    Before, the byte was read as U+FFFD and the crawler asked for
    ``caf%EF%BF%BDe``, a page the server does not have: a working redirect
    reported broken.
    """
    odd = [hostile.url(f"odd-bytes?where=location&byte={byte}") for byte in ("ff", "e9")]
    server = await site_server({"/": Page(links=odd)})
    data = await crawl(any_db, [server.url("/")], scope="domain")
    assert data.crawl.state == "finished"
    assert data.broken == []
    assert hostile.count("/odd-target/caf%FFe") == 1
    assert hostile.count("/odd-target/caf%E9e") == 1
    assert data.summary.redirected == 2


@pytest.mark.parametrize("bomb", ["brotli-bomb", "gzip-bomb"])
async def test_a_compression_bomb_costs_bounded_memory(
    site_server, hostile: HostileServer, tmp_path: Path, bomb: str
) -> None:
    """A few KB that inflate to 512 MB are read a step at a time, up to --max-body-bytes.

    brotli inflated a whole chunk in one call before: a 3 KB answer took gigabytes.
    """
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    server = await site_server({"/": Page(links=[hostile.url(bomb)])})
    data = await crawl(tmp_path / "c.db", [server.url("/")], scope="domain")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert [(b.url, b.error) for b in data.broken] == [
        (hostile.url(bomb), "larger than --max-body-bytes (10485760 bytes read)")
    ]
    assert grown_mb < 80, f"peak RSS grew {grown_mb:.0f} MB for a capped {bomb}"
