"""A definition's runs are re-crawls of one another, on both backends (issue 17's seam).

On SQLite the runs of a definition share one file (``DATA/definitions/<id>.db``), on
PostgreSQL one database: so the second run asks the site conditionally (the loopback
server counts its 304s), the diff in the API is read from the store
(``ServiceStore.load_diff``, the same code as ``crawler diff``) and equals the planted
change, the webhook's counts are that diff's, and retention deletes the oldest run
from the shared storage while the next run writes to it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from crawler.store.postgres import service_store
from crawler.store.sqlite import crawl_delete

from kit import pgkit
from kit.conditional_site import ConditionalSite
from kit.definitionkit import Harness, Receiver, backend_db, config, harness
from kit.serve_site import ThreadedSite
from kit.service_sites import small_site
from kit.sitekit import Page, page_html, wait_until

SECRET = "webhook-secret-0123456789"  # noqa: S105 - a test secret
HOUR = 3600.0
UNCHANGED = ("/", "/b", "/b1")


def site_pages() -> dict[str, str]:
    return {
        "/": page_html(["/a", "/b", "/gone"]),
        "/a": page_html(["/b"]),
        "/b": page_html(["/b1"]),
        "/b1": page_html(),
    }


def change(site: ConditionalSite) -> None:
    """/a links to a new page /c and to a missing /new-missing; nothing else changes."""
    site.set_page("/a", page_html(["/b", "/c", "/new-missing"]))
    site.set_page("/c", page_html())


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> Iterator[str | None]:
    db, drop = backend_db(request.param)
    try:
        yield db
    finally:
        if drop is not None:
            pgkit.drop_database(drop)


@pytest.fixture
async def svc(tmp_path: Path, backend: str | None) -> AsyncIterator[Harness]:
    async for h in harness(config(tmp_path / "data", backend)):
        yield h


@pytest.fixture
def site() -> Iterator[ThreadedSite]:
    """ThreadedSite runs its own loop: entered outside the test's."""
    with ThreadedSite(small_site()) as server:
        yield server


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    target = Receiver()
    server = TestServer(target.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield target, str(server.make_url("/hook"))
    finally:
        await server.close()


def definition(seed: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "nightly",
        "seeds": [seed],
        "settings": {"max_retries": 0},
        "schedule": {"every": "1h"},
    }
    body.update(extra)
    return body


async def test_the_second_run_is_a_recrawl_and_its_diff_and_webhook_are_the_planted_change(
    svc: Harness, receiver: tuple[Receiver, str]
) -> None:
    target, hook = receiver
    with ConditionalSite(site_pages()) as site:
        body = definition(site.url("/"), webhook={"url": hook, "secret": SECRET})
        created = await svc.ok("POST", "/definitions", body, status=201)
        did, first = created["id"], created["active_run"]
        await svc.wait_run(first)
        assert sum(site.not_modified.values()) == 0
        change(site)
        site.reset_counts()
        svc.clock.advance(HOUR)
        (second,) = await svc.tick()
        await svc.wait_run(second)

        for path in UNCHANGED:  # asked conditionally, answered 304, not downloaded
            assert (site.conditional[path], site.not_modified[path], site.full[path]) == (1, 1, 0)
        assert site.full["/a"] == 1  # changed: downloaded
        assert (site.full["/c"], site.conditional["/c"]) == (1, 0)  # new: unknown before

    diff = await svc.ok("GET", f"/definitions/{did}/diff")
    assert (diff["from_crawl"], diff["to_crawl"]) == (first, second)
    expected_counts = {
        "new_broken": 1,
        "fixed": 0,
        "still_broken": 1,
        "pages_added": 1,
        "pages_removed": 0,
    }
    assert diff["counts"] == expected_counts
    assert [(b["url"], b["sources"]) for b in diff["new_broken"]] == [
        (site.url("/new-missing"), [site.url("/a")])
    ]
    assert [(b["url"], b["sources"]) for b in diff["still_broken"]] == [
        (site.url("/gone"), [site.url("/")])
    ]
    assert diff["pages_added"] == [site.url("/c")]
    assert diff["fixed"] == []
    assert diff["pages_removed"] == []

    await wait_until(lambda: target.got, timeout=10, message="the webhook was called")
    document = json.loads(target.got[0][1])
    assert (document["crawl_id"], document["previous_crawl_id"]) == (second, first)
    assert document["counts"] == expected_counts
    assert [link["url"] for link in document["new_broken"]] == [site.url("/new-missing")]

    await svc.ok("DELETE", f"/definitions/{did}", status=204)
    for run in (first, second):
        assert (await svc.call("GET", f"/crawls/{run}"))[0] == 404
    assert not list((svc.service.config.data_dir / "definitions").glob("*.db*"))


async def test_retention_deletes_the_oldest_run_while_the_next_one_writes(
    svc: Harness, site: ThreadedSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite the deleted run and the running one are in the same file."""
    monkeypatch.setattr(crawl_delete, "DELETE_BATCH", 2)  # several batches per run
    monkeypatch.setattr(service_store, "DELETE_BATCH", 2)
    batches: list[int] = []
    real_delete = crawl_delete.delete_crawl

    def counted(path: Path, crawl_id: int, batch: int | None = None) -> int:
        batches.append(real_delete(path, crawl_id, batch))
        return batches[-1]

    monkeypatch.setattr(crawl_delete, "delete_crawl", counted)
    created = await svc.ok("POST", "/definitions", definition(site.url("/"), keep_runs=2), 201)
    did = created["id"]
    ids = [created["active_run"]]
    await svc.wait_run(ids[0])
    svc.clock.advance(HOUR)
    ids.extend(await svc.tick())
    await svc.wait_run(ids[1])
    # The third run crawls a slow chain of pages: it is running while the oldest goes.
    chain = {f"/s/{i}": Page(links=[f"/s/{i + 1}"], delay_s=0.2) for i in range(10)}
    site.server.site.update(chain)
    site.server.site["/b"] = Page(links=["/s/0"])
    svc.clock.advance(HOUR)
    ids.extend(await svc.tick())
    manager, store = svc.service.manager, svc.service.manager.store

    async def writing() -> bool:
        snap = await store.snapshot(ids[2])
        return snap is not None and snap.counts.done > 3

    await wait_until(writing, timeout=30, message="the third run is writing")
    deleted = await svc.service.scheduler.retain(did)
    assert deleted == [ids[0]]
    if svc.service.config.db is None:  # SQLite: out of the shared file, in batches
        assert len(batches) == 1
        assert batches[0] > 1
    assert manager.get(ids[2]).state == "running"  # deleted while the run writes
    assert await store.snapshot(ids[0]) is None  # its data is gone
    assert (await svc.call("GET", f"/crawls/{ids[0]}"))[0] == 404
    await svc.wait_run(ids[2])

    report = await svc.ok("GET", f"/crawls/{ids[2]}/report")
    assert report["summary"]["pages"] >= 10  # the chain, crawled in full
    assert [r["id"] for r in (await svc.ok("GET", f"/definitions/{did}/runs"))["runs"]] == [
        ids[2],
        ids[1],
    ]
    diff = await svc.ok("GET", f"/definitions/{did}/diff")
    assert (diff["from_crawl"], diff["to_crawl"]) == (ids[1], ids[2])
    assert diff["counts"]["pages_added"] == 10


async def test_retention_keeps_the_run_an_active_run_recrawls_from(
    svc: Harness, site: ThreadedSite
) -> None:
    created = await svc.ok("POST", "/definitions", definition(site.url("/"), keep_runs=1), 201)
    did = created["id"]
    ids = [created["active_run"]]
    await svc.wait_run(ids[0])
    svc.clock.advance(HOUR)
    ids.extend(await svc.tick())
    await svc.wait_run(ids[1])  # run 1 retired after it
    site.server.site["/b"] = Page(links=["/s/0"])
    site.server.site.update({f"/s/{i}": Page(links=[f"/s/{i + 1}"], delay_s=0.2) for i in range(5)})
    svc.clock.advance(HOUR)
    ids.extend(await svc.tick())
    await wait_until(
        lambda: svc.service.manager.get(ids[2]).state == "running", timeout=10, message="running"
    )
    assert await svc.service.scheduler.retain(did) == []  # run 2 is what run 3 reads
    await svc.wait_run(ids[2])  # then run 2 goes, after run 3
    runs = (await svc.ok("GET", f"/definitions/{did}/runs"))["runs"]
    assert [r["id"] for r in runs] == [ids[2]]


async def test_runs_of_a_local_directory_diff_by_file(tmp_path: Path, backend: str | None) -> None:
    """A definition of a repository under --local-root: its diff names files, as its
    report and the CLI's ``crawler diff`` do, on both backends."""
    root = tmp_path / "sites"
    repo = root / "repo"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# Repo\n\n[guide](guide.md)\n")
    (repo / "guide.md").write_text("## Guide\n")
    cfg = config(tmp_path / "data", backend, local_roots=[root])
    async for svc in harness(cfg):
        created = await svc.ok("POST", "/definitions", definition(str(repo)), status=201)
        did, first = created["id"], created["active_run"]
        await svc.wait_run(first)
        (repo / "guide.md").write_text("## Guide\n\n[moved](moved.md)\n")
        svc.clock.advance(HOUR)
        (second,) = await svc.tick()
        await svc.wait_run(second)
        diff = await svc.ok("GET", f"/definitions/{did}/diff")
    assert [(b["url"], b["sources"]) for b in diff["new_broken"]] == [("moved.md", ["guide.md"])]
    assert "local.invalid" not in json.dumps(diff)
