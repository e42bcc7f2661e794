"""Every link keeps where its page writes it: line and column, for pages fetched over HTTP.

A loopback site whose broken links sit at known places: CRLF line ends, a tag
spread over three lines, non-ASCII text (accents, CJK, an emoji, and a
windows-1252 page where one character is one byte) before a link, the same
link twice (the first is kept), a link written with ``&amp;``, a srcset
candidate, an inline ``style`` url(), a stylesheet's url(), and a malformed
page. Columns count characters (Unicode code points), not bytes, as editors
and SARIF's ``unicodeCodePoints`` do; lines end at LF, CRLF or a lone CR. The
expected places are computed from the text itself, not typed in.
"""

from __future__ import annotations

import csv
import io
import json
import re
import signal
import subprocess
from pathlib import Path

import pytest
import xmlschema

from crawler import report
from crawler.report.model import ReportData

from kit.clikit import clean_env, cli, run_cli
from kit.crawlkit import crawl, read_report
from kit.pgkit import done_urls
from kit.serve_site import ThreadedSite
from kit.sitekit import Page, Site, SiteServer, wait_until_sync

HOME = (
    "<!doctype html>\r\n"
    "<html><head><title>Positions</title>\r\n"
    '<link rel="stylesheet" href="/style.css">\r\n'
    "</head><body>\r\n"
    '<p>Héllo wörld — 中文 🙂 <a href="/gone-1">one</a></p>\r\n'
    "<a\r\n"
    '   class="multi"\r\n'
    '   href="/gone-2">two</a>\r\n'
    '<a href="/gone-1">one again</a>\r\n'
    '\t<img srcset="/ok.png 1x,  /gone-3.png 2x" src="/ok.png">\r\n'
    '<a href="/q?a=1&amp;b=2">query</a>\r\n'
    '<div style="background: url( /gone-4.png )">x</div>\r\n'
    '<a href="/docs/gone-5">nested path</a> <a href="/gone-5">same tail</a>\r\n'
    '<a href="/bad">malformed</a> <a href="/latin">latin</a>\r\n'
    "</body></html>\r\n"
)
# Unclosed tags, an unquoted attribute, a stray "<", no <html>: still parsed, still placed.
# A tag cut off by the end of the document is no element (as in a browser): not a link.
BAD = (
    "<p><b>bold <i>italic\n< not a tag\n<div><a href=/gone-6 class=x>six\n"
    "<table><a href='/gone-7'>seven (moved before the table by the parser)</table>\n"
    "<a href='/never-seen'"
)
# One byte per character: é is 0xE9. The column counts it once.
LATIN = "<p>caf\u00e9 cr\u00e8me <a href='/gone-8'>eight</a></p>\n"
CSS = 'body { color: red }\n\n  .x { background: url("/gone-9.png") }\n'

BROKEN = {  # broken path -> (source path, what to look for in the source's text)
    "/gone-1": ("/", '/gone-1">one<'),
    "/gone-2": ("/", "/gone-2"),
    "/gone-3.png": ("/", "/gone-3.png"),
    "/q?a=1&b=2": ("/", "/q?a=1&amp;b=2"),
    "/gone-4.png": ("/", "/gone-4.png"),
    "/docs/gone-5": ("/", "/docs/gone-5"),
    "/gone-5": ("/", '"/gone-5"'),
    "/gone-6": ("/bad", "/gone-6"),
    "/gone-7": ("/bad", "/gone-7"),
    "/gone-8": ("/latin", "/gone-8"),
    "/gone-9.png": ("/style.css", "/gone-9.png"),
}
TEXTS = {"/": HOME, "/bad": BAD, "/latin": LATIN, "/style.css": CSS}


def site() -> Site:
    return {
        "/": Page(body=HOME.encode("utf-8")),
        "/bad": Page(body=BAD.encode("utf-8")),
        "/latin": Page(body=LATIN.encode("cp1252"), content_type="text/html; charset=windows-1252"),
        "/style.css": Page(body=CSS.encode("utf-8"), content_type="text/css"),
        "/ok.png": Page(body=b"png", content_type="image/png"),
    }


def where(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column (code points) of ``needle``'s first character in ``text``."""
    at = text.index(needle) + (1 if needle[0] == '"' else 0)
    before = re.split(r"\r\n|\r|\n", text[:at])
    return len(before), len(before[-1]) + 1


def expected(server: SiteServer) -> set[tuple[str, str, int, int]]:
    return {
        (server.url(path), server.url(source), *where(TEXTS[source], needle))
        for path, (source, needle) in BROKEN.items()
    }


def placed(data: ReportData) -> set[tuple[str, str | None, int | None, int | None]]:
    return {(e.url, e.source, e.line, e.column) for e in data.edges}


def test_the_expected_places_are_what_an_editor_shows() -> None:
    """The helper itself: CRLF is one line end; the emoji and CJK are one column each."""
    assert where(HOME, '/gone-1">one<') == (5, 32)
    assert where(HOME, "/gone-2") == (8, 10)
    assert where(LATIN, "/gone-8") == (1, 24)  # 25 bytes in: é and è are one byte each


@pytest.mark.parametrize("parse_helpers", [0, 1], ids=["inline", "helper"])
async def test_every_broken_link_keeps_its_line_and_column(
    site_server, any_db: str, parse_helpers: int
) -> None:
    server = await site_server(site())
    data = await crawl(any_db, [server.url("/")], parse_helpers=parse_helpers)
    assert placed(data) == expected(server)
    # One location per source in the per-URL view (json, text), the same places.
    for link in data.broken:
        assert [(w.source, w.line, w.column) for w in link.locations] == [
            (e.source, e.line, e.column) for e in data.edges if e.url == link.url
        ]


async def test_every_format_shows_line_and_column_for_http_pages(
    site_server, tmp_path: Path
) -> None:
    server = await site_server(site())
    data = await crawl(tmp_path / "c.db", [server.url("/")])
    spots = {f"{source}:{line}:{column}" for _, source, line, column in expected(server)}
    for fmt in ("text", "markdown", "html"):
        rendered = report.render(data, fmt)
        for spot in spots:
            assert spot in rendered, (fmt, spot)
    junit = xmlschema.XMLResource(report.render(read_report(tmp_path / "c.db"), "junit")).root
    texts = {case.findtext("failure") or "" for case in junit.iter("testcase")}
    for spot in spots:
        assert any(f"at {spot}" in text for text in texts), spot
    want = expected(server)
    doc = json.loads(report.render(data, "json"))
    located = [(b["url"], w) for b in doc["broken"] for w in b["locations"]]
    assert {(url, w["source"], w["line"], w["column"]) for url, w in located} == want
    results = read_report(tmp_path / "c.db")
    lines = [json.loads(line) for line in report.render(results, "jsonl").splitlines()]
    located = [(r["url"], w) for r in lines if r["class"] == "broken" for w in r["locations"]]
    assert {(url, w["source"], w["line"], w["column"]) for url, w in located} == {
        spot for spot in want if "?" in spot[0] or "/gone" in spot[0]
    }
    assert all(r["locations"] is None for r in lines if r["class"] == "ok")
    rows = csv.DictReader(io.StringIO(report.render(data, "csv"), newline=""))
    assert {(r["url"], r["source"], int(r["line"]), int(r["column"])) for r in rows} == want
    sarif = json.loads(report.render(data, "sarif"))["runs"][0]
    assert sarif["columnKind"] == "unicodeCodePoints"
    found = set()
    for result in sarif["results"]:
        physical = result["locations"][0]["physicalLocation"]
        region = physical["region"]
        found.add(
            (
                result["properties"]["url"],
                physical["artifactLocation"]["uri"],
                region["startLine"],
                region["startColumn"],
            )
        )
    assert found == want


def test_the_cli_report_shows_them_and_sarif_validates(tmp_path: Path) -> None:
    import jsonschema

    schema_path = Path(__file__).parent / "schemas" / "sarif-2.1.0-subset.json"
    with ThreadedSite(site()) as served:
        home = served.url("/")
        result = run_cli(
            "crawl", served.url("/"), "--db", "c.db", "-n", "-f", "sarif", "-o", "out.sarif",
            cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    log = json.loads((tmp_path / "out.sarif").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(json.loads(schema_path.read_text(encoding="utf-8"))).validate(log)
    text = run_cli("report", "--db", "c.db", cwd=tmp_path).stdout
    assert "{}:{}:{}".format(home, *where(HOME, "/gone-2")) in text


# ---------------------------------------------------------------------------
# a crawl killed with SIGKILL and resumed keeps the positions
# ---------------------------------------------------------------------------

SLOW_PAGES = 12


def slow_site() -> Site:
    """The positions site, plus pages answered slowly so a kill lands mid-crawl."""
    pages = site()
    pages["/"] = Page(
        body=(HOME + "".join(f'<a href="/slow/{i}">s</a>\n' for i in range(SLOW_PAGES))).encode()
    )
    for i in range(SLOW_PAGES):
        body = f"<p>slow {i}</p>\n\n   <a href='/slow-gone/{i}'>x</a>"
        pages[f"/slow/{i}"] = Page(body=body.encode(), delay_s=0.3)
    return pages


def committed(db: str, url: str) -> bool:
    """Is ``url``'s result committed? False while the database is not created yet."""
    try:
        return url in done_urls(db)
    except Exception:  # no schema yet (sqlite3 or asyncpg error): nothing committed
        return False


def test_a_crawl_killed_and_resumed_keeps_every_position(tmp_path: Path, any_db: str) -> None:
    with ThreadedSite(slow_site()) as served:
        home = served.url("/")
        proc = subprocess.Popen(
            cli("crawl", home, "--db", any_db, "-n", "--max-concurrency", "2"),
            cwd=tmp_path,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # Killed once the home page (and its links) is committed, before the slow pages are.
            wait_until_sync(
                lambda: committed(any_db, home) or proc.poll() is not None,
                timeout=60,
                interval=0.01,
                message="the home page committed",
            )
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, "the crawl ended before the kill"
        assert not committed(any_db, served.url(f"/slow/{SLOW_PAGES - 1}"))
        resumed = run_cli("resume", "--db", any_db, "-n", "-f", "json", cwd=tmp_path)
        assert resumed.returncode == 2, resumed.stderr
        data = read_report(any_db)
        slow_text = "<p>slow 0</p>\n\n   <a href='/slow-gone/0'>x</a>"
        line, column = where(slow_text, "/slow-gone/0")
        want = {
            (served.url(path), served.url(source), *where(TEXTS[source], needle))
            for path, (source, needle) in BROKEN.items()
        } | {
            (served.url(f"/slow-gone/{i}"), served.url(f"/slow/{i}"), line, column)
            for i in range(SLOW_PAGES)
        }
        assert placed(data) == want
