"""Link positions are found in the raw text, keyed as the crawl stores links."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.positions import LineIndex, Position, link_positions

PAGE = "https://example.org/dir/page.html"


def test_attributes_srcset_refresh_and_css_each_get_their_position() -> None:
    text = (
        "<html>\r\n"
        "<a href=\"a.html\">a</a> <a href='/b?x=1&amp;y=2'>b</a>\r\n"
        '<img srcset="s1.png 1x,   s2.png 2x" src=plain.png>\n'
        '<meta http-equiv="refresh" content="0; url=/next">\n'
        "<style>@import 'imp.css'; p { background: url( \"bg.png\" ) }</style>\n"
        '<a href="c.html#part">c</a>'
    )
    found = link_positions(text, PAGE)
    lines = text.replace("\r\n", "\n").split("\n")

    def at(needle: str) -> Position:
        for number, line in enumerate(lines, start=1):
            if needle in line:
                return Position(number, line.index(needle) + 1)
        raise AssertionError(needle)

    assert found["https://example.org/dir/a.html"] == at("a.html")
    assert found["https://example.org/b?x=1&y=2"] == at("/b?x=1")
    assert found["https://example.org/dir/s1.png"] == at("s1.png")
    assert found["https://example.org/dir/s2.png"] == at("s2.png")
    assert found["https://example.org/dir/plain.png"] == at("plain.png")
    assert found["https://example.org/next"] == at("/next")
    assert found["https://example.org/dir/imp.css"] == at("imp.css")
    assert found["https://example.org/dir/bg.png"] == at("bg.png")
    assert found["https://example.org/dir/c.html#part"] == at("c.html#part")
    assert found["https://example.org/dir/c.html"] == at("c.html#part")
    assert found["https://example.org/dir/a.html"] == Position(2, 10)  # counted by hand


def test_base_href_and_remaps_are_honoured() -> None:
    import re

    text = '<base href="https://cdn.example.net/x/"><a href="y.html">y</a>'
    remaps = ((re.compile(r"^https://cdn\.example\.net/"), "https://example.org/"),)
    assert link_positions(text, PAGE) == {
        "https://cdn.example.net/x/": Position(1, 13),
        "https://cdn.example.net/x/y.html": Position(1, 50),
    }
    assert "https://example.org/x/y.html" in link_positions(text, PAGE, remaps)


def test_the_first_occurrence_wins() -> None:
    text = '<a href="/x">1</a>\n<a href="/x">2</a>'
    assert link_positions(text, PAGE) == {"https://example.org/x": Position(1, 10)}


def test_line_index_handles_every_line_end() -> None:
    index = LineIndex("ab\ncd\r\nef\rgh")
    assert [index.position(i) for i in (0, 1, 3, 7, 10)] == [
        Position(1, 1),
        Position(1, 2),
        Position(2, 1),
        Position(3, 1),
        Position(4, 1),
    ]


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("<a href=src\"'(url)@import# \n\r\\/:%&;é")), max_size=80)
)
def test_any_text_gives_positions_without_raising(text: str) -> None:
    for position in link_positions(text, PAGE).values():
        assert position.line >= 1
        assert position.column >= 1


def test_locate_finds_each_value_where_it_stands_alone() -> None:
    from crawler.positions import line_columns, locate

    text = '<a href="/docs/a">1</a>\r\n<a href="/a">2</a>\n<a href="/q?x=1&amp;y=2">3</a>'
    values = ["/docs/a", "/a", "/q?x=1&y=2", "/nowhere"]
    offsets = locate(text, values)
    assert offsets[:3] == [text.index("/docs/a"), text.index('"/a"') + 1, text.index("/q?")]
    assert offsets[3] == -1
    assert line_columns(text, offsets[:3]) == [(1, 10), (2, 10), (3, 10)]


def test_locate_with_a_lone_cr_and_a_reordered_element() -> None:
    from crawler.positions import line_columns, locate

    # The parser moves the <a> out of the table, before it: found from the start.
    text = "<p>x</p>\r<table><tr><td>y</td></tr><a href='/late'>z</a></table>\r<a href='/b'>"
    offsets = locate(text, ["/b", "/late"])
    assert line_columns(text, offsets) == [(3, 10), (2, 36)]


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("<a href=src\"'(url)&amp;#/ \n\r\tx,é")), max_size=120)
)
def test_locate_never_raises_and_points_into_the_text(text: str) -> None:
    from crawler.extract import extract_links
    from crawler.positions import line_columns, locate

    values = [raw.url for raw in extract_links(text).links]
    offsets = locate(text, values)
    assert len(offsets) == len(values)
    assert all(-1 <= at < len(text) for at in offsets)
    for line, column in line_columns(text, [at for at in offsets if at >= 0]):
        assert line >= 1
        assert column >= 1


def test_locate_finds_values_written_with_character_references_without_the_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from crawler import positions

    def no_scan(text: str) -> dict[str, list[int]]:
        raise AssertionError("the page was scanned")

    monkeypatch.setattr(positions, "_scan", no_scan)
    # As Sphinx writes them: "@" and "%" as numeric references, "&" as "&amp;".
    text = (
        '<a href="https://lists.example/list/dev&#64;example.org/">l</a>\n'
        '<a href="mailto:docs&#37;&#52;0example.org">m</a>\n'
        "<a href='https://bugs.example/issue?&#64;action=x&amp;bpo=1'>b</a>\n"
        "<a href=https://lists.example/list/dev&#64;example.org/>again</a>"
    )
    values = [
        "https://lists.example/list/dev@example.org/",
        "mailto:docs%40example.org",
        "https://bugs.example/issue?@action=x&bpo=1",
        "https://lists.example/list/dev@example.org/",
    ]
    starts = [
        text.index("https://lists"),
        text.index("mailto:"),
        text.index("https://bugs"),
        text.rindex("https://lists"),
    ]
    assert positions.locate(text, values) == starts


_WRITTEN = st.sampled_from(["a", "b", "/", "@", "&", "%", "é", " ", "?", "="])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(_WRITTEN, min_size=1, max_size=12), st.booleans(), st.booleans()),
        max_size=30,
    ),
    st.sampled_from(["https://x.example/", "/docs/", "mail"]),
)
def test_locate_reads_character_references_as_the_scan_does(
    links: list[tuple[list[str], bool, bool]], prefix: str
) -> None:
    """The searches by plain prefix find what the page's one scan would find."""
    import html

    from crawler import positions
    from crawler.extract import extract_links

    parts = []
    for chars, escape_all, single in links:
        value = prefix + "".join(chars)
        written = "".join(f"&#{ord(c)};" if escape_all or c in "@%" else c for c in value)
        written = written.replace("&", "&amp;") if not escape_all else written
        quote = "'" if single else '"'
        parts.append(f"<a href={quote}{html.escape(value) if not escape_all else written}{quote}>")
        parts.append(f"<img src={quote}{written}{quote}>\n")
    text = "".join(parts)
    values = [raw.url for raw in extract_links(text).links]
    searched = positions.locate(text, values)
    with pytest.MonkeyPatch.context() as patch:  # no budget: the scan finds them all
        patch.setattr(positions, "ESCAPED_BUDGET", 0)
        patch.setattr(positions, "ESCAPED_BUDGET_PER_CHAR", 0)
        assert searched == positions.locate(text, values)
