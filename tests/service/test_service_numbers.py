"""The API's numbers are the report's: one definition of a page and of a broken link.

A site with every kind of failure (404 and 500 pages, a redirect to a 404, a
redirect loop, a refused connection, a timeout, a missing #fragment, a 404
asset, an excluded and a skipped link) is crawled; the crawl's ``progress``
must say what the report's ``summary`` says. ``test_service_postgres``
runs it again on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kit.serve_site import ThreadedSite
from kit.servicekit import ServiceProcess
from kit.sitekit import Page, Site

CLOSED_PORT_URL = "http://127.0.0.1:9/"  # discard: nothing listens on loopback's port 9


def failing_site() -> Site:
    return {
        "/": Page(
            links=[
                "/a",
                "/missing",
                "/error",
                "/old",
                "/loop1",
                "/a#nowhere",
                "/slow",
                "mailto:someone@example.invalid",
                "/private/x",
                CLOSED_PORT_URL,
            ],
            assets=["/img.png"],
        ),
        "/a": Page(links=["/", "/missing"]),
        "/missing": Page(status=404, links=["/a"]),  # an HTML 404 page: not a page crawled
        "/error": Page(status=500),
        "/old": Page(redirect_to="/gone"),
        "/gone": Page(status=404),
        "/loop1": Page(redirect_to="/loop2"),
        "/loop2": Page(redirect_to="/loop1"),
        "/slow": Page(delay_s=3.0),
    }


@pytest.fixture(scope="module")
def failing() -> Iterator[ThreadedSite]:
    with ThreadedSite(failing_site()) as server:
        yield server


def test_progress_counts_pages_and_broken_links_as_the_report_does(
    service: ServiceProcess, failing: ThreadedSite
) -> None:
    crawl_id = service.create(
        [failing.url("/")],
        max_retries=0,
        timeout_s=1.0,
        include_fragments=True,
        exclude=["/private/"],
    )["id"]
    crawl = service.wait_state(crawl_id, "finished", timeout=60)
    summary = service.get(f"/crawls/{crawl_id}/report?format=json").json()["summary"]
    progress = crawl["progress"]
    assert summary["pages"] == 2  # "/" and "/a"; the HTML 404 page is not a page crawled
    assert summary["broken"] >= 7
    assert summary["skipped"] >= 1
    assert summary["excluded"] >= 1
    assert (progress["pages"], progress["broken"]) == (summary["pages"], summary["broken"])
    listed = service.get("/crawls?limit=1000").json()["crawls"]
    (same,) = [c for c in listed if c["id"] == crawl_id]
    assert (same["progress"]["pages"], same["progress"]["broken"]) == (
        summary["pages"],
        summary["broken"],
    )
