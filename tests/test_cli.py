"""The command line as users and CI pipelines run it: a real subprocess, real servers.

Exit codes: 0 all links fine, 2 broken links found, 3 bad usage or
configuration, 1 any other failure. Every run here is ``python -m crawler.cli``
against a loopback ``SiteServer`` kept serving on its own thread.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kit.clikit import clean_env, cli, run_cli
from kit.serve_site import ThreadedSite
from kit.sitekit import Page, Site, wait_until_sync

RUN_TIMEOUT_S = 60.0
HOLD_S = 2.5  # how long one page keeps a crawl running while a report is read
# robots.txt is the crawler's own business (fetched once per host and crawl), not a link.
ROBOTS = ("GET", "/robots.txt")

REPORT_SCHEMA = Path(__file__).parent / "schemas" / "report.schema.json"

MakeSite = Callable[..., ThreadedSite]


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def one_line_error(result: subprocess.CompletedProcess[str], *, usage: bool = False) -> str:
    """The single error line on stderr, no traceback; ``usage``: argparse's usage may precede."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    if usage:
        lines = [line for line in lines if not line.startswith(("usage:", " "))]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("crawler"), result.stderr
    return lines[0]


def site_requests(site: ThreadedSite) -> Counter[tuple[str, str]]:
    return Counter(r for r in site.requests() if r != ROBOTS)


def parse_time(value: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value)
    assert parsed.tzinfo is not None, f"{value!r} has no time zone"
    return parsed


def assert_report_shape(doc: dict[str, Any]) -> None:
    """The JSON report as the README documents it (and its JSON Schema says)."""
    schema = json.loads(REPORT_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert {"crawl", "summary", "broken"} <= set(doc)
    crawl = doc["crawl"]
    assert {"id", "seeds", "state", "started_at", "finished_at", "elapsed_s"} <= set(crawl)
    assert isinstance(crawl["id"], int)
    assert isinstance(crawl["seeds"], list)
    assert all(isinstance(seed, str) for seed in crawl["seeds"])
    started = parse_time(crawl["started_at"])
    if crawl["state"] == "finished":
        assert parse_time(crawl["finished_at"]) >= started
    else:
        assert crawl["finished_at"] is None
    assert isinstance(crawl["elapsed_s"], int | float)
    assert crawl["elapsed_s"] >= 0
    summary = doc["summary"]
    counts = (
        "pages",
        "links",
        "ok",
        "redirected",
        "broken",
        "blocked",
        "skipped",
        "excluded",
        "pending",
    )
    assert set(counts) <= set(summary)
    for name in counts:
        assert isinstance(summary[name], int), name
        assert summary[name] >= 0, name
    assert isinstance(doc["broken"], list)
    for link in doc["broken"]:
        assert {"url", "status", "error", "sources"} <= set(link)
        assert isinstance(link["url"], str)
        assert link["status"] is None or isinstance(link["status"], int)
        assert link["error"] is None or isinstance(link["error"], str)
        assert link["sources"] == sorted(link["sources"])
    assert [link["url"] for link in doc["broken"]] == sorted(link["url"] for link in doc["broken"])


# ---------------------------------------------------------------------------
# sites
# ---------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n"


def fine_site() -> Site:
    """Three pages, an image and a redirect; every link works."""
    return {
        "/": Page(links=["/a", "/b", "/moved"], assets=["/logo.png"]),
        "/a": Page(links=["/", "/b"], assets=["/logo.png"]),
        "/b": Page(links=["/a"]),
        "/moved": Page(redirect_to="/a"),
        "/logo.png": Page(body=PNG, content_type="image/png"),
    }


def broken_site() -> Site:
    """``/gone`` (404) is linked from ``/`` and ``/one``, but not from ``/two``."""
    return {
        "/": Page(links=["/one", "/two", "/gone"]),
        "/one": Page(links=["/gone", "/two"]),
        "/two": Page(links=["/"]),
    }


def slow_site(pages: int = 40, delay_s: float = 0.05) -> Site:
    """A chain of slow pages: a crawl of it lasts about ``pages * delay_s`` seconds."""
    site: Site = {"/": Page(links=["/s/1"], delay_s=delay_s)}
    for i in range(1, pages):
        nxt = [f"/s/{i + 1}"] if i + 1 < pages else []
        site[f"/s/{i}"] = Page(links=[*nxt, "/"], delay_s=delay_s)
    return site


@pytest.fixture
def make_site() -> Iterator[MakeSite]:
    """Factory of threaded loopback sites, all closed at teardown."""
    started: list[ThreadedSite] = []

    def make(site: Site, host: str = "127.0.0.1") -> ThreadedSite:
        server = ThreadedSite(site, host=host).start()
        started.append(server)
        return server

    yield make
    for server in reversed(started):
        server.close()


# ---------------------------------------------------------------------------
# exit 0 and 2: the report
# ---------------------------------------------------------------------------


def test_all_links_fine_exits_0_with_documented_json(make_site: MakeSite, tmp_path: Path) -> None:
    site = make_site(fine_site())
    db = tmp_path / "crawl.db"

    result = run_cli("crawl", site.url("/"), "--db", db, "-f", "json", "-n", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert_report_shape(doc)
    assert doc["crawl"]["id"] == 1
    assert doc["crawl"]["state"] == "finished"
    assert doc["crawl"]["seeds"] == [site.url("/")]
    expected = {
        "pages": 3,
        "links": 5,
        "ok": 4,
        "redirected": 1,
        "broken": 0,
        "blocked": 0,
        "skipped": 0,
        "excluded": 0,
        "pending": 0,
    }
    assert {name: doc["summary"][name] for name in expected} == expected
    assert doc["broken"] == []
    # Pages by GET, the image by HEAD, the redirect once; nothing twice.
    assert site.requests().count(ROBOTS) <= 1
    assert site_requests(site) == {
        ("GET", "/"): 1,
        ("GET", "/a"): 1,
        ("GET", "/b"): 1,
        ("GET", "/moved"): 1,
        ("HEAD", "/logo.png"): 1,
    }


def test_broken_link_exits_2_listing_exactly_its_sources(
    make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site(broken_site())
    db = tmp_path / "crawl.db"

    result = run_cli("crawl", site.url("/"), "--db", db, "-f", "json", "-n", cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    doc = json.loads(result.stdout)
    assert_report_shape(doc)
    assert doc["summary"]["broken"] == 1
    assert doc["summary"]["pages"] == 3
    [gone] = doc["broken"]
    assert gone["url"] == site.url("/gone")
    assert gone["status"] == 404
    assert gone["error"]
    assert gone["sources"] == [site.url("/"), site.url("/one")]
    assert site_requests(site)[("GET", "/gone")] == 1

    # The text report groups the broken link under each source page, and agrees.
    text = run_cli("report", "--db", db, cwd=tmp_path)
    assert text.returncode == 2, text.stderr
    blocks = text.stdout.split("\n\n")
    assert "1 broken" in blocks[0]
    # Each source is named where it writes the link: page:line:column.
    shown = [block.splitlines()[0] for block in blocks[1:] if site.url("/gone") in block]
    sources = {where.rsplit(":", 2)[0] for where in shown}
    assert sources == {site.url("/"), site.url("/one")}
    assert all(re.fullmatch(r".+:\d+:\d+", where) for where in shown), shown


def test_output_file_gets_the_report_and_stdout_stays_empty(
    make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site(broken_site())
    db = tmp_path / "crawl.db"
    out = tmp_path / "report.json"

    result = run_cli(
        "crawl", site.url("/"), "--db", db, "-f", "json", "-n", "-o", out, cwd=tmp_path
    )

    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    written = json.loads(out.read_text(encoding="utf-8"))
    assert_report_shape(written)
    again = run_cli("report", "--db", db, "-f", "json", cwd=tmp_path)
    assert again.returncode == 2
    assert json.loads(again.stdout) == written


def test_stdout_holds_only_the_report_even_with_progress_on_a_tty(
    make_site: MakeSite, tmp_path: Path
) -> None:
    """Progress (when shown at all) goes to stderr; stdout, a pipe, is the report alone."""
    site = make_site(slow_site(pages=12))
    db = tmp_path / "crawl.db"
    primary, replica = pty.openpty()
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the replica side closed
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            cli("crawl", site.url("/"), "--db", db, "-f", "json"),
            cwd=tmp_path,
            env={**clean_env(), "TERM": "xterm"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=replica,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    finally:
        os.close(replica)
        reader.join(RUN_TIMEOUT_S)
        os.close(primary)
    progress = b"".join(shown)
    assert proc.returncode == 0, progress.decode(errors="replace")
    assert progress.strip(), "no progress was shown on the terminal"
    stdout = proc.stdout.decode("utf-8")
    assert "\x1b" not in stdout
    assert "\r" not in stdout
    doc = json.loads(stdout)  # the whole of stdout is one JSON document
    assert doc["summary"]["pages"] == 12


def test_stdout_and_stderr_carry_no_progress_when_not_a_tty(
    make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site(slow_site(pages=10))
    db = tmp_path / "crawl.db"

    result = run_cli("crawl", site.url("/"), "--db", db, cwd=tmp_path)  # no -n

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "\x1b" not in result.stdout
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("10 pages crawled")


def test_report_during_and_after_a_crawl(make_site: MakeSite, tmp_path: Path) -> None:
    site_def = slow_site(pages=10, delay_s=0.0)
    site_def["/s/6"] = Page(links=["/s/7", "/"], delay_s=HOLD_S)  # the crawl waits here
    site = make_site(site_def)
    db = tmp_path / "crawl.db"
    proc = subprocess.Popen(
        cli("crawl", site.url("/"), "--db", db, "-f", "json", "-n"),
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_sync(
            lambda: ("GET", "/s/6") in site.requests() or proc.poll() is not None,
            timeout=RUN_TIMEOUT_S,
            message="the crawl is held on /s/6",
        )
        during = run_cli("report", "--db", db, "-f", "json", cwd=tmp_path)
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=RUN_TIMEOUT_S)

    assert during.returncode == 0, during.stderr
    doc = json.loads(during.stdout)
    assert_report_shape(doc)
    assert doc["crawl"]["state"] == "running"
    assert doc["crawl"]["finished_at"] is None
    # /s/6 is found only once /s/5 is committed: the pages before it are all in.
    assert doc["summary"]["pages"] == 6
    assert doc["summary"]["pending"] == 1

    assert proc.returncode == 0, err
    final = json.loads(out)
    assert final["crawl"]["state"] == "finished"
    assert final["summary"]["pages"] == 10
    assert final["summary"]["pending"] == 0
    after = run_cli("report", "--db", db, "-f", "json", cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == final
    # Reading during the crawl cost it nothing: every page requested once.
    assert all(n == 1 for n in site_requests(site).values())


def test_second_crawl_on_the_same_db_keeps_the_first(make_site: MakeSite, tmp_path: Path) -> None:
    site = make_site(fine_site())
    db = tmp_path / "crawl.db"
    first = run_cli("crawl", site.url("/"), "--db", db, "-f", "json", "-n", cwd=tmp_path)
    assert first.returncode == 0, first.stderr

    site.site["/b"] = Page(links=["/a", "/gone"])  # the site changes between crawls
    second = run_cli("crawl", site.url("/"), "--db", db, "-f", "json", "-n", cwd=tmp_path)

    assert second.returncode == 2, second.stderr
    doc2 = json.loads(second.stdout)
    assert doc2["crawl"]["id"] == 2
    assert [link["url"] for link in doc2["broken"]] == [site.url("/gone")]
    assert doc2["broken"][0]["sources"] == [site.url("/b")]

    latest = run_cli("report", "--db", db, "-f", "json", cwd=tmp_path)
    assert latest.returncode == 2
    assert json.loads(latest.stdout) == doc2
    old = run_cli("report", "--db", db, "--crawl", "1", "-f", "json", cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    doc1 = json.loads(old.stdout)
    assert doc1 == json.loads(first.stdout)
    assert doc1["crawl"]["id"] == 1
    assert doc1["broken"] == []
    assert doc1["summary"]["broken"] == 0
    assert doc2["summary"]["broken"] == 1
    assert doc2["summary"]["pages"] == doc1["summary"]["pages"] == 3


# ---------------------------------------------------------------------------
# exit 3: bad usage or configuration
# ---------------------------------------------------------------------------

# args ({site} is the seed), what the message names, whether argparse prints its usage
USAGE_ERRORS = {
    "invalid-url-seed": (["crawl", "http://"], "http://", False),
    "unknown-scheme-seed": (["crawl", "ftp://example.com/"], "ftp", False),
    "invalid-exclude-regex": (["crawl", "{site}", "--exclude", "("], "exclude", False),
    "unknown-flag": (["crawl", "{site}", "--no-such-flag"], "--no-such-flag", True),
    "zero-concurrency": (["crawl", "{site}", "--max-concurrency", "0"], "max-concurrency", False),
}


@pytest.mark.parametrize(
    ("args", "mentions", "usage"), USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys()
)
def test_bad_usage_exits_3_with_one_line(
    args: list[str], mentions: str, usage: bool, make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site(fine_site())
    db = tmp_path / "crawl.db"
    argv = [arg.replace("{site}", site.url("/")) for arg in args]

    result = run_cli(*argv, "--db", db, "-n", cwd=tmp_path)

    assert result.returncode == 3, result.stderr
    assert result.stdout == ""
    assert mentions in one_line_error(result, usage=usage)
    assert site.request_count() == 0
    assert not db.exists(), "bad usage must not leave a database behind"


def test_database_in_a_missing_directory_exits_3(make_site: MakeSite, tmp_path: Path) -> None:
    site = make_site(fine_site())
    db = tmp_path / "no" / "such" / "dir" / "crawl.db"

    result = run_cli("crawl", site.url("/"), "--db", db, "-n", cwd=tmp_path)

    assert result.returncode == 3, result.stderr
    assert str(db.parent) in one_line_error(result)
    assert not (tmp_path / "no").exists()
    assert site.request_count() == 0


@pytest.mark.parametrize("command", ["crawl", "resume", "report"])
def test_text_file_as_database_exits_3_and_stays_untouched(
    command: str, make_site: MakeSite, tmp_path: Path
) -> None:
    site = make_site(fine_site())
    db = tmp_path / "notes.txt"
    content = b"These are my notes, not a crawl database.\n" * 20
    db.write_bytes(content)
    args = ["crawl", site.url("/")] if command == "crawl" else [command]

    result = run_cli(*args, "--db", db, cwd=tmp_path)

    assert result.returncode == 3, result.stderr
    assert "not a SQLite database" in one_line_error(result)
    assert db.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no -wal, no -shm
    assert site.request_count() == 0


def test_report_of_a_missing_crawl_id_exits_3(make_site: MakeSite, tmp_path: Path) -> None:
    site = make_site(fine_site())
    db = tmp_path / "crawl.db"
    assert run_cli("crawl", site.url("/"), "--db", db, "-n", cwd=tmp_path).returncode == 0

    result = run_cli("report", "--db", db, "--crawl", "7", cwd=tmp_path)

    assert result.returncode == 3
    assert "7" in one_line_error(result)


# ---------------------------------------------------------------------------
# exit 1: any other failure
# ---------------------------------------------------------------------------


def _user_namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", "true"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def test_disk_full_mid_crawl_exits_1_and_says_how_to_resume(
    make_site: MakeSite, tmp_path: Path
) -> None:
    """A real ENOSPC: the database lives on a 512 KiB tmpfs in a private mount namespace."""
    if not _user_namespaces_work():
        pytest.skip("needs unprivileged user and mount namespaces (unshare)")
    long_tail = "a-rather-long-path-segment-" * 4
    site_def: Site = {
        f"/p/{i}": Page(
            links=[f"/p/{j}" for j in range(4 * i + 1, 4 * i + 5)] + [f"/x/{i}/{long_tail}"]
        )
        for i in range(300)
    }
    site_def["/"] = Page(links=["/p/0"])
    site = make_site(site_def)
    mount = tmp_path / "small"
    mount.mkdir()
    db = mount / "crawl.db"
    crawl = " ".join(
        f"'{part}'" for part in cli("crawl", site.url("/"), "--db", db, "-n", "-f", "json")
    )
    script = f"mount -t tmpfs -o size=512k tmpfs '{mount}' && exec {crawl}"

    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )

    assert result.returncode == 1, result.stderr
    line = one_line_error(result)
    assert "disk full" in line
    assert f"crawler resume --db {db}" in line
    assert result.stdout == ""
    assert 0 < site.request_count() < 1000, "the disk should fill up mid-crawl"


def test_a_crawl_without_a_terminal_does_not_load_rich() -> None:
    # rich (and structlog's rich tracebacks, with pygments) is memory a CI
    # run or the service never uses; it is loaded for the progress display.
    probe = (
        "import sys, crawler.cli.main, crawler.engine.runner, crawler.engine.loop, crawler.log\n"
        "crawler.log.configure()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'pygments')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
    progress = "import sys, crawler.cli.progress; print('rich.console' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", progress], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "True"
