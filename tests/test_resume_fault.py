"""Fault injection: kill the crawler mid-crawl, resume it, and get the same report.

One generated site of 300 pages (a tree, cross links, broken links, redirects,
images, two external links on a second host) is crawled once without
interruption for the reference report. Then each run starts the same crawl,
waits until the server has seen a random number of requests, SIGKILLs the
process and runs ``crawler resume`` to completion. The resumed report must
equal the reference (timing aside), the database must pass
``PRAGMA integrity_check``, and only requests that were in flight at the kill
may be sent twice.

The default run makes 20 kills on each backend, SQLite and PostgreSQL, both
held to the SQLite reference (``CRAWLER_FAULT_RUNS=N`` for another number).
Kill points come from a seed printed with every failure;
``CRAWLER_FAULT_SEED=<seed>`` replays them.

Start-up is a kill point too: the moment the crawl's row becomes visible in
the database (the crawl is recorded, nothing is fetched yet), random moments
shortly after it, and random moments from the process's start (the crawl may
not be recorded yet: resume must then say so, never report an empty crawl).
With ``--use-sitemaps``, a kill while the sitemap is being fetched must not
lose the pages only the sitemap lists.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from crawler.store import open as store_open

from kit.clikit import clean_env, cli, run_cli
from kit.pgkit import done_urls, integrity, run_async
from kit.serve_site import ThreadedSite
from kit.sitekit import Page, Site, wait_until_sync

MAX_CONCURRENCY = 4
PAGES = 300
SLOW_DELAY_S = 0.05
RUN_TIMEOUT_S = 60.0
TIMING_FIELDS = frozenset({"started_at", "finished_at", "elapsed_s"})

# Read at import: the autouse fixture in conftest.py hides CRAWLER_* from each test.
FAULT_RUNS = int(os.environ.get("CRAWLER_FAULT_RUNS", "20"))
FAULT_SEED = int(os.environ.get("CRAWLER_FAULT_SEED") or random.SystemRandom().randrange(10**9))

Key = tuple[str, str, str]  # (host, method, path)


# ---------------------------------------------------------------------------
# the site
# ---------------------------------------------------------------------------


def build_site(external_origin: str, pages: int = PAGES, seed: int = 7) -> Site:
    """A 4-ary tree of pages with cross links, broken links, redirects and images.

    Every third page answers after ``SLOW_DELAY_S`` so a crawl at
    ``MAX_CONCURRENCY`` lasts long enough to be interrupted at many points.
    """
    rng = random.Random(seed)

    def page(i: int) -> str:
        return "/" if i == 0 else f"/p/{i}"

    site: Site = {}
    for i in range(pages):
        links = [page(child) for child in range(4 * i + 1, min(4 * i + 5, pages))]
        links += [page(rng.randrange(pages)) for _ in range(3)]
        links.append("/")
        if i % 25 == 7:
            links.append(f"/missing/{i % 4}")
        if i % 30 == 3:
            links.append(f"/old/{(i // 30) % 6}")
        if i % 97 == 5:
            links += ["/old/chain", "/old/dead"]
        if i % 40 == 11:
            links += [f"{external_origin}/ext/ok", f"{external_origin}/ext/gone"]
        assets = [f"/static/{i % 12}.png"]
        if i % 50 == 13:
            assets.append("/static/missing.png")
        delay = SLOW_DELAY_S if i % 3 == 2 else 0.0
        site[page(i)] = Page(links=links, assets=assets, delay_s=delay)
    for k in range(6):
        site[f"/old/{k}"] = Page(redirect_to=page(rng.randrange(1, pages)))
    site["/old/chain"] = Page(redirect_to="/old/0")
    site["/old/dead"] = Page(redirect_to="/missing/via-redirect")
    for k in range(12):
        site[f"/static/{k}.png"] = Page(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")
    return site


@dataclass
class Sites:
    """The crawled site and its external host, both counting requests."""

    main: ThreadedSite
    external: ThreadedSite

    @property
    def seed_url(self) -> str:
        return self.main.url("/")

    def reset(self) -> None:
        self.main.reset()
        self.external.reset()

    def request_count(self) -> int:
        return self.main.request_count() + self.external.request_count()

    def in_flight(self) -> int:
        return self.main.in_flight() + self.external.in_flight()

    def open_connections(self) -> int:
        return self.main.open_connections() + self.external.open_connections()

    def counts(self) -> Counter[Key]:
        counts: Counter[Key] = Counter()
        for server in (self.main, self.external):
            host = server.server.host
            counts.update((host, method, path) for method, path in server.requests())
        return counts


@dataclass(frozen=True)
class Reference:
    exit_code: int
    report: dict[str, Any]
    requests: Counter[Key]
    took_s: float  # the uninterrupted crawl's wall time, start-up included, on this machine


@pytest.fixture(scope="module")
def sites() -> Iterator[Sites]:
    external_site: Site = {"/ext/ok": Page(delay_s=SLOW_DELAY_S)}  # /ext/gone: 404
    with (
        ThreadedSite(external_site, host="127.0.0.2") as external,
        ThreadedSite(build_site(external.origin)) as main,
    ):
        yield Sites(main, external)


@pytest.fixture(scope="module")
def reference(sites: Sites, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The uninterrupted crawl: its exit code, JSON report and requests.

    On SQLite only, deliberately: it is the one reference both backends'
    resumed crawls must equal.
    """
    sites.reset()
    db = tmp_path_factory.mktemp("reference") / "crawl.db"
    started = time.monotonic()
    result = run_cli("crawl", sites.seed_url, "--db", str(db), *CRAWL_FLAGS, cwd=db.parent)
    took_s = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    return Reference(result.returncode, json.loads(result.stdout), sites.counts(), took_s)


# ---------------------------------------------------------------------------
# running the CLI
# ---------------------------------------------------------------------------

CRAWL_FLAGS = ("-f", "json", "-n", "--max-concurrency", str(MAX_CONCURRENCY), "--max-retries", "0")


def start_crawl(
    sites: Sites, db: str | Path, cwd: Path | None = None, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli("crawl", sites.seed_url, "--db", str(db), *CRAWL_FLAGS, *extra),
        cwd=cwd or Path(db).parent,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def resume(db: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli("resume", "--db", str(db), "-f", "json", "-n", cwd=cwd or Path(db).parent)


def wait_for_requests(sites: Sites, proc: subprocess.Popen[str], count: int) -> None:
    """Until the servers have seen ``count`` requests (or the crawler exited)."""
    wait_until_sync(
        lambda: sites.request_count() >= count or proc.poll() is not None,
        timeout=RUN_TIMEOUT_S,
        interval=0.001,
        message=f"servers saw {count} requests",
    )


def key_url(key: Key) -> str:
    host, _, path = key
    return f"http://{host}{path}"


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what legitimately differs between runs (timing)."""
    crawl = {k: v for k, v in report["crawl"].items() if k not in TIMING_FIELDS}
    return {**report, "crawl": crawl}


def duplicates(counts: Counter[Key]) -> dict[Key, int]:
    return {key: n for key, n in counts.items() if n > 1}


def assert_same_report(report: dict[str, Any], ref: Reference, context: str) -> None:
    assert report["summary"] == ref.report["summary"], context
    assert report["broken"] == ref.report["broken"], context
    assert comparable(report) == comparable(ref.report), context


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------


def test_reference_crawl_requests_every_url_once(sites: Sites, reference: Reference) -> None:
    report = reference.report
    assert report["crawl"]["state"] == "finished"
    assert report["summary"]["pages"] == PAGES
    assert report["summary"]["pending"] == 0
    assert duplicates(reference.requests) == {}
    origin = sites.main.origin
    broken = {link["url"].removeprefix(origin) for link in report["broken"]}
    assert broken == {
        "/missing/0",
        "/missing/1",
        "/missing/2",
        "/missing/3",
        "/old/dead",
        "/static/missing.png",
        f"{sites.external.origin}/ext/gone",
    }
    # Pages are fetched with GET, images and external links checked with HEAD.
    methods = Counter(method for _, method, _ in reference.requests)
    assert methods["GET"] >= PAGES
    assert methods["HEAD"] >= 12 + 2


@pytest.mark.parametrize("run", range(FAULT_RUNS))
def test_sigkill_then_resume_matches_reference(
    run: int, sites: Sites, reference: Reference, tmp_path: Path, any_db: str
) -> None:
    """On both backends: the reference report is SQLite's, and PostgreSQL must match it."""
    rng = random.Random(f"{FAULT_SEED}:{run}")
    total = sum(reference.requests.values())
    kill_after = rng.randint(1, total * 9 // 10)
    context = (
        f"replay with CRAWLER_FAULT_SEED={FAULT_SEED} (run {run}): "
        f"SIGKILL after {kill_after} of {total} requests"
    )
    print(context)
    sites.reset()
    db = any_db

    proc = start_crawl(sites, db, tmp_path)
    try:
        wait_for_requests(sites, proc, kill_after)
        in_flight = sites.in_flight()
        proc.kill()
        proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL, f"{context}: the crawl ended before the kill"
    assert_resume_completes(sites, reference, db, tmp_path, context, in_flight)


def assert_resume_completes(
    sites: Sites, reference: Reference, db: str, tmp_path: Path, context: str, in_flight: int
) -> None:
    """``crawler resume`` after a kill: the reference report, nothing committed redone."""
    assert integrity(db) == "ok", context
    # Requests the killed crawler had sent may still be read and counted by the
    # servers after it died: the count at the kill is taken once every
    # connection it opened is closed and its last request handled.
    wait_until_sync(
        lambda: sites.open_connections() == 0,
        timeout=RUN_TIMEOUT_S,
        interval=0.01,
        message=f"{context}: the killed crawler's connections closed",
    )
    seen_at_kill = sites.counts()
    done_at_kill = done_urls(db)
    unsettled = {key for key in seen_at_kill if key_url(key) not in done_at_kill}

    result = resume(db, tmp_path)
    assert result.returncode == reference.exit_code, f"{context}\n{result.stderr}"
    assert "Traceback" not in result.stderr, context
    assert_same_report(json.loads(result.stdout), reference, context)
    assert integrity(db) == "ok", context

    counts = sites.counts()
    assert set(counts) == set(reference.requests), f"{context}: different URLs requested"
    dupes = duplicates(counts)
    detail = (
        f"{context}: {len(dupes)} requests repeated; at the kill {in_flight} were in flight "
        f"and {len(unsettled)} requested but not committed: {sorted(dupes)}"
    )
    print(detail)
    # Work committed before the kill is never redone; what is redone was requested
    # once before the kill (its result not yet committed) and once by the resume.
    assert all(n == 2 for n in dupes.values()), detail
    assert all(seen_at_kill[key] == 1 for key in dupes), detail
    assert set(dupes) <= unsettled, detail


# ---------------------------------------------------------------------------
# start-up: killed around the moment the crawl is recorded
# ---------------------------------------------------------------------------

STARTUP_RUNS = 3  # random kills per backend, in each of the two ways below
AFTER_ROW_MAX_S = 0.5  # "shortly after the crawl row exists": the first requests
# From the process's start: before, at or after the row (recorded within ~0.5 s).
# Never past FROM_SPAWN_SHARE of the reference crawl's own wall time on this
# machine: a kill drawn later can find the crawl finished (it took 1.9 s on a
# quiet machine, longer on a busy one).
FROM_SPAWN_MAX_S = 2.0
FROM_SPAWN_SHARE = 0.6


def recorded_crawls_sqlite(path: str) -> int:
    """Crawl rows visible in a SQLite file now; 0 while it does not hold the table yet."""
    if not Path(path).exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.01)
        try:
            return int(conn.execute("SELECT count(*) FROM crawl").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


async def _recorded_crawls_pg(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM crawl"))
    except asyncpg.UndefinedTableError:
        return 0
    finally:
        await conn.close()


def recorded_crawls(db: str) -> int:
    """Crawl rows in either backend's database now."""
    if store_open.is_postgres_url(db):
        return run_async(_recorded_crawls_pg(db))
    return recorded_crawls_sqlite(db)


async def _wait_recorded_pg(url: str, proc: subprocess.Popen[str], deadline: float) -> bool:
    conn = await asyncpg.connect(url)
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if await conn.fetchval("SELECT count(*) FROM crawl"):
                    return True
            except asyncpg.UndefinedTableError:
                pass
        return False
    finally:
        await conn.close()


def wait_until_recorded(proc: subprocess.Popen[str], db: str) -> bool:
    """Poll, as fast as the database answers, until the crawl row is visible.

    False when the crawler exited first. A tight loop, not ``wait_until``: the
    point is to kill within a millisecond or so of the row's commit.
    """
    deadline = time.monotonic() + RUN_TIMEOUT_S
    if store_open.is_postgres_url(db):
        return run_async(_wait_recorded_pg(db, proc, deadline))
    while proc.poll() is None and time.monotonic() < deadline:
        if recorded_crawls_sqlite(db):
            return True
    return False


def pause(proc: subprocess.Popen[str], seconds: float) -> None:
    """Let the crawler run ``seconds`` more (or until it exits)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=seconds)


def settle(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=RUN_TIMEOUT_S)


STARTUP_MOMENTS = [
    "at-row",
    *(f"after-row-{i}" for i in range(STARTUP_RUNS)),
    *(f"from-spawn-{i}" for i in range(STARTUP_RUNS)),
]


@pytest.mark.parametrize("moment", STARTUP_MOMENTS)
def test_sigkill_at_startup_then_resume_matches_reference(
    moment: str, sites: Sites, reference: Reference, tmp_path: Path, any_db: str
) -> None:
    """Killed as the crawl is recorded: resume finishes it, never an empty "finished" crawl."""
    rng = random.Random(f"{FAULT_SEED}:{moment}")
    context = f"replay with CRAWLER_FAULT_SEED={FAULT_SEED} ({moment})"
    sites.reset()
    db = any_db
    proc = start_crawl(sites, db, tmp_path)
    started = time.monotonic()
    try:
        if moment.startswith("from-spawn"):
            delay = rng.uniform(0.0, min(FROM_SPAWN_MAX_S, FROM_SPAWN_SHARE * reference.took_s))
            context += f": SIGKILL {delay:.3f} s after the start"
            pause(proc, delay)
            assert proc.poll() is None, f"{context}: the crawl ended before the kill"
            proc.kill()
        else:
            assert wait_until_recorded(proc, db), f"{context}: the crawl row never appeared"
            if moment.startswith("after-row"):
                delay = rng.uniform(0.0, AFTER_ROW_MAX_S)
                context += f": SIGKILL {delay:.3f} s after the crawl row appeared"
                pause(proc, delay)
            assert proc.poll() is None, f"{context}: the crawl ended before the kill"
            proc.kill()
        in_flight = sites.in_flight()
    finally:
        settle(proc)
    print(f"{context}; killed {time.monotonic() - started:.3f} s after the start")
    assert proc.returncode == -signal.SIGKILL, f"{context}: the crawl ended before the kill"
    if recorded_crawls(db) == 0:  # killed before the crawl was recorded: nothing to resume
        result = resume(db, tmp_path)
        assert result.returncode == 3, f"{context}\n{result.stderr}"
        assert "no crawl" in result.stderr or "no such database" in result.stderr, result.stderr
        return
    assert_resume_completes(sites, reference, db, tmp_path, context, in_flight)


@pytest.mark.parametrize(
    ("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["INT", "TERM"]
)
def test_graceful_stop_then_resume_repeats_nothing(
    signum: signal.Signals,
    exit_code: int,
    sites: Sites,
    reference: Reference,
    tmp_path: Path,
    any_db: str,
) -> None:
    total = sum(reference.requests.values())
    stop_after = total // 3
    sites.reset()
    db = any_db

    proc = start_crawl(sites, db, tmp_path)
    try:
        wait_for_requests(sites, proc, stop_after)
        assert proc.poll() is None, "the crawl ended before the signal"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == exit_code, err
    assert "Traceback" not in err
    assert f"crawler resume --db {db}" in err
    partial = json.loads(out)  # the report so far, still valid JSON
    assert partial["crawl"]["state"] != "finished"
    assert partial["summary"]["pending"] > 0
    assert integrity(db) == "ok"
    assert duplicates(sites.counts()) == {}

    result = resume(db, tmp_path)
    assert result.returncode == reference.exit_code, result.stderr
    assert_same_report(json.loads(result.stdout), reference, f"resumed after {signum.name}")
    assert integrity(db) == "ok"
    counts = sites.counts()
    assert set(counts) == set(reference.requests)
    assert duplicates(counts) == {}, "a graceful stop must not cost a single repeated request"


SITEMAP_DELAY_S = 1.0  # the sitemap answers slowly: the kill lands while it is fetched


def test_sigkill_while_sitemaps_are_fetched_then_resume_finds_their_pages(
    tmp_path: Path, any_db: str
) -> None:
    """With --use-sitemaps, the pages only a sitemap lists survive a kill during its fetch."""
    site: Site = {"/": Page(), "/orphan": Page(links=["/orphan-child"]), "/orphan-child": Page()}
    with ThreadedSite(site) as server:
        site["/robots.txt"] = Page(
            body=f"Sitemap: {server.url('/s.xml')}\n", content_type="text/plain"
        )
        site["/s.xml"] = Page(
            body=f"<urlset><url><loc>{server.url('/orphan')}</loc></url></urlset>",
            content_type="application/xml",
            delay_s=SITEMAP_DELAY_S,
        )
        proc = subprocess.Popen(
            cli("crawl", server.url("/"), "--db", any_db, *CRAWL_FLAGS, "--use-sitemaps"),
            cwd=tmp_path,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until_sync(
                lambda: ("GET", "/s.xml") in server.requests() or proc.poll() is not None,
                timeout=RUN_TIMEOUT_S,
                interval=0.001,
                message="the sitemap was requested",
            )
            assert proc.poll() is None, "the crawl ended before the kill"
            proc.kill()
        finally:
            settle(proc)
        assert recorded_crawls(any_db) == 1
        result = resume(any_db, tmp_path)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["crawl"]["state"] == "finished"
        assert report["summary"]["pages"] == 3, report["summary"]
        assert server.counts()[("GET", "/orphan-child")] == 1
