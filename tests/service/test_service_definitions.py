"""Crawl definitions in the service, in process with a clock the test moves, on both backends:
the API and its validation, schedules (one run at a time, catch-up once), re-crawls of the
previous run, diffs, signed webhooks with retries and the private-address guard, retention."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler.engine import runner
from crawler.service.definition_schemas import WebhookBody
from crawler.service.webhooks import SIGNATURE_HEADER

from kit import pgkit
from kit.definitionkit import Harness, Receiver, backend_db, config, harness
from kit.serve_site import ThreadedSite
from kit.service_sites import small_site
from kit.sitekit import Page, wait_until

SECRET = "webhook-secret-0123456789"  # noqa: S105 - a test secret
HOUR = 3600.0


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> Iterator[str | None]:
    db, drop = backend_db(request.param)
    try:
        yield db
    finally:
        if drop is not None:
            pgkit.drop_database(drop)


@pytest.fixture
def site() -> Iterator[ThreadedSite]:
    with ThreadedSite(small_site()) as server:
        yield server


@pytest.fixture
async def svc(tmp_path: Path, backend: str | None) -> AsyncIterator[Harness]:
    async for h in harness(config(tmp_path / "data", backend)):
        yield h


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    target = Receiver()
    server = TestServer(target.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield target, str(server.make_url("/hook"))
    finally:
        await server.close()


def definition(site: ThreadedSite, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "nightly",
        "seeds": [site.url("/")],
        "settings": {"max_retries": 0},
        "schedule": {"every": "1h"},
    }
    body.update(extra)
    return body


# -- the API ----------------------------------------------------------------------------


async def test_definitions_are_created_listed_replaced_and_deleted(
    svc: Harness, site: ThreadedSite
) -> None:
    created = await svc.ok("POST", "/definitions", definition(site, keep_runs=3), status=201)
    did = created["id"]
    assert created["keep_runs"] == 3
    assert created["schedule"] == {"every": "1h", "timezone": "UTC"}
    assert created["active_run"] is not None  # an interval runs at once
    listed = await svc.ok("GET", "/definitions")
    assert [d["id"] for d in listed["definitions"]] == [did]
    assert created["dashboard_url"] == f"/#/definitions/{did}"
    dashboard = await svc.client.get(created["dashboard_url"].split("#")[0])
    assert dashboard.status == 200
    assert "text/html" in dashboard.content_type
    await svc.wait_run(created["active_run"])
    body = definition(site, schedule={"cron": "0 3 * * *", "timezone": "Europe/Paris"})
    body["webhook"] = {"url": "http://127.0.0.1:9/hook", "secret": SECRET}
    replaced = await svc.ok("PUT", f"/definitions/{did}", body)
    assert replaced["schedule"]["cron"] == "0 3 * * *"
    assert replaced["webhook"] == {"url": "http://127.0.0.1:9/hook", "has_secret": True}
    assert SECRET not in json.dumps(replaced)
    assert replaced["next_run_at"] == "2027-01-16T02:00:00Z"  # 03:00 in Paris, winter
    runs = await svc.ok("GET", f"/definitions/{did}/runs")
    assert len(runs["runs"]) == 1
    await svc.ok("DELETE", f"/definitions/{did}", status=204)
    assert (await svc.call("GET", f"/definitions/{did}"))[0] == 404
    assert (await svc.call("GET", f"/crawls/{runs['runs'][0]['id']}"))[0] == 404


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schedule": {"every": "5x"}}, "schedule.every"),
        ({"schedule": {"every": "10s"}}, "schedule.every"),
        ({"schedule": {"cron": "61 * * * *"}}, "schedule.cron"),
        ({"schedule": {"cron": "0 3 * * *", "timezone": "Mars/Olympus"}}, "schedule.timezone"),
        ({"schedule": {"every": "1h", "cron": "0 3 * * *"}}, "schedule"),
        ({"schedule": {}}, "schedule"),
        ({"keep_runs": "3"}, "keep_runs"),
        ({"keep_runs": 0}, "keep_runs"),
        ({"webhook": {"url": "ftp://127.0.0.1/", "secret": SECRET}}, "webhook.url"),
        ({"webhook": {"url": "http://127.0.0.1/", "secret": "short"}}, "webhook.secret"),
        ({"settings": {"max_depth": "2"}}, "settings.max_depth"),
        ({"settings": {"cookie_jar": "/etc/passwd"}}, "settings.cookie_jar"),
        ({"colour": "blue"}, "colour"),
        ({"seeds": []}, "seeds"),
    ],
)
async def test_invalid_definitions_are_422_naming_the_field(
    tmp_path: Path, site: ThreadedSite, change: dict[str, Any], field: str
) -> None:
    async for svc in harness(config(tmp_path / "data", None)):
        status, body = await svc.call("POST", "/definitions", {**definition(site), **change})
        assert status == 422, body
        assert body["field"] == field, body
        assert not svc.service.scheduler.definitions()


async def test_writes_need_the_token_and_reads_answer_404_for_unknown_ids(
    tmp_path: Path, site: ThreadedSite
) -> None:
    async for svc in harness(config(tmp_path / "data", None)):
        status, _ = await svc.call("POST", "/definitions", definition(site), auth=False)
        assert status == 401
        for path in ("/definitions/7", "/definitions/7/runs", "/definitions/x/diff"):
            assert (await svc.call("GET", path))[0] == 404


# -- schedules ----------------------------------------------------------------------------


async def test_one_run_at_a_time_and_one_catch_up_after_downtime(
    svc: Harness, site: ThreadedSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous: list[int | None] = []
    real_start = runner.start

    def recording_start(*args: Any, **kwargs: Any) -> runner.CrawlJob:
        previous.append(kwargs.get("previous_crawl_id"))
        return real_start(*args, **kwargs)

    monkeypatch.setattr(runner, "start", recording_start)
    created = await svc.ok("POST", "/definitions", definition(site), status=201)
    did, first = created["id"], created["active_run"]
    await svc.wait_run(first)
    assert await svc.tick() == []  # not due before the hour
    # The service was down for ten slots: one run catches up, not ten.
    svc.clock.advance(10 * HOUR)
    second = await svc.tick()
    assert len(second) == 1
    assert await svc.tick() == []
    await svc.wait_run(second[0])
    runs = (await svc.ok("GET", f"/definitions/{did}/runs"))["runs"]
    assert [r["id"] for r in runs] == [second[0], first]
    view = await svc.ok("GET", f"/definitions/{did}")
    assert view["next_run_at"] == _iso(svc.clock.now + HOUR)
    # A re-crawl of the previous finished run, on both backends (on SQLite the runs
    # of a definition share its file).
    assert previous[-1] == first


async def test_a_due_definition_waits_for_its_running_run(svc: Harness, site: ThreadedSite) -> None:
    site.server.site["/"] = Page(links=["/a", "/b"], delay_s=1.0)
    created = await svc.ok("POST", "/definitions", definition(site), status=201)
    first = created["active_run"]
    svc.clock.advance(5 * HOUR)
    assert await svc.tick() == []  # the first run is still running
    assert svc.service.manager.get(first).state in ("queued", "running")
    await svc.wait_run(first)  # its end starts the one run that was due
    runs = svc.service.manager.runs_of(created["id"])
    assert len(runs) == 2
    await svc.wait_run(runs[0].id)


async def test_a_failed_run_is_not_resumed_while_another_run_of_its_definition_is_active(
    svc: Harness, site: ThreadedSite
) -> None:
    created = await svc.ok("POST", "/definitions", definition(site), status=201)
    did, first = created["id"], created["active_run"]
    await svc.wait_run(first)
    manager = svc.service.manager
    failed = manager.get(first)
    failed.state, failed.error = "failed", "as if it had failed"
    await manager.store.update(failed)
    svc.clock.advance(HOUR)
    (second,) = await svc.tick()
    await svc.ok("POST", f"/crawls/{second}/pause")  # active until resumed or cancelled
    status, body = await svc.call("POST", f"/crawls/{first}/resume")
    assert status == 409, body
    assert f"run {second}" in body["error"]
    await svc.ok("POST", f"/crawls/{second}/cancel")
    await svc.wait_run(second, "cancelled")
    await svc.ok("POST", f"/crawls/{first}/resume")
    assert [e.id for e in manager.runs_of(did) if e.state in ("queued", "running")] == [first]
    await svc.wait_run(first)


def _iso(timestamp: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).isoformat().replace("+00:00", "Z")


# -- diffs and webhooks -------------------------------------------------------------------


async def _two_runs(svc: Harness, site: ThreadedSite, **extra: Any) -> tuple[int, int, int]:
    """A definition's two runs, between which /gone was fixed and /new-missing broke."""
    created = await svc.ok("POST", "/definitions", definition(site, **extra), status=201)
    did, first = created["id"], created["active_run"]
    await svc.wait_run(first)
    site.server.site["/a"] = Page(links=["/b", "/new-missing", "/old"])
    svc.clock.advance(HOUR)
    (second,) = await svc.tick()
    await svc.wait_run(second)
    return did, first, second


async def test_the_diff_of_the_last_two_runs_and_of_any_two(
    svc: Harness, site: ThreadedSite
) -> None:
    did, first, second = await _two_runs(svc, site)
    diff = await svc.ok("GET", f"/definitions/{did}/diff")
    assert (diff["from_crawl"], diff["to_crawl"]) == (first, second)
    assert diff["counts"]["new_broken"] == 1
    assert diff["counts"]["fixed"] == 1
    assert diff["counts"]["still_broken"] == 1
    assert [link["url"] for link in diff["new_broken"]] == [site.url("/new-missing")]
    assert diff["new_broken"][0]["sources"] == [site.url("/a")]
    back = await svc.ok("GET", f"/definitions/{did}/diff?from={second}&to={first}")
    assert [link["url"] for link in back["new_broken"]] == [site.url("/gone")]
    assert (await svc.call("GET", f"/definitions/{did}/diff?from=999"))[0] == 404


async def test_a_run_with_new_broken_links_calls_the_signed_webhook(
    svc: Harness, site: ThreadedSite, receiver: tuple[Receiver, str]
) -> None:
    target, url = receiver
    webhook = {"url": url, "secret": SECRET}
    did, first, second = await _two_runs(svc, site, webhook=webhook)
    await wait_until(lambda: target.got, timeout=10, message="the webhook was called")
    headers, body = target.got[0]
    expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == f"sha256={expected}"
    document = json.loads(body)
    assert document["definition_id"] == did
    assert document["crawl_id"] == second
    assert document["previous_crawl_id"] == first
    assert document["counts"]["new_broken"] == 1
    assert [link["url"] for link in document["new_broken"]] == [site.url("/new-missing")]
    assert document["report_url"] == f"/crawls/{second}/report"
    deliveries = await _deliveries(svc, did, "delivered")
    assert deliveries[0]["attempts"] == 1
    assert deliveries[0]["last_status"] == 200
    # A run without new broken links calls nobody.
    svc.clock.advance(HOUR)
    (third,) = await svc.tick()
    await svc.wait_run(third)
    assert len(target.got) == 1


async def _deliveries(
    svc: Harness, did: int, state: str, attempts: int | None = None
) -> list[dict[str, Any]]:
    """The deliveries once the first is in ``state`` (with that many ``attempts`` recorded)."""

    async def reached() -> list[dict[str, Any]] | None:
        rows: list[dict[str, Any]] = (await svc.ok("GET", f"/definitions/{did}/deliveries"))[
            "deliveries"
        ]
        if not rows or rows[0]["state"] != state:
            return None
        return rows if attempts is None or rows[0]["attempts"] == attempts else None

    result: list[dict[str, Any]] = await wait_until(reached, timeout=10, message=state)
    return result


async def test_webhooks_are_retried_with_backoff_then_given_up(
    svc: Harness, site: ThreadedSite, receiver: tuple[Receiver, str]
) -> None:
    target, url = receiver
    target.statuses = [500, 503, 500, 500, 500, 500]
    webhooks = svc.service.scheduler.webhooks
    webhooks.policy.first_retry_s = 10
    webhooks.policy.give_up_after_s = 100
    did, _, _ = await _two_runs(svc, site, webhook={"url": url, "secret": SECRET})
    await wait_until(lambda: len(target.got) == 1, timeout=10)
    for expected_wait in (10, 20, 40):  # doubling
        # The receiver counts a call before the service records its answer.
        pending = (await _deliveries(svc, did, "pending", attempts=len(target.got)))[0]
        assert pending["last_error"] in ("HTTP 500", "HTTP 503")
        svc.clock.advance(expected_wait - 1)
        await webhooks.deliver_due()
        assert len(target.got) == pending["attempts"]  # not due yet
        svc.clock.advance(1)
        await webhooks.deliver_due()
        assert len(target.got) == pending["attempts"] + 1
    failed = (await _deliveries(svc, did, "failed"))[0]
    assert failed["attempts"] == 4  # the next wait (80 s) would pass the 100 s bound
    assert failed["last_error"] == "HTTP 500"


async def test_a_webhook_to_a_private_address_is_refused_and_never_called(
    tmp_path: Path, site: ThreadedSite
) -> None:
    """The service guards private addresses; the site is allowed by network, the
    webhook's loopback address (127.0.0.2) is not: refused when the definition is
    created, as a seed would be; and refused when called, for a definition created
    while its operator allowed that address (it resolves and is checked each time)."""
    target = Receiver()
    server = TestServer(target.app(), host="127.0.0.2")
    await server.start_server()
    data = tmp_path / "data"
    hook = {"url": str(server.make_url("/hook")), "secret": SECRET}
    try:
        guarded = config(data, None, allow_private=False, allow_networks=["127.0.0.1/32"])
        async for svc in harness(guarded):
            status, body = await svc.call("POST", "/definitions", definition(site, webhook=hook))
            assert status == 422, body
            assert body["field"] == "webhook.url"
        wider = config(
            data, None, allow_private=False, allow_networks=["127.0.0.1/32", "127.0.0.2/32"]
        )
        async for svc in harness(wider):
            created = await svc.ok("POST", "/definitions", definition(site, webhook=hook), 201)
            did = created["id"]
            await svc.wait_run(created["active_run"])
        site.server.site["/a"] = Page(links=["/b", "/new-missing", "/old"])
        async for svc in harness(guarded):
            svc.clock.advance(HOUR)
            (second,) = await svc.tick()
            await svc.wait_run(second)
            failed = (await _deliveries(svc, did, "failed"))[0]
            assert "private-address guard" in failed["last_error"]
            assert failed["attempts"] == 1
    finally:
        await server.close()
    assert target.got == []


# -- retention --------------------------------------------------------------------------


@dataclasses.dataclass
class EndlessChain:
    """A loopback site with no end: /s/N links /s/N+1. A crawl of it runs until the test
    stops it, however loaded the machine is; ``served`` counts its pages."""

    served: int = 0

    async def handle(self, request: web.Request) -> web.Response:
        number = int(request.match_info["n"])
        self.served += 1
        await asyncio.sleep(0.02)  # the server's pace, not a wait of the test's
        html = f'<html><body><a href="/s/{number + 1}">next</a></body></html>'
        return web.Response(text=html, content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/s/{n:[0-9]+}", self.handle)
        return app


@pytest.fixture
async def chain() -> AsyncIterator[tuple[EndlessChain, str]]:
    site = EndlessChain()
    server = TestServer(site.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield site, str(server.make_url("/s/0"))
    finally:
        await server.close()


def _small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several delete batches per crawl on either backend."""
    from crawler.store.postgres import service_store
    from crawler.store.sqlite import crawl_delete

    monkeypatch.setattr(service_store, "DELETE_BATCH", 2)
    monkeypatch.setattr(crawl_delete, "DELETE_BATCH", 2)


async def test_retention_deletes_old_runs_while_another_crawl_runs(
    svc: Harness,
    site: ThreadedSite,
    chain: tuple[EndlessChain, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _small_batches(monkeypatch)
    endless, start = chain
    other = await svc.ok("POST", "/crawls", {"seeds": [start]}, 201)
    created = await svc.ok("POST", "/definitions", definition(site, keep_runs=2), status=201)
    did = created["id"]
    ids = [created["active_run"]]
    await svc.wait_run(ids[0])
    for _ in range(2):
        svc.clock.advance(HOUR)
        (run,) = await svc.tick()
        ids.append(run)
        await svc.wait_run(run)
    manager = svc.service.manager
    assert [e.id for e in manager.runs_of(did)] == [ids[2], ids[1]]
    assert await manager.store.snapshot(ids[0]) is None  # its data is gone
    assert (await svc.call("GET", f"/crawls/{ids[0]}"))[0] == 404
    served = endless.served
    await wait_until(lambda: endless.served >= served + 3, timeout=30, message="still crawling")
    assert manager.get(other["id"]).state == "running"
    await svc.ok("POST", f"/crawls/{other['id']}/cancel")
    await svc.wait_run(other["id"], "cancelled")


async def test_retention_deletes_old_runs_while_a_run_of_the_same_definition_crawls(
    svc: Harness,
    site: ThreadedSite,
    chain: tuple[EndlessChain, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On SQLite the runs of a definition share one file: the old runs' rows are deleted
    from it, in short batches, while the newest run writes to it."""
    _small_batches(monkeypatch)
    endless, start = chain
    created = await svc.ok("POST", "/definitions", definition(site, keep_runs=5), status=201)
    did = created["id"]
    ids = [created["active_run"]]
    await svc.wait_run(ids[0])
    for _ in range(2):
        svc.clock.advance(HOUR)
        (run,) = await svc.tick()
        ids.append(run)
        await svc.wait_run(run)
    body = definition(site, keep_runs=1, seeds=[site.url("/"), start])  # the same schedule
    await svc.ok("PUT", f"/definitions/{did}", body)
    svc.clock.advance(HOUR)
    (crawling,) = await svc.tick()
    await wait_until(lambda: endless.served >= 3, timeout=30, message="the run crawls")
    # The run crawling re-crawls from ids[2]: kept. The two before go.
    assert await svc.service.scheduler.retain(did) == [ids[1], ids[0]]
    served = endless.served
    await wait_until(lambda: endless.served >= served + 3, timeout=30, message="still crawling")
    manager = svc.service.manager
    assert manager.get(crawling).state == "running"
    assert [e.id for e in manager.runs_of(did)] == [crawling, ids[2]]
    for gone in ids[:2]:
        assert await manager.store.snapshot(gone) is None
    kept = await svc.ok("GET", f"/crawls/{ids[2]}/report")
    assert kept["summary"]["pages"] == 3
    await svc.ok("POST", f"/crawls/{crawling}/cancel")
    await svc.wait_run(crawling, "cancelled")
    progress = await manager.store.snapshot(crawling)
    assert progress is not None
    assert progress.counts.done >= served + 3


# -- webhook links, and deliveries bounded by the runs kept -----------------------------


async def test_webhook_links_are_absolute_under_the_public_url(
    tmp_path: Path, site: ThreadedSite, receiver: tuple[Receiver, str]
) -> None:
    target, url = receiver
    # Only written into the body: nothing connects to this address.
    cfg = config(tmp_path / "data", None, public_url="https://crawler.example.org/links/")
    async for svc in harness(cfg):
        did, first, second = await _two_runs(svc, site, webhook={"url": url, "secret": SECRET})
        await wait_until(lambda: target.got, timeout=10, message="the webhook was called")
    document = json.loads(target.got[0][1])
    WebhookBody.model_validate(document)  # the body the OpenAPI document describes
    assert document["report_url"] == f"https://crawler.example.org/links/crawls/{second}/report"
    assert document["diff_url"] == (
        f"https://crawler.example.org/links/definitions/{did}/diff?from={first}&to={second}"
    )
    assert document["dashboard_url"] == f"https://crawler.example.org/links/#/definitions/{did}"
    assert "note" not in document


async def test_without_a_public_url_the_body_says_its_links_are_relative(
    svc: Harness, site: ThreadedSite, receiver: tuple[Receiver, str]
) -> None:
    target, url = receiver
    await _two_runs(svc, site, webhook={"url": url, "secret": SECRET})
    await wait_until(lambda: target.got, timeout=10, message="the webhook was called")
    document = json.loads(target.got[0][1])
    WebhookBody.model_validate(document)
    assert document["report_url"].startswith("/crawls/")
    assert "CRAWLER_PUBLIC_URL" in document["note"]


@pytest.mark.parametrize(
    "bad", ["ftp://crawler.example.org", "crawler.example.org", "https://h/?q=1", "https://u:p@h/"]
)
def test_a_public_url_must_be_an_http_url_without_query_or_credentials(bad: str) -> None:
    from crawler.errors import UsageError
    from crawler.service.config import resolve

    with pytest.raises(UsageError, match="--public-url"):
        resolve({"public_url": bad}, environ={})
    assert resolve({}, {"CRAWLER_PUBLIC_URL": "http://127.0.0.1:8080/"}).public_url == (
        "http://127.0.0.1:8080"
    )


async def test_deliveries_are_deleted_with_the_runs_retention_retires(
    svc: Harness, site: ThreadedSite, receiver: tuple[Receiver, str]
) -> None:
    """Each run breaks a new link, so each calls the webhook; keep_runs=2 keeps two runs
    and their two deliveries, however many runs there were."""
    target, url = receiver
    hook = {"url": url, "secret": SECRET}
    created = await svc.ok(
        "POST", "/definitions", definition(site, keep_runs=2, webhook=hook), status=201
    )
    did = created["id"]
    runs = [created["active_run"]]
    await svc.wait_run(runs[0])
    for i in range(4):
        site.server.site["/a"] = Page(links=["/b", f"/missing-{i}"])
        svc.clock.advance(HOUR)
        (run,) = await svc.tick()
        runs.append(run)
        await svc.wait_run(run)
        await _deliveries(svc, did, "delivered")  # the newest first
    rows = (await svc.ok("GET", f"/definitions/{did}/deliveries"))["deliveries"]
    assert [r["crawl_id"] for r in rows] == [runs[4], runs[3]]
    assert [e.id for e in svc.service.manager.runs_of(did)] == [runs[4], runs[3]]
    assert len(await svc.service.manager.store.deliveries()) == 2
    assert len(target.got) == 4
    # Deleting a run through the API deletes its delivery too.
    await svc.ok("DELETE", f"/crawls/{runs[3]}", status=204)
    rows = (await svc.ok("GET", f"/definitions/{did}/deliveries"))["deliveries"]
    assert [r["crawl_id"] for r in rows] == [runs[4]]


async def test_retention_keeps_a_run_while_its_delivery_is_tried(
    svc: Harness, site: ThreadedSite, receiver: tuple[Receiver, str]
) -> None:
    target, url = receiver
    target.statuses = [500]  # the first call fails: retried after the next run
    webhooks = svc.service.scheduler.webhooks
    webhooks.policy.first_retry_s = webhooks.policy.max_retry_s = 2 * HOUR
    webhooks.policy.give_up_after_s = 4 * HOUR
    hook = {"url": url, "secret": SECRET}
    did, _, second = await _two_runs(svc, site, webhook=hook, keep_runs=1)
    await _deliveries(svc, did, "pending", attempts=1)
    svc.clock.advance(HOUR)
    (third,) = await svc.tick()
    await svc.wait_run(third)
    # keep_runs=1, yet the second run stays: its notification is still being tried.
    assert [e.id for e in svc.service.manager.runs_of(did)] == [third, second]
    svc.clock.advance(HOUR)
    await webhooks.deliver_due()
    await _deliveries(svc, did, "delivered")
    assert len(target.got) == 2
    assert await svc.service.scheduler.retain(did) == [second]
    assert await svc.service.manager.store.deliveries() == []
