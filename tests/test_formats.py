"""Every report format, rendered from one real crawl of a loopback site, and validated.

The site has broken links (404s, a refused connection, a redirect loop, a redirect
ending in a 404, a redirect to a mailto: with hostile characters in its Location, a
missing #fragment), a working redirect, a skipped mailto: link, a bot wall (blocked, not
broken), and URLs and error texts holding characters
each format must escape: ``"``, ``<``, ``|``, ``,``, backticks and non-ASCII. The crawler
stores URLs normalized (``"<|`ü`` percent-encoded, ``,`` and ``'`` kept); the raw
characters reach the formats through error texts, and the hand-built report at the end
puts them raw into URLs too.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import dataclasses
import hashlib
import io
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
import pytest
import xmlschema
from markdown_it import MarkdownIt

from crawler import __version__, report, urls
from crawler.errors import FailureKind
from crawler.models import CrawlRecord
from crawler.report import jsonl as jsonl_format
from crawler.report import markdown as markdown_format
from crawler.report import model
from crawler.store.sqlite import db, results
from crawler.store.sqlite import report as sqlite_report

from kit.browser import INSTALL_TIMEOUT_S, chromium_or_skip, dump_dom
from kit.crawlkit import crawl
from kit.ports import refused_port
from kit.sitekit import Page, SiteServer

SCHEMAS = Path(__file__).parent / "schemas"
ODD_LINK = '/odd"<b>|x,ü'  # a broken link with characters to escape
ODD_PAGE = '/page,"ü"|<i>'  # a source page with them
TICK_LINK = "/tick`s"
BAD_LOCATION = 'mailto:"<script>|`x`,ü'  # echoed raw into an error text
SEED_SOURCE = "(seed)"

Pair = tuple[str, str | None]  # (broken URL, source page or None for a seed)


# ---------------------------------------------------------------------------
# the crawl every test reads
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Crawled:
    db_path: Path
    origin: str
    refused: str
    data: report.ReportData

    def url(self, path: str) -> str:
        """The stored (normalized) form of a link on the site's home page."""
        return urls.normalize(urls.resolve(path, self.origin + "/"))[0]


async def _crawl_site(db_path: Path) -> Crawled:
    with refused_port() as port:
        return await _crawl_site_refusing(db_path, f"http://127.0.0.1:{port}/refused")


async def _crawl_site_refusing(db_path: Path, refused: str) -> Crawled:
    site = {
        "/": Page(
            links=[
                "/gone",
                "/old",
                "mailto:someone@example.org",
                ODD_LINK,
                "/self",
                "/via-redirect",
                TICK_LINK,
                "/bad-redirect",
                refused,
                ODD_PAGE,
                "/page2",
                "/page2#nowhere",
                "/wall",
            ]
        ),
        "/old": Page(redirect_to="/new"),
        "/new": Page(),
        "/self": Page(redirect_to="/self"),
        "/via-redirect": Page(redirect_to="/missing"),
        "/bad-redirect": Page(redirect_to=BAD_LOCATION),
        "/page2": Page(links=["/gone"], assets=["/missing.png"]),
        "/wall": Page(status=999),  # a bot wall: blocked, not broken
        ODD_PAGE: Page(links=["/gone", "/also-gone"]),
    }
    async with SiteServer(site) as server:
        data = await crawl(db_path, [server.url("/")], include_fragments=True)
        return Crawled(db_path, server.origin, refused, data)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    return asyncio.run(_crawl_site(tmp_path_factory.mktemp("formats") / "crawl.db"))


@pytest.fixture
def reader(crawled: Crawled) -> Iterator[sqlite3.Connection]:
    conn = db.open_reader(crawled.db_path)
    yield conn
    conn.close()


def expected_pairs(c: Crawled) -> set[Pair]:
    home, page2, odd_page = c.url("/"), c.url("/page2"), c.url(ODD_PAGE)
    from_home = ["/gone", ODD_LINK, "/self", "/via-redirect", TICK_LINK, "/bad-redirect"]
    return (
        {(c.url(path), home) for path in from_home}
        | {(c.refused, home)}
        | {(c.url("/gone"), page2), (c.url("/missing.png"), page2)}
        | {(c.url("/gone"), odd_page), (c.url("/also-gone"), odd_page)}
        | {(c.url("/page2") + "#nowhere", home)}
    )


def edge_pairs(data: report.ReportData) -> set[Pair]:
    return {(e.url, e.source) for e in data.edges}


def reason(status: int | None, error: str | None) -> str:
    return error or (str(status) if status is not None else "broken")


# ---------------------------------------------------------------------------
# the read side and the registry
# ---------------------------------------------------------------------------


def test_formats_are_registered_in_order() -> None:
    assert report.FORMATS == ("text", "json", "jsonl", "markdown", "csv", "junit", "sarif", "html")


def test_an_unknown_format_is_refused_with_the_choices(crawled: Crawled) -> None:
    with pytest.raises(ValueError, match="choose from text, json"):
        report.render(crawled.data, "yaml")


def test_the_crawl_has_what_the_formats_must_show(crawled: Crawled) -> None:
    data = crawled.data
    assert data.crawl.state == "finished"
    assert edge_pairs(data) == expected_pairs(crawled)
    assert data.summary.skipped >= 1  # the mailto: link
    assert data.summary.redirected >= 1  # /old -> /new
    assert data.summary.blocked == 1  # /wall
    assert data.need_pages() == sorted(crawled.url(p) for p in ("/", "/new", "/page2", ODD_PAGE))
    kinds = {e.url: e.kind for e in data.edges}
    assert kinds[crawled.url("/gone")] == FailureKind.HTTP_STATUS
    assert kinds[crawled.refused] == FailureKind.CONNECTION
    assert kinds[crawled.url("/self")] == FailureKind.REDIRECT_LOOP
    assert kinds[crawled.url("/via-redirect")] == FailureKind.HTTP_STATUS  # ends in a 404
    assert kinds[crawled.url("/bad-redirect")] == FailureKind.INVALID_RESPONSE
    assert kinds[crawled.url("/page2") + "#nowhere"] == model.FRAGMENT_KIND
    odd = next(e for e in data.edges if e.url == crawled.url("/bad-redirect"))
    assert BAD_LOCATION in (odd.error or "")  # raw characters reach the formats here
    assert {e.elements for e in data.edges if e.url.endswith("/missing.png")} == {("img",)}


def test_edges_and_broken_links_are_the_same_rows(crawled: Crawled) -> None:
    data = crawled.data
    from_broken = {(b.url, source) for b in data.broken for source in (b.sources or [None])}
    assert from_broken == edge_pairs(data)
    by_url = {b.url: (b.status, b.error) for b in data.broken}
    assert all(by_url[e.url] == (e.status, e.error) for e in data.edges)


def test_load_reads_only_what_the_format_needs(reader: sqlite3.Connection) -> None:
    text_data = sqlite_report.load(reader, None, "text")
    assert text_data.pages is None
    assert text_data.results is None
    with pytest.raises(ValueError, match=r"report\.load\(conn, crawl_id, fmt\)"):
        report.render(text_data, "junit")
    with pytest.raises(ValueError, match="results"):
        report.render(text_data, "jsonl")
    assert sqlite_report.load(reader, None, "junit").pages is not None
    assert sqlite_report.load(reader, None, "jsonl").results is not None


# ---------------------------------------------------------------------------
# every format shows the same broken links
# ---------------------------------------------------------------------------


def page_of(shown: str) -> str:
    """The page of ``page:line:column`` (how people-facing formats name a source)."""
    page, line, column = shown.rsplit(":", 2)
    assert line.isdigit(), shown
    assert column.isdigit(), shown
    return page


def pairs_from_text(text: str) -> set[Pair]:
    pairs: set[Pair] = set()
    source: str | None = None
    for line in text.splitlines()[1:]:
        if line.startswith("  ✗ "):
            pairs.add((line[4:].split("  [", 1)[0], source))
        elif line:
            source = None if line == SEED_SOURCE else page_of(line)
    return pairs


def pairs_from_json(text: str) -> set[Pair]:
    doc = json.loads(text)
    return {(b["url"], s) for b in doc["broken"] for s in (b["sources"] or [None])}


def pairs_from_csv(text: str) -> set[Pair]:
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    return {(row["url"], row["source"] or None) for row in rows}


def pairs_from_junit(text: str) -> set[Pair]:
    root = xmlschema.XMLResource(text).root
    return {
        (case.get("name"), None if case.get("classname") == SEED_SOURCE else case.get("classname"))
        for case in root.iter("testcase")
        if case.find("failure") is not None
    }


def pairs_from_sarif(text: str) -> set[Pair]:
    pairs: set[Pair] = set()
    for result in json.loads(text)["runs"][0]["results"]:
        url = result["properties"]["url"]
        where = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        pairs.add((url, None if where == url else where))
    return pairs


def pairs_from_markdown(text: str) -> set[Pair]:
    pairs: set[Pair] = set()
    for source, rows in markdown_sections(text).items():
        for cells in rows:
            pairs.add((cells[0], None if source == SEED_SOURCE else page_of(source)))
    return pairs


def pairs_from_html(text: str) -> set[Pair]:
    return {
        (row.attrs["data-url"], row.attrs["data-source"] or None) for row in parse_html(text).rows
    }


PAIRS_FROM = {
    "text": pairs_from_text,
    "json": pairs_from_json,
    "markdown": pairs_from_markdown,
    "csv": pairs_from_csv,
    "junit": pairs_from_junit,
    "sarif": pairs_from_sarif,
    "html": pairs_from_html,
}


@pytest.mark.parametrize("fmt", sorted(PAIRS_FROM))
def test_every_format_shows_the_same_broken_links(crawled: Crawled, fmt: str) -> None:
    rendered = report.render(crawled.data, fmt)
    assert rendered.endswith("\n")
    assert PAIRS_FROM[fmt](rendered) == expected_pairs(crawled)


# ---------------------------------------------------------------------------
# json
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report_schema() -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / "report.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def test_json_matches_its_schema_and_the_data(crawled: Crawled, report_schema: Any) -> None:
    doc = json.loads(report.render(crawled.data, "json"))
    report_schema.validate(doc)
    assert doc["summary"]["broken"] == crawled.data.summary.broken
    assert [b["url"] for b in doc["broken"]] == sorted(b["url"] for b in doc["broken"])
    odd = next(b for b in doc["broken"] if b["url"] == crawled.url("/bad-redirect"))
    assert BAD_LOCATION in odd["error"]


@pytest.mark.parametrize(
    "breakage",
    [
        pytest.param(lambda d: d["summary"].pop("pending"), id="missing-count"),
        pytest.param(lambda d: d["crawl"].update(extra=1), id="unknown-key"),
        pytest.param(lambda d: d["broken"][0].update(status="404"), id="status-as-string"),
        pytest.param(lambda d: d["crawl"].update(state="paused"), id="unknown-state"),
        pytest.param(lambda d: d["broken"][0].pop("sources"), id="missing-sources"),
    ],
)
def test_the_json_schema_catches_a_changed_shape(
    crawled: Crawled, report_schema: Any, breakage: Any
) -> None:
    doc = json.loads(report.render(crawled.data, "json"))
    breakage(doc)
    with pytest.raises(jsonschema.ValidationError):
        report_schema.validate(doc)


# ---------------------------------------------------------------------------
# jsonl
# ---------------------------------------------------------------------------


JSONL_KEYS = [
    "url",
    "class",
    "status",
    "error",
    "content_type",
    "elapsed_ms",
    "checked_at",
    "locations",
]


def test_jsonl_has_one_line_per_checked_url(crawled: Crawled, reader: sqlite3.Connection) -> None:
    text = report.render(crawled.data, "jsonl")
    records = [json.loads(line) for line in text.splitlines()]
    (checked,) = reader.execute(
        "SELECT count(*) FROM result r JOIN url u ON u.id = r.url_id WHERE u.crawl_id = ?",
        (crawled.data.crawl.id,),
    ).fetchone()
    assert len(records) == checked == len(text.split("\n")) - 1
    assert all(list(record) == JSONL_KEYS for record in records)
    assert len({r["url"] for r in records}) == len(records)
    assert [r["checked_at"] for r in records] == sorted(r["checked_at"] for r in records)
    classes = Counter(r["class"] for r in records)
    s = crawled.data.summary
    for name in ("ok", "redirected", "skipped", "excluded", "blocked"):
        assert classes[name] == getattr(s, name), name
    fragments = {e.url for e in crawled.data.edges if e.kind == model.FRAGMENT_KIND}
    assert classes["broken"] == s.broken - len(fragments)  # a #fragment is a link, not a URL
    by_url = {r["url"]: r for r in records}
    assert by_url["mailto:someone@example.org"]["class"] == "skipped"
    assert by_url[crawled.url("/old")]["class"] == "redirected"
    assert by_url[crawled.url("/gone")]["status"] == 404
    assert by_url[crawled.url("/via-redirect")]["class"] == "broken"  # after its chain


def test_jsonl_streams_from_the_database_and_resumes_after_a_cursor(
    crawled: Crawled, reader: sqlite3.Connection
) -> None:
    crawl_id = crawled.data.crawl.id
    rows = list(results.iter_results(reader, crawl_id))
    assert "".join(jsonl_format.lines(rows)) == report.render(crawled.data, "jsonl")
    for cut in (0, 1, len(rows) // 2, len(rows) - 1):
        rest = list(results.iter_results(reader, crawl_id, after=rows[cut].cursor))
        assert rest == rows[cut + 1 :]
    assert list(results.iter_results(reader, crawl_id, after=rows[-1].cursor)) == []


# ---------------------------------------------------------------------------
# markdown
# ---------------------------------------------------------------------------


def markdown_blocks(text: str) -> list[tuple[str, Any]]:
    """("h2"|"h3", text) and ("table", [cells per row]) in document order, as GFM reads them."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    blocks: list[tuple[str, Any]] = []
    row: list[str] | None = None
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            blocks.append((token.tag, _inline_text(tokens[i + 1])))
        elif token.type == "table_open":
            blocks.append(("table", []))
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open") and row is not None:
            row.append(_inline_text(tokens[i + 1]))
        elif token.type == "tr_close" and row is not None:
            blocks[-1][1].append(row)
            row = None
    return blocks


def _inline_text(token: Any) -> str:
    return "".join(child.content for child in token.children or [] if child.content)


def markdown_sections(text: str) -> dict[str, list[list[str]]]:
    """Source page -> rows (link, status, error) of its table."""
    sections: dict[str, list[list[str]]] = {}
    heading = None
    for kind, value in markdown_blocks(text):
        if kind == "h3":
            heading = value
        elif kind == "table" and heading is not None:
            assert value[0] == ["broken link", "status", "error"]
            sections[heading] = value[1:]
            heading = None
    return sections


def test_markdown_is_a_summary_and_a_table_per_source_page(crawled: Crawled) -> None:
    text = report.render(crawled.data, "markdown")
    blocks = markdown_blocks(text)
    assert blocks[0] == ("h2", "Link check")
    summary = blocks[1][1]
    s = crawled.data.summary
    assert summary[0] == [field.name for field in dataclasses.fields(s)]
    assert summary[1] == [str(getattr(s, name)) for name in summary[0]]
    sections = markdown_sections(text)
    assert list(sections) == sorted(sections)
    for source, rows in sections.items():
        edges = {e.url: e for e in crawled.data.edges if e.shown_source == source}
        assert [cells[0] for cells in rows] == sorted(edges)
        for link, status, error in rows:
            edge = edges[link]
            assert status == (str(edge.status) if edge.status is not None else "—")
            assert error == reason(edge.status, edge.error)  # escaping undone exactly


def test_markdown_table_rows_have_as_many_cells_as_their_header(crawled: Crawled) -> None:
    text = report.render(crawled.data, "markdown")
    table: list[int] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            table.append(len(re.findall(r"(?<!\\)\|", line)))
        elif table:
            assert len(set(table)) == 1, table
            table = []
    assert f"`{crawled.url(TICK_LINK)}`" in text  # no backtick inside: a plain code span


def test_markdown_stops_before_github_comment_limit(crawled: Crawled) -> None:
    text = markdown_format.render(crawled.data, max_chars=100)
    assert len(markdown_sections(text)) == 1
    assert "more broken links on" in text


# ---------------------------------------------------------------------------
# csv
# ---------------------------------------------------------------------------


def test_csv_round_trips_one_row_per_broken_link_and_source(crawled: Crawled) -> None:
    text = report.render(crawled.data, "csv")
    assert text.endswith("\r\n")
    assert "\n" not in text.replace("\r\n", "")
    rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    assert rows[0] == ["url", "status", "error", "source", "element", "line", "column"]
    expected = [
        [
            e.url,
            "" if e.status is None else str(e.status),
            e.error or "",
            e.source or "",
            " ".join(e.elements),
            "" if e.line is None else str(e.line),
            "" if e.column is None else str(e.column),
        ]
        for e in crawled.data.edges
    ]
    assert rows[1:] == expected
    assert any('"' in row[2] and "," in row[2] for row in rows[1:])  # quoting was needed


# ---------------------------------------------------------------------------
# junit
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def junit_schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))


def test_junit_is_valid_and_counts_pages_and_broken_links(
    crawled: Crawled, junit_schema: xmlschema.XMLSchema
) -> None:
    text = report.render(crawled.data, "junit")
    junit_schema.validate(text)
    root = xmlschema.XMLResource(text).root
    assert root.tag == "testsuite"
    assert root.get("name") == "crawler"
    pages = crawled.data.need_pages()
    edges = crawled.data.edges
    cases = list(root.iter("testcase"))
    assert int(root.get("tests")) == len(cases) == len(pages) + len(edges)
    assert int(root.get("failures")) == len(edges)
    passing = [c for c in cases if c.find("failure") is None]
    assert sorted(c.get("name") for c in passing) == pages
    assert all(c.get("classname") == c.get("name") for c in passing)
    by_pair = {(e.url, e.source): e for e in edges}
    for case in cases:
        failure = case.find("failure")
        if failure is not None:
            edge = by_pair[(case.get("name"), case.get("classname"))]
            assert failure.get("message") == reason(edge.status, edge.error)
            assert failure.get("type") == edge.kind
            assert edge.url in (failure.text or "")


@pytest.mark.parametrize(
    "document",
    [
        pytest.param('<testsuite name="x" failures="0" errors="0"/>', id="no-tests-count"),
        pytest.param(
            '<testsuite name="x" tests="1" failures="1" errors="0"><failure/></testsuite>',
            id="failure-outside-testcase",
        ),
        pytest.param(
            '<testsuite name="x" tests="1" failures="0" errors="0"><testcase/></testsuite>',
            id="testcase-without-name",
        ),
        pytest.param(
            '<testsuite name="x" tests="1" failures="0" errors="0" time="fast"/>',
            id="time-not-a-number",
        ),
        pytest.param(
            '<testsuite name="x" tests="1" failures="0" errors="0"><test name="a"/></testsuite>',
            id="unknown-element",
        ),
    ],
)
def test_the_junit_schema_rejects_malformed_files(
    junit_schema: xmlschema.XMLSchema, document: str
) -> None:
    assert not junit_schema.is_valid(document)


# ---------------------------------------------------------------------------
# sarif
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_schema() -> jsonschema.Draft7Validator:
    schema = json.loads((SCHEMAS / "sarif-2.1.0-subset.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())


URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")


def test_sarif_is_valid_with_a_rule_per_failure_kind(crawled: Crawled, sarif_schema: Any) -> None:
    log = json.loads(report.render(crawled.data, "sarif"))
    sarif_schema.validate(log)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("crawler", __version__)
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert set(rule_ids) >= {str(kind) for kind in FailureKind}
    assert run["invocations"][0]["executionSuccessful"] is True
    by_pair = {(e.url, e.source): e for e in crawled.data.edges}
    assert len(run["results"]) == len(by_pair)
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert URI.fullmatch(uri), uri
        edge = by_pair[(result["properties"]["url"], uri)]
        assert result["ruleId"] == edge.kind
        message = result["message"]["text"]
        assert edge.url in message
        assert (f"status {edge.status}" if edge.status else "no HTTP status") in message


@pytest.mark.parametrize(
    "breakage",
    [
        pytest.param(lambda log: log.update(version="2.0.0"), id="wrong-version"),
        pytest.param(lambda log: log.pop("runs"), id="no-runs"),
        pytest.param(lambda log: log["runs"][0]["tool"]["driver"].pop("name"), id="no-name"),
        pytest.param(lambda log: log["runs"][0]["results"][0].pop("message"), id="no-message"),
        pytest.param(lambda log: log["runs"][0]["results"][0].update(level="fatal"), id="level"),
        pytest.param(lambda log: log["runs"][0].update(extra=1), id="unknown-key"),
        pytest.param(lambda log: log.update({"$schema": "https://example.org/x"}), id="schema-uri"),
    ],
)
def test_the_sarif_schema_catches_malformed_logs(
    crawled: Crawled, sarif_schema: Any, breakage: Any
) -> None:
    log = json.loads(report.render(crawled.data, "sarif"))
    breakage(log)
    with pytest.raises(jsonschema.ValidationError):
        sarif_schema.validate(log)


# ---------------------------------------------------------------------------
# html
# ---------------------------------------------------------------------------


@dataclass
class Row:
    attrs: dict[str, str]
    cells: list[str]

    @property
    def hidden(self) -> bool:
        return "hidden" in self.attrs


class HtmlDoc(HTMLParser):
    """The parts of a report page the tests look at."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.rows: list[Row] = []
        self.bodies: list[dict[str, str]] = []
        self.texts: dict[str, str] = {}  # element id -> text
        self._raw: str | None = None
        self._buffer: list[str] = []
        self._row: Row | None = None
        self._cell: list[str] | None = None
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.elements.append((tag, values))
        if tag in ("script", "style"):
            self._raw, self._buffer = tag, []
        elif tag == "tbody" and "data-source" in values:  # a source page's group
            self.bodies.append(values)
        elif tag == "tr" and "link" in values.get("class", "").split():
            self._row = Row(values, [])
        elif tag == "td" and self._row is not None:
            self._cell = []
        if "id" in values:
            self._id = values["id"]
            self.texts[self._id] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == self._raw:
            (self.scripts if tag == "script" else self.styles).append("".join(self._buffer))
            self._raw = None
        elif tag == "td" and self._row is not None and self._cell is not None:
            self._row.cells.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        self._id = None

    def handle_data(self, data: str) -> None:
        if self._raw:
            self._buffer.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._id is not None:
            self.texts[self._id] += data


def parse_html(text: str) -> HtmlDoc:
    doc = HtmlDoc()
    doc.feed(text)
    doc.close()
    return doc


def csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def test_html_is_self_contained_and_escapes_everything(crawled: Crawled) -> None:
    text = report.render(crawled.data, "html")
    doc = parse_html(text)
    assert len(doc.scripts) == 1
    assert len(doc.styles) == 1
    assert not [(tag, a) for tag, a in doc.elements if "src" in a or tag in ("link", "iframe")]
    assert all(not name.startswith("on") for _, a in doc.elements for name in a)
    (csp,) = [
        a["content"] for tag, a in doc.elements if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert "default-src 'none'" in csp
    assert csp_hash(doc.scripts[0]) in csp
    assert csp_hash(doc.styles[0]) in csp
    rows = {(r.attrs["data-url"], r.attrs["data-source"] or None): r for r in doc.rows}
    for edge in crawled.data.edges:
        row = rows[(edge.url, edge.source)]
        assert row.cells[0] == edge.url
        assert row.cells[2] == reason(edge.status, edge.error)
        assert row.cells[3] == (edge.shown_source or SEED_SOURCE)
        assert not row.hidden
    assert "<script>|" not in text  # the raw Location in an error text is escaped
    assert "&lt;script&gt;|`x`,ü" in text
    hrefs = [a["href"] for tag, a in doc.elements if tag == "a"]
    assert all(href.startswith("http://") for href in hrefs)


def test_html_groups_broken_links_by_source_page(crawled: Crawled) -> None:
    doc = parse_html(report.render(crawled.data, "html"))
    sources = [body["data-source"] for body in doc.bodies]
    expected = sorted({e.source or "" for e in crawled.data.edges})
    assert sources == expected
    for source in sources:
        urls_in_group = [r.attrs["data-url"] for r in doc.rows if r.attrs["data-source"] == source]
        assert urls_in_group == sorted(urls_in_group)


def visible_rows(doc: HtmlDoc) -> list[Row]:
    return [row for row in doc.rows if not row.hidden]


def searchable(edge: Any) -> str:
    status = "" if edge.status is None else str(edge.status)
    source = edge.source or ""
    parts = (
        edge.url,
        unquote(edge.url),
        status,
        reason(edge.status, edge.error),
        source,
        unquote(source),
    )
    return " ".join(parts).lower()


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 60)  # the first run may install Chromium
def test_html_in_headless_chromium_shows_filters_and_sorts(
    crawled: Crawled, tmp_path: Path
) -> None:
    chromium = chromium_or_skip()
    page = tmp_path / "report.html"
    page.write_text(report.render(crawled.data, "html"), encoding="utf-8")
    edges = crawled.data.edges

    plain = parse_html(dump_dom(page, chromium=chromium))
    assert len(visible_rows(plain)) == len(edges)
    assert {r.cells[0] for r in plain.rows} == {e.url for e in edges}
    assert plain.texts["shown"] == ""

    # "ü" percent-encoded in the fragment; it matches decoded URLs and raw error texts.
    dom = parse_html(dump_dom(page, fragment="filter=%C3%BC&sort=-status", chromium=chromium))
    wanted = {(e.url, e.source or "") for e in edges if "ü" in searchable(e)}
    assert 0 < len(wanted) < len(edges)
    shown = {(r.attrs["data-url"], r.attrs["data-source"]) for r in visible_rows(dom)}
    assert shown == wanted
    assert dom.texts["shown"] == f"{len(wanted)} of {len(edges)} shown"
    by_key = {a["data-key"]: a for tag, a in dom.elements if tag == "th" and "data-key" in a}
    assert by_key["status"]["aria-sort"] == "descending"
    assert by_key["source"]["aria-sort"] == "none"
    for body in dom.bodies:
        statuses = [
            int(r.attrs["data-status"] or 1000)
            for r in dom.rows
            if r.attrs["data-source"] == body["data-source"]
        ]
        assert statuses == sorted(statuses, reverse=True)
    for body in dom.bodies:
        has_visible = any(r.attrs["data-source"] == body["data-source"] for r in visible_rows(dom))
        assert ("hidden" in body) is not has_visible


# ---------------------------------------------------------------------------
# hostile data straight into the formats (raw characters in URLs, too)
# ---------------------------------------------------------------------------


HOSTILE_URL = 'https://x.test/a"<script>alert(1)</script>|b,c`d`ü'
HOSTILE_SOURCE = 'https://x.test/p|`<i>`,"q"'
HOSTILE_ERROR = 'redirects to "<img src=x onerror=alert(1)>" | `tick` ,\x00\x1b end'
SHOWN_ERROR = HOSTILE_ERROR.replace("\x00", "\ufffd").replace("\x1b", "\ufffd")  # for people


def hostile_data() -> report.ReportData:
    crawl_record = CrawlRecord(
        id=7,
        seeds=["https://x.test/"],
        config={},
        state="running",
        started_at=1_700_000_000.0,
        finished_at=None,
        elapsed_s=1.5,
    )
    summary = model.Summary(
        pages=2, links=3, ok=1, redirected=0, broken=2, skipped=0, excluded=0, pending=4
    )
    broken = [
        model.BrokenLink("javascript:alert(1)", None, "invalid URL", []),
        model.BrokenLink(HOSTILE_URL, 404, HOSTILE_ERROR, [HOSTILE_SOURCE]),
    ]
    edges = [
        model.BrokenEdge("javascript:alert(1)", None, "invalid URL", "invalid_url", None, ()),
        model.BrokenEdge(HOSTILE_URL, 404, HOSTILE_ERROR, "http_status", HOSTILE_SOURCE, ("a",)),
    ]
    rows = [model.ResultRow(1, HOSTILE_URL, "broken", 404, HOSTILE_ERROR, None, 3, 1_700_000_001.0)]
    return report.ReportData(
        crawl_record,
        summary,
        broken,
        edges,
        pages=["https://x.test/", HOSTILE_SOURCE],
        results=rows,
    )


def test_hostile_text_cannot_break_any_format(
    report_schema: Any, junit_schema: xmlschema.XMLSchema, sarif_schema: Any
) -> None:
    data = hostile_data()
    report_schema.validate(json.loads(report.render(data, "json")))
    (line,) = report.render(data, "jsonl").splitlines()
    assert json.loads(line)["error"] == HOSTILE_ERROR

    rows = list(csv.reader(io.StringIO(report.render(data, "csv"), newline=""), strict=True))
    assert rows[2] == [HOSTILE_URL, "404", HOSTILE_ERROR, HOSTILE_SOURCE, "a", "", ""]

    junit = report.render(data, "junit")
    junit_schema.validate(junit)
    failures = [c for c in xmlschema.XMLResource(junit).root.iter("testcase") if len(c)]
    assert failures[1].get("name") == HOSTILE_URL
    assert failures[1].get("classname") == HOSTILE_SOURCE
    assert failures[1][0].get("message") == SHOWN_ERROR

    sarif_schema.validate(json.loads(report.render(data, "sarif")))

    sections = markdown_sections(report.render(data, "markdown"))
    assert sections[HOSTILE_SOURCE][0][0] == HOSTILE_URL
    assert sections[HOSTILE_SOURCE][0][2] == " ".join(SHOWN_ERROR.split())
    assert sections[SEED_SOURCE][0][0] == "javascript:alert(1)"

    doc = parse_html(report.render(data, "html"))
    assert len(doc.scripts) == 1
    assert not [a for tag, a in doc.elements if tag == "img" or "onerror" in a]
    assert [a["href"] for tag, a in doc.elements if tag == "a"] == [HOSTILE_SOURCE, HOSTILE_URL]
    cells = {r.attrs["data-url"]: r.cells for r in doc.rows}
    assert cells[HOSTILE_URL][:3] == [HOSTILE_URL, "404", SHOWN_ERROR]
    assert cells["javascript:alert(1)"][1] == "—"


def test_a_crawl_without_broken_links_says_so() -> None:
    data = hostile_data()
    clean = report.ReportData(
        data.crawl, data.summary, [], [], pages=["https://x.test/"], results=[]
    )
    assert "No broken links found." in report.render(clean, "markdown")
    assert "No broken links." in report.render(clean, "html")
    assert report.render(clean, "csv") == "url,status,error,source,element,line,column\r\n"
    assert report.render(clean, "jsonl") == ""
    assert json.loads(report.render(clean, "sarif"))["runs"][0]["results"] == []
    junit = xmlschema.XMLResource(report.render(clean, "junit")).root
    assert (junit.get("tests"), junit.get("failures")) == ("1", "0")
