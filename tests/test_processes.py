"""Several processes on one database, and a full disk: nothing lost, nothing done twice.

The crawler runs as real subprocesses against a loopback site served from a
background thread (``serve_site.ThreadedSite``), which counts every request.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kit.clikit import DECOY_SAYS, clean_env, cli, plant_decoy_crawler
from kit.serve_site import ThreadedSite
from kit.sitekit import Page, wait_until_sync

PAGES = 240
CONCURRENCY = 4
RUN_BOUND_S = 120
SHARED_DELAY_S = 0.1  # per page while two resumes share the frontier


def _site() -> dict[str, Page]:
    site: dict[str, Page] = {"/": Page(links=[f"/p{i}" for i in range(0, PAGES, 8)])}
    for i in range(PAGES):
        links = [f"/p{(i * 5 + 1) % PAGES}", f"/p{(i + 1) % PAGES}", f"/p{(i * 3) % PAGES}"]
        if i % 20 == 0:
            links.append(f"/missing/{i}")
        site[f"/p{i}"] = Page(links=links, assets=["/logo.png"], delay_s=0.01)
    site["/logo.png"] = Page(content_type="image/png", body=b"png")
    return site


@pytest.fixture(scope="module")
def site() -> Iterator[ThreadedSite]:
    with ThreadedSite(_site()) as server:
        yield server


def _crawl_args(site: ThreadedSite, db: Path, *extra: str) -> list[str]:
    return cli(
        "crawl",
        site.url("/"),
        "--db",
        str(db),
        "-n",
        "-f",
        "json",
        "--max-concurrency",
        str(CONCURRENCY),
        "--max-retries",
        "0",
        *extra,
    )


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    return {"summary": report["summary"], "broken": report["broken"]}


@pytest.fixture(scope="module")
def reference(site: ThreadedSite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    done = _crawl(site, tmp_path_factory.mktemp("ref") / "c.db")
    assert done.returncode == 2, done.stderr
    return json.loads(done.stdout)


def _crawl(
    site: ThreadedSite, db: Path, *extra: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The crawl run to its end (bounded), its output captured."""
    return subprocess.run(
        _crawl_args(site, db, *extra),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_BOUND_S,
        env=clean_env(),
        check=False,
    )


def _repeated_paths(site: ThreadedSite) -> set[str]:
    """Paths requested more than once (robots.txt is asked once per process)."""
    counts = Counter(site.requests())
    return {path for (_, path), n in counts.items() if n > 1 and path != "/robots.txt"}


def _leased_paths(db: Path, site: ThreadedSite, pid: int | None = None) -> set[str]:
    """Paths of the rows leased now (by the worker with ``pid``, if given)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT u.url FROM url u LEFT JOIN worker w ON w.token = u.lease_owner "
            "WHERE u.state = 1 AND (? IS NULL OR w.pid = ?)",
            (pid, pid),
        ).fetchall()
    finally:
        conn.close()
    return {url[len(site.origin) :] for (url,) in rows}


def _kill_after(site: ThreadedSite, proc: subprocess.Popen[str], requests: int) -> None:
    wait_until_sync(
        lambda: site.request_count() >= requests or proc.poll() is not None,
        timeout=60,
        message=f"{requests} requests",
    )
    assert proc.poll() is None, "the crawl ended before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


def test_two_resumes_cooperate_on_one_frontier(
    site: ThreadedSite, reference: dict[str, Any], tmp_path: Path
) -> None:
    db = tmp_path / "c.db"
    site.reset()
    first = subprocess.Popen(
        _crawl_args(site, db),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean_env(),
    )
    _kill_after(site, first, 60)
    leased_at_kill = _leased_paths(db, site)
    # What is left must outlast either resume's start-up, on a loaded machine too
    # (at 10 ms a page the first to start could finish it before the other leased).
    fast = dict(site.site)
    site.site.update(
        {path: dataclasses.replace(page, delay_s=SHARED_DELAY_S) for path, page in fast.items()}
    )
    try:
        outputs = _resume_twice(db)
    finally:
        site.site.update(fast)
    fetched = []
    for _, err in outputs:
        events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        stopped = [e for e in events if e.get("event") == "engine_stopped"]
        assert stopped, err
        fetched.append(stopped[0]["fetched"])
    assert all(count > 0 for count in fetched), f"both processes worked: {fetched}"
    assert _repeated_paths(site) <= leased_at_kill
    for out, _ in outputs:
        assert _comparable(json.loads(out)) == _comparable(reference)


def _resume_twice(db: Path) -> list[tuple[str, str]]:
    """Two ``crawler resume`` of one crawl at once; their (stdout, stderr), both exit 2."""
    resumes = [
        subprocess.Popen(
            cli(
                "resume",
                "--db",
                str(db),
                "-n",
                "-f",
                "json",
                "--log-level",
                "info",
                "--log-format",
                "json",
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=RUN_BOUND_S) for proc in resumes]
    for proc, (_, err) in zip(resumes, outputs, strict=True):
        assert proc.returncode == 2, err
    return outputs


def test_a_killed_worker_loses_nothing(
    site: ThreadedSite, reference: dict[str, Any], tmp_path: Path
) -> None:
    db = tmp_path / "c.db"
    site.reset()
    main = subprocess.Popen(
        _crawl_args(site, db, "--workers", "3"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    wait_until_sync(
        lambda: len(_children(main.pid)) == 2 and site.request_count() >= 40,
        timeout=60,
        message="two workers running",
    )
    victim = _children(main.pid)[0]
    os.kill(victim, signal.SIGKILL)
    leased_by_victim = _leased_paths(db, site, victim)
    out, err = main.communicate(timeout=RUN_BOUND_S)
    assert main.returncode == 2, err
    assert _comparable(json.loads(out)) == _comparable(reference)
    assert _repeated_paths(site) <= leased_by_victim


def test_its_workers_run_the_installed_crawler_whatever_the_working_directory(
    site: ThreadedSite, reference: dict[str, Any], tmp_path: Path
) -> None:
    """A ``crawler/`` folder where the crawl is started (a checkout, a project of
    that name) is not what the worker processes import."""
    plant_decoy_crawler(tmp_path)
    site.reset()
    done = _crawl(site, tmp_path / "c.db", "--workers", "2", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert DECOY_SAYS not in done.stderr
    assert _comparable(json.loads(done.stdout)) == _comparable(reference)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, grown later with ``remount``; skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_stops_cleanly_and_resume_completes(
    site: ThreadedSite, reference: dict[str, Any], small_disk: Path
) -> None:
    db = small_disk / "c.db"
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * 700_000)  # leaves room to start, not to finish
    full = subprocess.run(
        _crawl_args(site, db),
        capture_output=True,
        text=True,
        timeout=RUN_BOUND_S,
        env=clean_env(),
        check=False,
    )
    assert full.returncode == 1, full.stderr
    assert "disk full" in full.stderr
    assert "crawler resume" in full.stderr
    assert "Traceback" not in full.stderr
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    ballast.unlink()
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    resumed = subprocess.run(
        cli("resume", "--db", str(db), "-n", "-f", "json"),
        capture_output=True,
        text=True,
        timeout=RUN_BOUND_S,
        env=clean_env(),
        check=False,
    )
    assert resumed.returncode == 2, resumed.stderr
    assert _comparable(json.loads(resumed.stdout)) == _comparable(reference)
