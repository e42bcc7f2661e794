"""A directory of built HTML checked as CI checks it: files and lines, not local URLs.

The example site (tests/fixtures/built-site) is deployed at https://example.org/
and links to itself by absolute URL, by extensionless path and by directory; it
has four broken links, each written at a known line and column. Nothing here
reaches the network: the site's own origin is answered from the directory.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from crawler.net.localsite import LocalSite

from kit.clikit import run_cli
from kit.crawlkit import crawl

FIXTURE = Path(__file__).parent / "fixtures" / "built-site"
SCHEMAS = Path(__file__).parent / "schemas"
SITE_ARGS = ("--base-url", "https://example.org/", "--fallback-extensions", "html")


def where(path: Path, needle: str) -> tuple[int, int]:
    """1-based line and column of the first ``needle`` in a file."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(f"{needle!r} not in {path}")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository checkout with the built site in public/."""
    shutil.copytree(FIXTURE, tmp_path / "public")
    return tmp_path


def expected_locations(repo: Path) -> set[tuple[str, str, int, int]]:
    public = repo / "public"
    return {
        (
            "public/missing.html",
            "public/index.html",
            *where(public / "index.html", "/missing.html"),
        ),
        (
            "public/docs/guide.html#nowhere",
            "public/about.html",
            *where(public / "about.html", "docs/guide.html#nowhere"),
        ),
        (
            "public/img/large.png",
            "public/docs/guide.html",
            *where(public / "docs/guide.html", "/img/large.png"),
        ),
        ("public/img/bg.png", "public/style.css", *where(public / "style.css", "/img/bg.png")),
    }


def crawl_cli(repo: Path, *args: str) -> Any:
    return run_cli(
        "crawl", "--root-dir", "public", *SITE_ARGS, "--include-fragments", "-n", *args, cwd=repo
    )


def test_sarif_points_at_files_and_lines_and_validates(repo: Path) -> None:
    result = crawl_cli(repo, "-f", "sarif", "-o", "links.sarif")
    assert result.returncode == 2, result.stderr
    log = json.loads((repo / "links.sarif").read_text(encoding="utf-8"))
    schema = json.loads((SCHEMAS / "sarif-2.1.0-subset.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(log)
    found = set()
    for item in log["runs"][0]["results"]:
        physical = item["locations"][0]["physicalLocation"]
        region = physical["region"]
        url = item["properties"]["url"]
        found.add(
            (url, physical["artifactLocation"]["uri"], region["startLine"], region["startColumn"])
        )
    assert found == expected_locations(repo)
    assert "local.invalid" not in json.dumps(log)


def test_every_format_names_files_with_line_and_column(repo: Path) -> None:
    assert crawl_cli(repo).returncode == 2
    expected = expected_locations(repo)
    spots = {f"{source}:{line}:{column}" for _, source, line, column in expected}
    for fmt in ("text", "json", "markdown", "csv", "junit", "html"):
        result = run_cli("report", "-f", fmt, cwd=repo)
        assert result.returncode == 2, (fmt, result.stderr)
        assert "local.invalid" not in result.stdout, fmt
        for spot in spots:
            assert spot in result.stdout, (fmt, spot)
    doc = json.loads(run_cli("report", "-f", "json", cwd=repo).stdout)
    assert {b["url"] for b in doc["broken"]} == {url for url, *_ in expected}
    rows = list(csv.DictReader(io.StringIO(run_cli("report", "-f", "csv", cwd=repo).stdout)))
    assert {(r["url"], r["source"]) for r in rows} == {
        (url, f"{source}:{line}:{column}") for url, source, line, column in expected
    }


def test_without_fallback_extensions_an_extensionless_link_is_broken(repo: Path) -> None:
    result = run_cli(
        "crawl", "public", "--base-url", "https://example.org/", "-n", "-f", "json", cwd=repo
    )
    assert result.returncode == 2
    broken = {b["url"] for b in json.loads(result.stdout)["broken"]}
    assert "public/about" in broken
    assert "public/missing.html" in broken


def test_a_directory_seed_and_root_dir_are_the_same_crawl(repo: Path) -> None:
    one = run_cli("crawl", "public", *SITE_ARGS, "-n", "-f", "json", "--db", "a.db", cwd=repo)
    two = run_cli(
        "crawl", "--root-dir", "public", *SITE_ARGS, "-n", "-f", "json", "--db", "b.db", cwd=repo
    )
    assert json.loads(one.stdout)["broken"] == json.loads(two.stdout)["broken"]
    assert json.loads(one.stdout)["summary"] == json.loads(two.stdout)["summary"]


def test_local_site_files_index_files_and_fallbacks(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "home.htm").write_text("x")
    (tmp_path / "page.html").write_text("x")
    site = LocalSite(tmp_path.resolve(), "https://example.org/docs/", ("home.htm",), ("html",))
    assert site.contains("https://example.org/docs/d/")
    assert site.contains("https://example.org/docs")
    assert not site.contains("https://example.org/other")
    assert site.file_for("https://example.org/docs/d/") == (tmp_path / "d" / "home.htm").resolve()
    assert site.file_for("https://example.org/docs/page") == (tmp_path / "page.html").resolve()
    assert site.file_for("https://example.org/docs/../../etc/passwd") is None
    assert LocalSite(tmp_path.resolve()).file_for("http://local.invalid/d/") is None
    # a file's name with a slash after it is not the file (its links would resolve
    # one folder too deep): 404, as a web server answers
    assert site.file_for("https://example.org/docs/page.html") == (tmp_path / "page.html").resolve()
    assert site.file_for("https://example.org/docs/page.html/") is None


async def test_remap_sends_an_old_domain_into_the_directory(repo: Path) -> None:
    (repo / "public" / "old.html").write_text(
        '<a href="https://old.example.net/about.html">old</a>'
        '<a href="https://old.example.net/gone.html">gone</a>'
    )
    data = await crawl(
        repo / "c.db",
        ["https://example.org/", "https://example.org/old.html"],
        root_dir=str(repo / "public"),
        base_url="https://example.org/",
        fallback_extensions=["html"],
        remap=[r"^https://old\.example\.net/(.*) https://example.org/$1"],
    )
    broken = {b.url for b in data.broken}
    assert "https://example.org/gone.html" in broken
    assert not any("old.example.net" in url for url in broken)
    assert "https://example.org/about.html" not in broken


def test_a_directory_and_its_index_file_are_one_source(tmp_path: Path) -> None:
    """The seed ``public/`` is ``/``; a page linking back to ``index.html`` makes a
    second URL of the same file. Its broken links are listed once, in the order the
    file writes them (line 9 before line 10, not as strings sort)."""
    public = tmp_path / "public"
    (public / "docs").mkdir(parents=True)
    home = ["<!doctype html><title>home</title>", '<a href="docs/a.html">a</a>']
    home += ["<p>"] * 6 + ['<a href="gone-9.html">nine</a>', '<a href="gone-10.html">ten</a>']
    (public / "index.html").write_text("\n".join(home) + "\n", encoding="utf-8")
    (public / "docs" / "a.html").write_text('<a href="../index.html">home</a>\n')
    result = run_cli("crawl", "public", "-n", "-f", "json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    doc = json.loads(result.stdout)
    assert doc["summary"]["pages"] == 3  # "/" and "/index.html" are both crawled ...
    broken = {b["url"]: b for b in doc["broken"]}
    assert set(broken) == {"public/gone-9.html", "public/gone-10.html"}
    assert broken["public/gone-9.html"]["sources"] == ["public/index.html:9:10"]  # ... listed once
    assert broken["public/gone-10.html"]["locations"] == [
        {"source": "public/index.html", "line": 10, "column": 10}
    ]
    text = run_cli("report", "-f", "text", cwd=tmp_path).stdout
    assert text.count("gone-9.html") == 1
    assert text.count("gone-10.html") == 1
    assert text.index("public/index.html:9:10") < text.index("public/index.html:10:10")
    markdown = run_cli("report", "-f", "markdown", cwd=tmp_path).stdout
    assert markdown.count("gone-9.html") == 1
    assert markdown.index("public/index.html:9:10") < markdown.index("public/index.html:10:10")
    rows = list(csv.DictReader(io.StringIO(run_cli("report", "-f", "csv", cwd=tmp_path).stdout)))
    sources = sorted(r["source"] for r in rows)
    assert sources == ["public/index.html:10:10", "public/index.html:9:10"]
    junit = run_cli("report", "-f", "junit", cwd=tmp_path).stdout
    assert 'tests="4"' in junit  # public/index.html and public/docs/a.html, two broken links
    # A page's broken links are grouped under the page, each with where it is written.
    assert junit.count('classname="public/index.html"') == 3
    assert "at public/index.html:9:10" in junit
    html = run_cli("report", "-f", "html", cwd=tmp_path).stdout
    assert "(2 links on 1 page)" in html


def broken_of(result: Any) -> dict[str, list[str]]:
    assert result.returncode in (0, 2), result.stderr
    return {b["url"]: b["sources"] for b in json.loads(result.stdout)["broken"]}


def test_files_are_seeds_as_lychee_takes_them(repo: Path) -> None:
    public = repo / "public"
    about = where(public / "about.html", "docs/guide.html#nowhere")
    one_page = ("-n", "--max-depth", "0", "--include-fragments", "-f", "json")
    result = run_cli("crawl", "public/about.html", *SITE_ARGS, *one_page, "--db", "a.db", cwd=repo)
    assert broken_of(result) == {
        "public/docs/guide.html#nowhere": [f"public/about.html:{about[0]}:{about[1]}"]
    }
    # Two files: the site is the directory holding both, so /img/large.png is found broken
    # in public/, not in public/docs/.
    guide = where(public / "docs/guide.html", "/img/large.png")
    files = ("public/about.html", "public/docs/guide.html")
    both = broken_of(run_cli("crawl", *files, *SITE_ARGS, *one_page, "--db", "b.db", cwd=repo))
    assert both["public/img/large.png"] == [f"public/docs/guide.html:{guide[0]}:{guide[1]}"]
    assert set(both) == {"public/docs/guide.html#nowhere", "public/img/large.png"}
    # A file in a folder below the root: the root is that folder unless named.
    alone = run_cli("crawl", "public/docs/guide.html", *one_page, "--db", "c.db", cwd=repo)
    assert "public/docs/img/large.png" in broken_of(alone)
    named = run_cli(
        "crawl",
        "public/docs/guide.html",
        "--root-dir",
        "public",
        *one_page,
        "--db",
        "d.db",
        cwd=repo,
    )
    assert "public/img/large.png" in broken_of(named)
    # The report and a resume of the finished crawl still name the files.
    report = run_cli("report", "--db", "d.db", "-f", "json", cwd=repo)
    assert "public/img/large.png" in broken_of(report)


def test_a_file_outside_the_root_is_refused(repo: Path) -> None:
    (repo / "elsewhere.html").write_text('<a href="x.html">x</a>')
    result = run_cli("crawl", "elsewhere.html", "--root-dir", "public", "-n", cwd=repo)
    assert result.returncode == 3
    assert "not inside the local site" in result.stderr
    missing = run_cli("crawl", "public/nothing.html", "-n", cwd=repo)
    assert missing.returncode == 3
    assert "not an http(s) URL, a directory or a file" in missing.stderr


def test_diff_of_a_directory_names_files(tmp_path: Path) -> None:
    public = tmp_path / "public"
    (public / "docs").mkdir(parents=True)
    (public / "index.html").write_text('<a href="docs/a.html">a</a><a href="old-gone.html">x</a>')
    (public / "docs" / "a.html").write_text('<a href="../index.html">home</a>')
    assert run_cli("crawl", "public", "-n", "--db", "site.db", cwd=tmp_path).returncode == 2
    (public / "index.html").write_text('<a href="docs/a.html">a</a><a href="new-gone.html">y</a>')
    assert run_cli("recrawl", "--db", "site.db", "-n", cwd=tmp_path).returncode == 2
    result = run_cli("diff", "--db", "site.db", "-f", "json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "local.invalid" not in result.stdout
    doc = json.loads(result.stdout)
    new = [(link["url"], link["sources"]) for link in doc["new_broken"]]
    assert new == [("public/new-gone.html", ["public/index.html"])]  # "/" and "/index.html"
    fixed = [(link["url"], link["sources"]) for link in doc["fixed"]]
    assert fixed == [("public/old-gone.html", ["public/index.html"])]
    text = run_cli("diff", "--db", "site.db", cwd=tmp_path).stdout
    assert "from public/index.html" in text
    assert "local.invalid" not in text


def test_an_svg_sprite_or_picture_moved_away_is_broken_where_it_is_used(tmp_path: Path) -> None:
    public = tmp_path / "public"
    (public / "img").mkdir(parents=True)
    (public / "img" / "ok.png").write_bytes(b"x")
    lines = [
        "<!doctype html><title>icons</title>",
        '<svg><use xlink:href="img/icons.svg#edit"></use><use href="#here"></use></svg>',
        '<svg id="here"><image href="img/ok.png"/><image xlink:href="img/gone.png"/></svg>',
    ]
    (public / "index.html").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_cli("crawl", "public", "-n", "--include-fragments", "-f", "json", cwd=tmp_path)
    sprite, picture = (where(public / "index.html", f) for f in ("icons.svg", "gone.png"))
    assert broken_of(result) == {
        "public/img/icons.svg": [f"public/index.html:{sprite[0]}:{sprite[1] - 4}"],
        "public/img/gone.png": [f"public/index.html:{picture[0]}:{picture[1] - 4}"],
    }


def test_a_lychee_toml_with_the_built_site_keys_is_the_same_crawl(repo: Path) -> None:
    flags = run_cli(
        "crawl", "--root-dir", "public", *SITE_ARGS, "--include-fragments", "-n", "-f", "json",
        "--db", "a.db", cwd=repo,
    )  # fmt: skip
    (repo / "lychee.toml").write_text(
        'root_dir = "public"\n'
        'base = "https://example.org/"\n'  # lychee's older name of base_url
        'fallback_extensions = ["html"]\n'
        'index_files = ["index.html"]\n'
        'remap = ["^https://old\\\\.example\\\\.org/ https://example.org/"]\n'
        "include_fragments = true\n",
        encoding="utf-8",
    )
    from_file = run_cli("crawl", "-n", "-f", "json", "--db", "b.db", cwd=repo)
    assert from_file.returncode == flags.returncode == 2, from_file.stderr
    assert "ignored lychee keys" not in from_file.stderr
    assert json.loads(from_file.stdout)["broken"] == json.loads(flags.stdout)["broken"]
    assert json.loads(from_file.stdout)["summary"] == json.loads(flags.stdout)["summary"]


def test_a_folder_below_the_root_is_where_the_crawl_starts(repo: Path) -> None:
    """``--root-dir public public/docs``: from the folder's index, links resolved in the site."""
    result = run_cli(
        "crawl", "--root-dir", "public", "public/docs", *SITE_ARGS, "--max-depth", "0",
        "-n", "-f", "json", cwd=repo,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert result.returncode in (0, 2), result.stderr
    assert report["summary"]["pages"] == 1  # public/docs/index.html, its links checked only
    sources = {where["source"] for b in report["broken"] for where in b["locations"]}
    assert sources <= {"public/docs/index.html"}
