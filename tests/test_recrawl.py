"""``crawler recrawl``, ``crawler diff`` and ``--fail-on new`` against a site that changes.

The site (``kit.conditional_site``) answers conditional requests and counts
them. Between the first crawl and the re-crawl one page changes its links,
one page is removed, one is added: the re-crawl downloads only what changed
(every other page is answered 304), finds the new page through the changed
one, reports the removed page broken with its sources, and its report is
the one a full crawl of the changed site gives. Both backends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawler.report.model import ReportData
from crawler.store import open as store_open

from kit.clikit import run_cli
from kit.conditional_site import ConditionalSite
from kit.sitekit import page_html

UNCHANGED = ("/", "/a", "/b", "/a1", "/c1")


def site_pages() -> dict[str, str]:
    return {
        "/": page_html(["/a", "/b", "/c", "/a#part"], assets=["/logo.png"]),
        "/a": page_html(["/a1", "/gone", "/b"]),
        "/b": page_html(["/", "/gone"]),
        "/c": page_html(["/c1"]),
        "/a1": page_html(["/c"]),
        "/c1": page_html(),
        "/gone": page_html(),
        "/logo.png": "png",
    }


def change(site: ConditionalSite) -> None:
    """/gone is removed, /c links to a new page /c2 and to a missing /nowhere."""
    site.remove_page("/gone")
    site.set_page("/c", page_html(["/c1", "/c2", "/nowhere"]))
    site.set_page("/c2", page_html(["/"]))


@pytest.fixture
def site() -> Iterator[ConditionalSite]:
    with ConditionalSite(site_pages()) as server:
        yield server


def comparable(data: ReportData) -> dict[str, object]:
    """A report without what differs between two crawls of the same site (ids, times)."""
    return {
        "summary": data.summary,
        "broken": data.broken,
        "edges": data.edges,
        "pages": data.pages,
        "results": sorted(
            (r.url, r.result_class, r.status, r.error, r.content_type) for r in data.need_results()
        ),
    }


def test_a_recrawl_downloads_only_what_changed_and_reports_as_a_full_crawl(
    site: ConditionalSite, any_db: str, tmp_path: Path
) -> None:
    first = run_cli("crawl", site.url("/"), "--db", any_db, "-n", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert all(site.full[path] == 1 for path in site_pages() if path != "/logo.png")
    change(site)
    site.reset_counts()

    again = run_cli("recrawl", "--db", any_db, "-n", cwd=tmp_path)
    assert again.returncode == 2, again.stderr
    for path in UNCHANGED:  # asked, answered 304, not downloaded
        assert (site.conditional[path], site.not_modified[path], site.full[path]) == (1, 1, 0)
    assert site.full["/c"] == 1  # changed: downloaded
    assert site.full["/c2"] == 1  # a new child of the changed page
    assert site.conditional["/c2"] == 0  # unknown to the previous crawl
    assert site.full["/gone"] == 1  # asked conditionally, answered 404
    assert site.heads["/nowhere"] + site.full["/nowhere"] >= 1

    recrawled = store_open.load_report(any_db)
    broken = {link.url: link.sources for link in recrawled.broken}
    assert broken == {
        site.url("/gone"): [site.url("/a"), site.url("/b")],
        site.url("/nowhere"): [site.url("/c")],
    }

    full = run_cli("crawl", site.url("/"), "--db", any_db, "-n", cwd=tmp_path)
    assert full.returncode == 2, full.stderr
    fresh = store_open.load_report(any_db)
    assert fresh.crawl.id == recrawled.crawl.id + 1
    assert comparable(recrawled) == comparable(fresh)


def test_diff_lists_the_planted_changes_in_every_format(
    site: ConditionalSite, any_db: str, tmp_path: Path
) -> None:
    assert run_cli("crawl", site.url("/"), "--db", any_db, "-n", cwd=tmp_path).returncode == 0
    change(site)
    assert run_cli("recrawl", "--db", any_db, "-n", cwd=tmp_path).returncode == 2

    shown = run_cli("diff", "--db", any_db, "-f", "json", cwd=tmp_path)
    assert shown.returncode == 2, shown.stderr  # links broke since
    doc = json.loads(shown.stdout)
    assert (doc["from_crawl"], doc["to_crawl"]) == (1, 2)
    # Where each source writes the link is kept through the re-crawl (a 304 page's too).
    assert [
        [(where["source"], where["line"] is not None) for where in link["locations"]]
        for link in doc["new_broken"]
    ] == [[(site.url("/a"), True), (site.url("/b"), True)], [(site.url("/c"), True)]]
    for link in doc["new_broken"]:
        del link["locations"]
    assert doc["new_broken"] == [
        {
            "url": site.url("/gone"),
            "status": 404,
            "error": "404 Not Found",
            "sources": [site.url("/a"), site.url("/b")],
        },
        {
            "url": site.url("/nowhere"),
            "status": 404,
            "error": "404 Not Found",
            "sources": [site.url("/c")],
        },
    ]
    assert doc["fixed"] == []
    assert doc["still_broken"] == []
    assert doc["pages_added"] == [site.url("/c2")]
    assert doc["pages_removed"] == [site.url("/gone")]
    assert doc["counts"] == {
        "new_broken": 2,
        "fixed": 0,
        "still_broken": 0,
        "pages_added": 1,
        "pages_removed": 1,
    }
    for fmt, marker in (("text", "Newly broken (2):"), ("markdown", "## Newly broken (2)")):
        out = run_cli("diff", "--db", any_db, "-f", fmt, cwd=tmp_path)
        assert marker in out.stdout
        assert site.url("/nowhere") in out.stdout
    page = tmp_path / "diff.html"
    run_cli("diff", "--db", any_db, "-f", "html", "-o", page, cwd=tmp_path)
    assert f'<a href="{site.url("/c2")}">' in page.read_text(encoding="utf-8")

    backwards = run_cli(
        "diff", "--db", any_db, "--from", "2", "--to", "1", "-f", "json", cwd=tmp_path
    )
    assert backwards.returncode == 0, backwards.stderr  # nothing broke going back
    assert [link["url"] for link in json.loads(backwards.stdout)["fixed"]] == [
        site.url("/gone"),
        site.url("/nowhere"),
    ]
    bad = run_cli("diff", "--db", any_db, "-f", "sarif", cwd=tmp_path)
    assert bad.returncode == 3
    assert "for diff" in bad.stderr


def test_fail_on_new_exits_2_only_for_newly_broken_links(
    site: ConditionalSite, any_db: str, tmp_path: Path
) -> None:
    site.set_page("/b", page_html(["/", "/dead"]))
    first = run_cli("crawl", site.url("/"), "--db", any_db, "-n", "--fail-on", "new", cwd=tmp_path)
    assert first.returncode == 2, first.stderr  # no earlier crawl: every broken link is new
    same = run_cli("recrawl", "--db", any_db, "-n", "--fail-on", "new", cwd=tmp_path)
    assert same.returncode == 0, same.stderr  # /dead is still broken, nothing new
    assert "0 newly broken, 1 still broken" in same.stderr
    plain = run_cli("recrawl", "--db", any_db, "-n", cwd=tmp_path)
    assert plain.returncode == 2  # the default is unchanged: any broken link
    site.set_page("/c1", page_html(["/also-dead"]))
    worse = run_cli("recrawl", "--db", any_db, "-n", "--fail-on", "new", cwd=tmp_path)
    assert worse.returncode == 2, worse.stderr
    assert "1 newly broken" in worse.stderr
    full = run_cli("crawl", site.url("/"), "--db", any_db, "-n", "--fail-on", "new", cwd=tmp_path)
    assert full.returncode == 0, full.stderr  # crawl compares with the previous crawl too


def test_recrawl_of_an_empty_database_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("recrawl", "--db", tmp_path / "none.db", "-n", cwd=tmp_path)
    assert result.returncode == 3
    assert "no such database" in result.stderr


def test_recrawl_lays_config_files_environment_and_flags_over_the_previous_crawl(
    site: ConditionalSite, any_db: str, tmp_path: Path
) -> None:
    """Precedence, lowest first: the previous crawl's settings < config files (crawler.toml
    found in the working directory, or the files of ``-c``, lychee.toml with lychee's keys)
    < CRAWLER_* < flags; the ignore files' patterns are added to the exclude list once."""
    first = run_cli(
        "crawl", site.url("/"), "--db", any_db, "-n", "--max-retries", "1", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    (tmp_path / "crawler.toml").write_text('exclude = ["/c1$"]\ntimeout_s = "7s"\n')
    site.reset_counts()
    second = run_cli("recrawl", "--db", any_db, "-n", "--timeout", "9", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    config = store_open.load_record(any_db).config
    assert config["exclude"] == ["/c1$"]  # the file's
    assert config["timeout_s"] == 9  # the flag wins over the file
    assert config["max_retries"] == 1  # the previous crawl's, which nothing changed
    assert site.conditional["/c1"] + site.full["/c1"] == 0  # excluded: never requested

    (tmp_path / "lychee.toml").write_text("max_retries = 3\ntimeout = 5\n")
    (tmp_path / ".crawlerignore").write_text("# not ours\n/a1$\n")
    site.reset_counts()
    for _ in range(2):
        again = run_cli(
            "recrawl",
            "--db",
            any_db,
            "-n",
            "-c",
            str(tmp_path / "lychee.toml"),
            cwd=tmp_path,
            env={"CRAWLER_TIMEOUT_S": "4"},
        )
        assert again.returncode == 0, again.stderr
    config = store_open.load_record(any_db).config
    assert config["max_retries"] == 3  # lychee.toml's key, read with lychee's name
    assert config["timeout_s"] == 4  # the environment wins over the file
    assert config["exclude"] == ["/c1$", "/a1$"]  # the previous crawl's, plus the ignore file
    assert site.conditional["/a1"] + site.full["/a1"] == 0
