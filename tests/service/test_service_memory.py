"""The service holds its memory under the limit it ships with, whatever it crawls.

A subprocess service with the shipped settings (``--memory-budget`` at its
default, the 512 MiB of docker-compose.yml and deploy/kubernetes; two crawls
running at once) crawls, twice at once, a site of 10 MB pages of text and of
10 MB pages with 350,000 links each (under the 10 MiB body cap the budget
gives, so they are parsed; 50,000 links followed: the budget's links-per-page
cap). The resident memory summed over the service's process tree (its parse
helpers included) is sampled all along and must stay under the limit;
``/healthz`` is asked all along and must answer (within the client's ordinary
timeout), as parsing is off the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawler.service.budget import SHIPPED_LIMIT_BYTES

from kit.proctree import PeakSampler
from kit.serve_site import ThreadedSite
from kit.servicekit import ServiceProcess
from kit.sitekit import Page, Site

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TEXT_PAGES = 12
TEXT_PAGE_BYTES = 10_000_000
LINK_PAGES = 2
LINKS_PER_PAGE = 350_000
LINK_PAGE_BYTES = 10_000_000  # under the 10 MiB body cap the shipped budget gives
CRAWL_TIMEOUT_S = 600.0


def huge_site() -> Site:
    """A home page linking to pages of 10 MB of text and of 10 MB with 350,000 links."""
    filler = b"<p>" + b"lorem ipsum dolor sit amet " * (TEXT_PAGE_BYTES // 27) + b"</p>"
    site: Site = {}
    text = [f"/text/{i}" for i in range(TEXT_PAGES)]
    dense = [f"/links/{i}" for i in range(LINK_PAGES)]
    site["/"] = Page(links=[*text, *dense])
    for i, path in enumerate(text):
        head = f'<html><body><a href="/">home</a><a href="/text/{(i + 1) % TEXT_PAGES}">next</a>'
        site[path] = Page(body=head.encode() + filler + b"</body></html>")
    for i, path in enumerate(dense):
        # Links to distinct URLs the crawl records but never requests (excluded).
        links = b"".join(b'<a href="/x/%d/%d">x</a>' % (i, n) for n in range(LINKS_PER_PAGE))
        body = b'<html><body><a href="/">home</a>' + links + b"</body></html>"
        site[path] = Page(body=body + b" " * max(LINK_PAGE_BYTES - len(body), 0))
    return site


@pytest.fixture(scope="module")
def huge() -> Iterator[ThreadedSite]:
    with ThreadedSite(huge_site()) as server:
        yield server


def test_two_crawls_of_huge_pages_stay_under_the_shipped_limit(
    tmp_path: Path, huge: ThreadedSite
) -> None:
    with ServiceProcess(tmp_path / "data", ["--allow-private"]) as service:
        assert service.process is not None
        health: list[int] = []
        done = threading.Event()

        def ask_health() -> None:
            while not done.wait(0.2):
                health.append(service.request("GET", "/healthz", auth=False).status)

        asker = threading.Thread(target=ask_health, name="healthz", daemon=True)
        with PeakSampler(service.process.pid) as sampler:
            asker.start()
            ids = [service.create([huge.url("/")], exclude=["/x/"])["id"] for _ in range(2)]
            crawls = [
                service.wait_state(crawl_id, "finished", "failed", timeout=CRAWL_TIMEOUT_S)
                for crawl_id in ids
            ]
            done.set()
            asker.join()
        for crawl in crawls:
            assert crawl["state"] == "finished", crawl
            assert crawl["progress"]["pages"] >= 1 + TEXT_PAGES + LINK_PAGES
        print(  # the measurement, for README's figure (pytest -s)
            f"peak RSS of the service's process tree: {sampler.peak / 2**20:.0f} MiB "
            f"(at most {sampler.most_processes} processes); /healthz answered {len(health)} times"
        )
        assert sampler.most_processes >= 2  # the parse helpers were counted
        assert sampler.peak < SHIPPED_LIMIT_BYTES
        assert health, "/healthz was never asked"
        assert set(health) == {200}
        events = [line["event"] for line in service.log_lines()]
        assert "links_capped" in events
