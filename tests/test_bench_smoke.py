"""The benchmark's smoke run: 1,000 synthetic pages, checked for exactness, not speed.

Every planted broken link found with its sources, no URL requested twice. The
pure-Python server keeps it independent of nginx; the figures it prints are
not asserted (speed is measured by ``make bench``, never in CI).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kit.clikit import cli, run_command
from kit.serve_site import ThreadedSite
from kit.sitekit import Page

ROOT = Path(__file__).resolve().parents[1]


def test_bench_smoke_run_is_exact(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--pages",
            "1000",
            "--check",
            "--server",
            "python",
            "--timeout-s",
            "120",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pages/s" in done.stdout


def test_compare_runs_an_earlier_build_as_a_peer_of_the_crawler() -> None:
    """``--tools crawler,before``: both crawl the same site each round, both exact, one ratio."""
    done = subprocess.run(
        [
            sys.executable, "bench/compare.py", "--pages", "200", "--server", "python",
            "--tools", "crawler,before", "--before-python", sys.executable, "--rounds", "2",
            "--timeout-s", "120",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tables = [line.split() for line in done.stdout.splitlines() if line.startswith("  before ")]
    assert len(tables) == 3, done.stdout  # a row in each round's table, then the medians
    *rounds, summary = tables
    for row in rounds:
        found, planted = row[9].split("/")
        assert found == planted, done.stdout  # every planted link, with its sources ("!" not)
    assert summary[1] == "2", done.stdout  # two rounds paired with the crawler


def test_thread_cpu_names_the_busy_thread_of_a_child() -> None:
    """A command whose child spins in a second thread: that thread leads the table."""
    spin = (
        "import threading, time\n"
        "def spin():\n"
        "    end = time.process_time() + 0.3\n"
        "    while time.process_time() < end: pass\n"
        "t = threading.Thread(target=spin); t.start(); t.join()\n"
    )
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}])"
    done = subprocess.run(
        [sys.executable, "bench/thread_cpu.py", "--", sys.executable, "-c", parent],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    busiest = done.stdout.splitlines()[1]
    assert " child " in busiest, done.stdout
    assert " thread " in busiest, done.stdout  # not the child's main thread


def test_engine_stalls_sees_free_slots_while_the_frontier_is_empty(tmp_path: Path) -> None:
    """One slow page left and nothing else to fetch: the slots are free, no row leased."""
    site = {"/": Page(links=[f"/p{i}" for i in range(20)] + ["/slow"]), "/slow": Page(delay_s=1.5)}
    site.update({f"/p{i}": Page() for i in range(20)})
    server = ThreadedSite(site).start()
    try:
        done = run_command(
            [sys.executable, str(ROOT / "bench" / "engine_stalls.py"), "--",
             *cli("crawl", server.url("/"), "--db", tmp_path / "c.db", "-n")],
            cwd=tmp_path, timeout=120,
        )  # fmt: skip
    finally:
        server.close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exit 0" in done.stdout, done.stdout
    figures = dict(line.strip().rsplit(None, 1) for line in done.stdout.splitlines()[1:])
    assert int(figures["samples"]) > 0, done.stdout
    assert figures["slots free, no row leased"] != "0%", done.stdout
