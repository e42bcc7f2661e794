"""Whole crawls on PostgreSQL through the command line, one worker or several.

``crawler crawl / resume / report / work --db postgresql://…`` against a real
loopback site, compared with the SQLite backend's report for the same site.
The multi-worker test runs three worker processes on one crawl of a few
thousand pages, SIGKILLs one mid-crawl, and checks that the report equals
SQLite's, that only URLs the killed worker held were requested twice, and
that the per-host concurrency limit held across the workers (counted by the
server).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit import clikit
from kit.clikit import clean_env, cli
from kit.pgkit import pg_url, run_async  # noqa: F401 - fixture
from kit.serve_site import ThreadedSite
from kit.sitekit import Page, Site, wait_until_sync

RUN_TIMEOUT_S = 120.0
HOST_CONCURRENCY = 4
WORKER_CONCURRENCY = 8
TIMING_FIELDS = frozenset({"started_at", "finished_at", "elapsed_s"})


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return clikit.run_cli(*args, cwd=cwd, timeout=RUN_TIMEOUT_S)


def start_cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli(*args),
        cwd=cwd,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_worker(args: tuple[str, ...], log: Path) -> subprocess.Popen[str]:
    """A ``crawler work`` process; its stderr goes to ``log``."""
    with log.open("w") as stderr:
        return subprocess.Popen(
            cli(*args),
            cwd=log.parent,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    crawl = {k: v for k, v in report["crawl"].items() if k not in TIMING_FIELDS}
    return {**report, "crawl": crawl}


def build_site(pages: int, seed: int = 11) -> Site:
    """A 4-ary tree with cross links, broken links, redirects and shared images."""
    import random

    rng = random.Random(seed)

    def page(i: int) -> str:
        return "/" if i == 0 else f"/p/{i}"

    site: Site = {}
    for i in range(pages):
        links = [page(c) for c in range(4 * i + 1, min(4 * i + 5, pages))]
        links += [page(rng.randrange(pages)) for _ in range(3)]
        if i % 97 == 7:
            links.append(f"/missing/{i % 5}")
        if i % 211 == 3:
            links += ["/old/moved", "/old/dead"]
        site[page(i)] = Page(
            links=links,
            assets=[f"/static/{i % 20}.png"],
            delay_s=0.01 if i % 4 == 1 else 0.0,
        )
    site["/old/moved"] = Page(redirect_to=page(rng.randrange(1, pages)))
    site["/old/dead"] = Page(redirect_to="/missing/via-redirect")
    for k in range(20):
        site[f"/static/{k}.png"] = Page(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")
    return site


@pytest.fixture(scope="module")
def small_site() -> Iterator[ThreadedSite]:
    with ThreadedSite(build_site(60)) as site:
        yield site


def _flags(*extra: str) -> tuple[str, ...]:
    return ("-n", "--max-retries", "0", *extra)


def test_crawl_and_report_match_sqlite(
    small_site: ThreadedSite,
    pg_url: str,  # noqa: F811 - the pgkit fixture
    tmp_path: Path,
) -> None:
    lite = run_cli(
        "crawl", small_site.url("/"), "--db", "c.db", "-f", "json", *_flags(), cwd=tmp_path
    )
    small_site.reset()
    pg = run_cli(
        "crawl", small_site.url("/"), "--db", pg_url, "-f", "json", *_flags(), cwd=tmp_path
    )
    assert pg.returncode == lite.returncode == 2, pg.stderr
    assert "Traceback" not in pg.stderr
    assert comparable(json.loads(pg.stdout)) == comparable(json.loads(lite.stdout))
    assert max(small_site.counts().values()) == 1  # every URL requested once
    for fmt in ("text", "jsonl", "csv", "markdown", "junit", "sarif", "html"):
        a = run_cli("report", "--db", "c.db", "-f", fmt, "-n", cwd=tmp_path)
        b = run_cli("report", "--db", pg_url, "-f", fmt, "-n", cwd=tmp_path)
        assert b.returncode == a.returncode == 2, (fmt, b.stderr)
        if fmt == "csv":  # the other formats carry timings
            assert b.stdout == a.stdout, fmt


def test_interrupted_crawl_resumes_on_postgres(
    small_site: ThreadedSite,
    pg_url: str,  # noqa: F811 - the pgkit fixture
    tmp_path: Path,
) -> None:
    small_site.reset()
    proc = start_cli(
        "crawl",
        small_site.url("/"),
        "--db",
        pg_url,
        "-f",
        "json",
        *_flags("--max-concurrency", "1"),
        cwd=tmp_path,
    )
    try:
        wait_until_sync(
            lambda: small_site.request_count() >= 20 or proc.poll() is not None,
            timeout=RUN_TIMEOUT_S,
            interval=0.001,
        )
        proc.kill()
        proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    resumed = run_cli("resume", "--db", pg_url, "-f", "json", "-n", cwd=tmp_path)
    assert resumed.returncode == 2, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["crawl"]["state"] == "finished"
    assert report["summary"]["pages"] == 60


def test_unreachable_postgres_is_a_clear_error(tmp_path: Path) -> None:
    result = run_cli(
        "crawl",
        "http://127.0.0.1:9/",
        "--db",
        "postgresql://nobody:secret@127.0.0.1:9/none",
        *_flags(),
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "cannot connect to postgresql://nobody:***@127.0.0.1:9/none" in result.stderr
    assert "secret" not in result.stderr
    assert "Traceback" not in result.stderr


# -- three workers, one killed ------------------------------------------------------


PAGES = 2500


@pytest.mark.slow
def test_three_workers_one_killed(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    site_def = build_site(PAGES)
    with ThreadedSite(site_def) as site:
        flags = _flags(
            "--max-concurrency",
            str(WORKER_CONCURRENCY),
            "--host-concurrency",
            str(HOST_CONCURRENCY),
        )
        reference = run_cli(
            "crawl", site.url("/"), "--db", "ref.db", "-f", "json", *flags, cwd=tmp_path
        )
        assert reference.returncode == 2, reference.stderr
        expected = json.loads(reference.stdout)
        total = site.request_count()
        site.reset()
        site.server.max_in_flight = 0

        main = start_cli("crawl", site.url("/"), "--db", pg_url, "-f", "json", *flags, cwd=tmp_path)
        procs = [main]
        try:
            wait_until_sync(
                lambda: site.request_count() >= 20 or main.poll() is not None,
                timeout=RUN_TIMEOUT_S,
                interval=0.001,
            )
            assert main.poll() is None, main.communicate()
            work = ("work", "--db", pg_url, "--crawl", "1", "-n", "--log-level", "error")
            victim, survivor = (start_worker(work, tmp_path / f"w{i}.log") for i in range(2))
            procs += [victim, survivor]
            wait_until_sync(
                lambda: _has_leases(pg_url, victim.pid),
                timeout=RUN_TIMEOUT_S,
                interval=0.005,
                message="the second worker leased something",
            )
            wait_until_sync(
                lambda: site.request_count() >= total // 3, timeout=RUN_TIMEOUT_S, interval=0.001
            )
            assert all(p.poll() is None for p in procs), "a worker ended before the kill"
            victim.send_signal(signal.SIGSTOP)  # frozen: its leases cannot change now
            held = _leases_of(pg_url, victim.pid)
            seen_at_kill = Counter(site.requests())
            victim.kill()
            victim.wait(timeout=RUN_TIMEOUT_S)
            out, err = main.communicate(timeout=RUN_TIMEOUT_S)
            survivor.wait(timeout=RUN_TIMEOUT_S)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert main.returncode == 2, err
        assert survivor.returncode == 0, (tmp_path / "w1.log").read_text()
        assert held, "the killed worker held no lease"

        # The same report as SQLite's, and the same from `crawler report` afterwards.
        got = json.loads(out)
        assert comparable(got) == comparable(expected)
        again = run_cli("report", "--db", pg_url, "-f", "json", "-n", cwd=tmp_path)
        assert comparable(json.loads(again.stdout)) == comparable(expected)

        # Every URL requested once, except those the killed worker held.
        counts = Counter(path for _, path in site.requests())
        counts.pop("/robots.txt", None)  # each worker may fetch it before one stores it
        repeated = {path for path, n in counts.items() if n > 1}
        held_paths = {"/" + url.split("/", 3)[3] for url in held}
        assert repeated <= held_paths, sorted(repeated - held_paths)
        assert all(counts[path] == 2 for path in repeated)
        assert all(seen_at_kill[(m, p)] <= 1 for m, p in seen_at_kill if p != "/robots.txt")

        # One host, three workers: never more than its limit at once.
        assert site.server.max_in_flight <= HOST_CONCURRENCY
        assert site.server.max_in_flight == HOST_CONCURRENCY  # and the limit was reached


def _query(url: str, sql: str, *args: Any) -> list[Any]:
    import asyncpg

    async def go() -> list[Any]:
        conn = await asyncpg.connect(url)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return run_async(go())


def _leases_of(url: str, pid: int) -> set[str]:
    rows = _query(
        url,
        "SELECT u.url FROM url u JOIN worker w ON w.token = u.lease_owner "
        "WHERE u.state = 1 AND w.pid = $1",
        pid,
    )
    return {r[0] for r in rows}


def _has_leases(url: str, pid: int) -> bool:
    time.sleep(0.001)
    return bool(_leases_of(url, pid))
