"""A crawl killed mid-way and resumed keeps its cookies, on both backends.

The site sets its session cookie on the entry page only and answers 403 to
every other page without it. The crawler runs as a real process, is killed
(SIGKILL) once the gated pages are being fetched, and ``crawler resume``
finishes the crawl: the entry page is not fetched again, so every page the
resume fetches passes the gate only with the cookie the crawl stored.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from kit.clikit import clean_env, cli, run_cli
from kit.pgkit import done_urls
from kit.realsites import SESSION, SESSION_VALUE, ThreadedBehaviour, cookie_gate
from kit.sitekit import wait_until_sync

PAGES = 40
DELAY_S = 0.05  # each answer waits this long, so the crawl lasts long enough to be killed
KILL_AFTER = 6  # gated pages requested before the kill
RUN_TIMEOUT_S = 60.0
ENTRY_DELAY_S = 3.0  # longer than a worker process takes to start


def test_a_resumed_crawl_keeps_its_cookies(any_db: str, tmp_path: Path) -> None:
    with ThreadedBehaviour(cookie_gate(PAGES, delay_s=DELAY_S)) as server:
        flags = ("-f", "json", "-n")
        settings = ("--max-concurrency", "2", "--max-retries", "0")  # stored with the crawl
        proc = subprocess.Popen(
            cli("crawl", server.url("/"), "--db", any_db, *flags, *settings),
            cwd=tmp_path,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until_sync(
                lambda: (
                    sum(a.path.startswith("/p/") for a in server.arrivals) >= KILL_AFTER
                    or proc.poll() is not None
                ),
                timeout=RUN_TIMEOUT_S,
                message=f"{KILL_AFTER} gated pages requested",
            )
            assert proc.poll() is None, f"the crawl ended before the kill: {proc.stderr}"
            proc.send_signal(signal.SIGKILL)
            proc.wait(RUN_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()
        assert server.url("/") in done_urls(any_db)
        before_resume = len(server.arrivals)

        result = run_cli("resume", "--db", any_db, *flags, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["broken"] == []
    assert report["summary"]["pages"] == PAGES + 1
    assert server.count("/") == 1  # the cookie came from the store, not from / again
    resumed = [a for a in server.arrivals[before_resume:] if a.path.startswith("/p/")]
    assert resumed, "the resume fetched no gated page"
    assert {a.cookie for a in resumed} == {f"{SESSION}={SESSION_VALUE}"}


def test_workers_share_the_crawls_cookies(any_db: str, tmp_path: Path) -> None:
    """With ``--workers 3`` the cookie set on the entry page reaches every worker.

    The entry page answers late, so the workers have started (and found no
    cookie stored) before it sets the cookie: they must pick it up on the way.
    """
    gate = cookie_gate(PAGES, delay_s=DELAY_S, entry_delay_s=ENTRY_DELAY_S)
    with ThreadedBehaviour(gate) as server:
        result = run_cli(
            "crawl", server.url("/"), "--db", any_db, "-f", "json", "-n",
            "--workers", "3", "--max-concurrency", "1", "--max-retries", "0", cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["broken"] == []
    assert report["summary"]["pages"] == PAGES + 1
    assert server.count("/") == 1
