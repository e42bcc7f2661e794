"""Link extraction: decoding, every link-bearing element, and hostile input."""

from __future__ import annotations

import codecs
import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler import extract as extract_module
from crawler.extract import (
    _DEPTH_TAG,
    _UNNESTED,
    MAX_DEPTH,
    _max_depth,
    decode_html,
    encoding_from_label,
    extract_css_urls,
    extract_links,
    parse_srcset,
    refresh_url,
)
from crawler.models import RawLink

# --- extract_links -------------------------------------------------------------


def test_every_link_bearing_element_in_document_order() -> None:
    html = """<!doctype html><html><head>
    <link rel=stylesheet href=style.css><link rel=icon href=/favicon.ico>
    <link rel=canonical href="https://example.com/"><script src=app.js></script>
    <meta http-equiv=refresh content="5; url=/next"></head><body>
    <a href=/page>x</a><map><area href=area.html></map>
    <img src=i.png srcset="i1.png 1x, i2.png 2x">
    <picture><source srcset="s.webp" src=s.png></picture>
    <iframe src=frame.html></iframe><video src=v.mp4 poster=poster.jpg><track src=t.vtt></video>
    <audio src=a.mp3></audio><embed src=e.swf><object data=o.pdf></object>
    <frameset><frame src=f.html></frameset></body></html>"""
    links = extract_links(html).links
    assert links == [
        RawLink("style.css", "stylesheet", "href"),
        RawLink("/favicon.ico", "link", "href"),
        RawLink("https://example.com/", "link", "href"),
        RawLink("app.js", "script", "src"),
        RawLink("/next", "meta", "content"),
        RawLink("/page", "a", "href"),
        RawLink("area.html", "area", "href"),
        RawLink("i.png", "img", "src"),
        RawLink("i1.png", "img", "srcset"),
        RawLink("i2.png", "img", "srcset"),
        RawLink("s.png", "source", "src"),
        RawLink("s.webp", "source", "srcset"),
        RawLink("frame.html", "iframe", "src"),
        RawLink("v.mp4", "video", "src"),
        RawLink("poster.jpg", "video", "poster"),
        RawLink("t.vtt", "track", "src"),
        RawLink("a.mp3", "audio", "src"),
        RawLink("e.swf", "embed", "src"),
        RawLink("o.pdf", "object", "data"),
    ]


def test_frames_in_a_frameset_document() -> None:
    html = "<html><frameset><frame src=left.html><frame src=right.html></frameset></html>"
    assert [link.url for link in extract_links(html).links] == ["left.html", "right.html"]


def test_values_are_stripped_and_empty_ones_skipped() -> None:
    html = """<a href="  /a\n">x</a><a href="">self</a><a href="   ">blank</a><a href>bare</a>
    <a>no href</a><img src=" "><script></script><a href="\t/b">y</a>"""
    assert [link.url for link in extract_links(html).links] == ["/a", "/b"]


def test_attribute_names_and_tags_are_case_insensitive() -> None:
    links = extract_links('<A HREF="/x">x</A><IMG SRC="/y">').links
    assert links == [RawLink("/x", "a", "href"), RawLink("/y", "img", "src")]


def test_entities_in_attributes_are_decoded() -> None:
    assert extract_links('<a href="/a?x=1&amp;y=2">x</a>').links[0].url == "/a?x=1&y=2"


def test_base_href_is_the_first_one_with_href() -> None:
    html = '<head><base target=_blank><base href=" /docs/ "><base href="/other/"></head>'
    assert extract_links(html).base_href == "/docs/"
    assert extract_links("<a href=x>x</a>").base_href is None


def test_anchors_are_ids_and_a_names() -> None:
    html = '<h1 id="top">t</h1><a name="old-style">a</a><div name="not-an-anchor"></div>'
    html += '<section id="Café"><p id="">empty</p><a id="both" name="also">x</a></section>'
    assert extract_links(html).anchors == frozenset({"top", "old-style", "Café", "both", "also"})


@pytest.mark.parametrize(
    ("meta", "nofollow"),
    [
        ('<meta name="robots" content="nofollow">', True),
        ('<meta name="ROBOTS" content="NoIndex, NoFollow">', True),
        ('<meta name="robots" content="none">', True),
        ('<meta name="robots" content="index,follow">', False),
        ('<meta name="robots" content="nofollowing">', False),
        ('<meta name="googlebot" content="nofollow">', False),
        ('<meta name="description" content="nofollow">', False),
        ("", False),
    ],
)
def test_nofollow(meta: str, nofollow: bool) -> None:
    assert extract_links(f"<head>{meta}</head><a href=x>x</a>").nofollow is nofollow


@pytest.mark.parametrize(
    ("content", "url"),
    [
        ("5; url=/next", "/next"),
        ("0;URL=/next", "/next"),
        ("0; Url = '/next'", "/next"),
        ('3; url="/next" trailing', "/next"),
        ("5, /next", "/next"),
        ("5 /next", "/next"),
        ("2.5; url=/n", "/n"),
        ("0; url=http://example.com/?a=1;b=2", "http://example.com/?a=1;b=2"),
        ("5", None),
        ("5;", None),
        ("5; url=", None),
        ("soon; url=/x", None),
        ("", None),
    ],
)
def test_refresh_url(content: str, url: str | None) -> None:
    assert refresh_url(content) == url


def test_meta_refresh_link() -> None:
    html = (
        '<meta http-equiv="Refresh" content="0; URL=\'/moved\'"><meta http-equiv=refresh content=5>'
    )
    assert extract_links(html).links == [RawLink("/moved", "meta", "content")]


@pytest.mark.parametrize(
    ("srcset", "urls"),
    [
        ("a.jpg 1x, b,c.jpg 2x", ["a.jpg", "b,c.jpg"]),
        ("a.jpg", ["a.jpg"]),
        ("a.jpg 100w,b.jpg 200w", ["a.jpg", "b.jpg"]),
        ("a.jpg,b.jpg", ["a.jpg,b.jpg"]),  # no whitespace after the comma: one URL
        ("a.jpg,, b.jpg", ["a.jpg", "b.jpg"]),  # trailing commas end the URL
        ("a.jpg, b.jpg", ["a.jpg", "b.jpg"]),
        ("  ,, a.jpg  1x  ,  ", ["a.jpg"]),
        ("data:image/png;base64,iVBO 1x, b.png 2x", ["data:image/png;base64,iVBO", "b.png"]),
        ("a.jpg (max-width: 1px, 2px) 1x, b.jpg", ["a.jpg", "b.jpg"]),
        ("", []),
        (" , , ", []),
    ],
)
def test_parse_srcset(srcset: str, urls: list[str]) -> None:
    assert parse_srcset(srcset) == urls


def test_srcset_links() -> None:
    links = extract_links('<img srcset="a.jpg 1x, b,c.jpg 2x">').links
    assert links == [RawLink("a.jpg", "img", "srcset"), RawLink("b,c.jpg", "img", "srcset")]


def test_svg_links_by_href_and_xlink_href() -> None:
    # An icon sprite (<use>) or a picture (<image>) moved away is a broken link too.
    html = (
        '<svg><use xlink:href="/icons.svg#edit"></use><use href="#local"></use>'
        '<image href="/p.png"/><image xlink:href="/q.png"/>'
        '<a xlink:href="/svg-page.html"><text>x</text></a></svg><a href="/page.html">p</a>'
    )
    # (The Lexbor of selectolax 0.4, the floor, names an SVG xlink:href "href".)
    assert [(link.url, link.element) for link in extract_links(html).links] == [
        ("/icons.svg#edit", "use"),
        ("#local", "use"),
        ("/p.png", "image"),
        ("/q.png", "image"),
        ("/svg-page.html", "a"),
        ("/page.html", "a"),
    ]


def test_links_inside_templates_and_comments_are_not_extracted() -> None:
    html = (
        "<!-- <a href=/commented>x</a> --><script>var s = '<a href=/in-js>';</script><a href=/real>"
    )
    assert [link.url for link in extract_links(html).links] == ["/real"]


# --- hostile input -------------------------------------------------------------


def test_deeply_nested_elements_keep_their_links() -> None:
    # How fast this parses is measured in bench/, not asserted here.
    html = '<div id="d"><a href="/x">' * 100_000 + "<span id=deep><img src=/deep.png>"
    extracted = extract_links(html)
    assert len(extracted.links) == 100_001
    assert extracted.links[-1] == RawLink("/deep.png", "img", "src")
    assert extracted.anchors == frozenset({"d", "deep"})


_NESTING_OR_NOT = [*_UNNESTED.split("|"), "div", "span", "a", "section", "b", "areax", "lix", "tdx"]
# The tag-by-tag reading _max_depth keeps: IGNORECASE over the flat list of names.
_DEPTH_TAG_BEFORE = re.compile(rf"<(/?)(?!(?:{_UNNESTED})[\s/>])[A-Za-z]", re.IGNORECASE)


def clamped_depth(html: str) -> int:
    depth = deepest = 0
    for mark in _DEPTH_TAG_BEFORE.findall(html):
        depth = max(0, depth + (-1 if mark else 1))
        deepest = max(deepest, depth)
    return deepest


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.sampled_from(_NESTING_OR_NOT),
            st.booleans(),
            st.sampled_from(["", " ", "/", ">", "\n", "x"]),
        ),
        max_size=700,
    ),
    st.integers(0, 300),
)
def test_max_depth_is_exact_above_what_it_is_asked_and_a_bound_below(
    tags: list[tuple[bool, str, bool, str]], at_least: int
) -> None:
    html = "".join(
        f"<{'/' if close else ''}{name.upper() if upper else name}{after}"
        for close, name, upper, after in tags
    )
    assert _DEPTH_TAG.findall(html) == _DEPTH_TAG_BEFORE.findall(html)
    exact = clamped_depth(html)
    assert _max_depth(html) == exact
    found = _max_depth(html, at_least)
    assert found == exact if found > at_least else exact <= found <= at_least


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 150), st.integers(0, 150)), max_size=40), st.integers(0, 300)
)
def test_max_depth_bounds_peaks_between_its_steps(
    runs: list[tuple[int, int]], at_least: int
) -> None:
    # Runs of opens then closes put the deepest point anywhere inside a step.
    html = "".join("<div>" * opens + "</div>" * closes for opens, closes in runs)
    exact = clamped_depth(html)
    found = _max_depth(html, at_least)
    assert found == exact if found > at_least else exact <= found <= at_least


def test_a_page_nested_past_the_cap_is_seen_as_such() -> None:
    deep = "<ul><li>" + "<DIV>" * (MAX_DEPTH + 1) + "</div>" * (MAX_DEPTH + 1) + "<p>" * 5000
    assert _max_depth(deep, MAX_DEPTH) == MAX_DEPTH + 2
    assert _max_depth("<div></div>" * 5000, MAX_DEPTH) <= MAX_DEPTH


def test_deep_nesting_keeps_head_base_and_meta() -> None:
    html = "<head><base href=/b/><meta name=robots content=nofollow></head><body>"
    html += "<section>" * 5000 + '<p id=x><a href="y">y</a><iframe src="f"></iframe><b>x</b>'
    extracted = extract_links(html)
    assert extracted.base_href == "/b/"
    assert extracted.nofollow is True
    assert extracted.links == [RawLink("y", "a", "href"), RawLink("f", "iframe", "src")]
    assert extracted.anchors == frozenset({"x"})


@pytest.mark.parametrize(
    "html",
    [
        "",
        "<",
        "<a href",
        "<a href='unterminated",
        "</a></a></div>",
        "\x00\x01<a href=\x00>",
        "<svg><a href=/svg-link>x</a></svg>",
        "<table><a href=/fostered></table>",
        "<a href=" + "x" * 100_000 + ">",
        "\ud800<a href=/surrogate>",
    ],
)
def test_malformed_html_never_raises(html: str) -> None:
    extracted = extract_links(html)
    assert all(link.url for link in extracted.links)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.sampled_from([None, "text/html", "text/html; charset=x"]))
def test_arbitrary_bytes_never_raise(body: bytes, content_type: str | None) -> None:
    text, encoding = decode_html(body, content_type)
    extracted = extract_links(text)
    assert isinstance(encoding, str)
    assert all(link.url == link.url.strip(" \t\n\r\f") and link.url for link in extracted.links)


_TAG_SOUP = st.lists(
    st.sampled_from(
        [
            *("<a href=", "<img srcset='", "<div>", "</div>", "<meta http-equiv=refresh content='"),
            *("<base href=", ">", "'", '"', " 1x, ", ",", "x", "é", "<!--", "-->", "<script>", " "),
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(_TAG_SOUP)
def test_tag_soup_never_raises(html: str) -> None:
    extracted = extract_links(html)
    assert all(link.url for link in extracted.links)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_srcset_yields_nonempty_urls_without_whitespace(srcset: str) -> None:
    for url in parse_srcset(srcset):
        assert url
        assert not any(c in url for c in " \t\n\r\f")
        assert not url.endswith(",")


# --- decode_html -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "text", "encoding"),
    [
        (b"caf\xc3\xa9", None, "café", "utf-8"),
        (b"caf\xe9", "text/html; charset=ISO-8859-1", "café", "windows-1252"),
        (b"caf\xe9", "text/html; charset=latin1", "café", "windows-1252"),
        (b"\x80", "text/html; charset=us-ascii", "€", "windows-1252"),
        (b"caf\xe9", 'text/html; charset="windows-1252"', "café", "windows-1252"),
        (b"caf\xc3\xa9", "text/html;charset=utf8", "café", "utf-8"),
        (b"\xe9", "text/html; charset=bogus", "\ufffd", "utf-8"),
        (b"\xe9", "text/html; charset=utf-7", "\ufffd", "utf-8"),
        (b"\xef\xbb\xbfcaf\xc3\xa9", "text/html; charset=latin1", "café", "utf-8"),
        (codecs.BOM_UTF16_LE + "café".encode("utf-16-le"), None, "café", "utf-8"),
        (codecs.BOM_UTF16_BE + "café".encode("utf-16-be"), None, "café", "utf-8"),
        ("ソ".encode("shift_jis"), "text/html; charset=Shift_JIS", "ソ", "shift_jis"),
        ("€".encode("cp1251"), "text/html; charset=windows-1251", "€", "windows-1251"),
        (b"\xa4", "text/html; charset=iso-8859-15", "€", "iso-8859-15"),
        (b"\xc3(\xff", None, "\ufffd(\ufffd", "utf-8"),
        (b"\xff\xfeA", None, "\ufffd", "utf-8"),  # a UTF-16LE BOM, then half a code unit
        (b"", None, "", "utf-8"),
    ],
)
def test_decode_html(body: bytes, content_type: str | None, text: str, encoding: str) -> None:
    assert decode_html(body, content_type) == (text, encoding)


@pytest.mark.parametrize(
    ("head", "encoding"),
    [
        (b'<meta charset="iso-8859-1">', "windows-1252"),
        (b"<META CHARSET=latin1>", "windows-1252"),
        (b"<meta charset='windows-1251'>", "windows-1251"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-2">', "iso-8859-2"),
        (b'<meta content="text/html; charset=koi8-r" http-equiv="Content-Type">', "koi8-r"),
        (b'<meta charset="utf-16">', "utf-8"),  # a page readable as ASCII is not UTF-16
        (b'<meta charset="bogus"><meta charset="latin1">', "windows-1252"),
        (b'<meta charset="bogus">', "utf-8"),
        (b"<meta name=viewport>", "utf-8"),
    ],
)
def test_decode_html_meta_prescan(head: bytes, encoding: str) -> None:
    assert decode_html(head + b"<p>x</p>", None)[1] == encoding


def test_header_charset_beats_meta_and_meta_beyond_1024_bytes_is_ignored() -> None:
    body = b'<meta charset="koi8-r">\xe9'
    assert decode_html(body, "text/html; charset=latin1") == (
        '<meta charset="koi8-r">é',
        "windows-1252",
    )
    late = b" " * 1024 + b'<meta charset="latin1">\xe9'
    assert decode_html(late, None)[1] == "utf-8"


def test_unknown_header_label_falls_back_to_meta() -> None:
    assert (
        decode_html(b'<meta charset="latin1">', "text/html; charset=nonsense")[1] == "windows-1252"
    )


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("latin1", "windows-1252"),
        ("ISO-8859-1", "windows-1252"),
        ("ascii", "windows-1252"),
        (" UTF-8 ", "utf-8"),
        ("iso-8859-9", "windows-1254"),
        ("gb2312", "gbk"),
        ("sjis", "shift_jis"),
        ("x-bogus", None),
        ("rot13", None),
        ("", None),
    ],
)
def test_encoding_from_label(label: str, name: str | None) -> None:
    assert encoding_from_label(label) == name


# --- extract_css_urls ------------------------------------------------------------


def test_extract_css_urls() -> None:
    css = """@import "reset.css"; @import 'print.css' print; @import url(theme.css);
    body { background: URL( "bg.png" ) } .a { background-image: url('a b.png') }
    @font-face { src: url(font.woff2) format("woff2"), url() }
    .b { content: "url-like" }"""
    assert extract_css_urls(css) == [
        "reset.css",
        "print.css",
        "theme.css",
        "bg.png",
        "a b.png",
        "font.woff2",
    ]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_extract_css_urls_never_raises(css: str) -> None:
    assert all(extract_css_urls(css))


def test_css_in_style_elements_and_attributes() -> None:
    html = """<html><head><style>body { background: url('bg.png') }
    @import "print.css";</style></head>
    <body><div style="background: url(d.png)">x</div></body></html>"""
    assert extract_links(html).links == [
        RawLink("bg.png", "style", "url"),
        RawLink("print.css", "style", "url"),
        RawLink("d.png", "style", "style"),
    ]


# --- large documents in pieces ------------------------------------------------

_BLOCKS = [
    '<div id="d{i}"><p>t <a href="/p/{i}.html#s">p</a> <img src="/i/{i}.png"></p></div>\n',
    '<ul><li id="l{i}"><a href="l{i}">x</a></li><li><a name="n{i}" href="/n">n</a></ul>\n',
    '<table id="t{i}"><tr><td id="c{i}"><div><a href="/cell/{i}">c</a></div></td></tr></table>\n',
    "<script>var s = '<b>\n<div><a href=/script/{i}>';</script>\n",
    "<!-- <b>\n<div><a href=/comment/{i}></a></div> -->\n",
    "<textarea><b>\n<div><a href=/text/{i}></textarea>\n",
    "<template><div><a href=/template/{i}></a></div></template>\n",
    '<select><option id="o{i}">o</option><b>\n<p id="sp{i}">x</p></select>\n',
    '<svg><a href="/svg/{i}"></a><g>\n<p id="sv{i}"><a href="/in-svg/{i}">x</a></p></g></svg>\n',
    '<div style="background:url(/bg/{i}.gif)">'
    "<style>p{{background:url(/s/{i}.png)}}</style></div>\n",
    "<h2 id=h{i}>h</h2><dl><dt id=dt{i}><a href=/dt/{i}>d</a></dt><dd>x</dd></dl>\n",
    '<b><p>unclosed <a href="/u/{i}">u</a>\n',
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(_BLOCKS) - 1), min_size=1, max_size=60), st.integers(100, 2000))
def test_a_large_document_read_in_pieces_holds_what_its_tree_holds(
    blocks: list[int], size: int
) -> None:
    head = "<!doctype html><html><head><base href='/b/'><title><a href=/no></title></head><body>"
    html = head + "".join(_BLOCKS[b].format(i=i) for i, b in enumerate(blocks)) + "</body>"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(extract_module, "STREAM_ABOVE_CHARS", len(html))
        whole = extract_links(html)
        patch.setattr(extract_module, "STREAM_ABOVE_CHARS", size)
        pieces = extract_module._pieces(html, size)
        assert extract_links(html) == whole
    if pieces is not None:
        assert pieces[0][0] == 0
        assert pieces[-1][1] == len(html)
        assert all(end - start <= size for start, end in pieces)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))


def test_a_large_document_is_parsed_in_pieces_unless_it_cannot_be_cut() -> None:
    blocks = "".join(_BLOCKS[i % len(_BLOCKS)].format(i=i) for i in range(400))
    assert extract_module._pieces(blocks, 5000) is not None
    one_table = "<table>" + blocks + "</table>"  # nothing may be cut inside it
    assert extract_module._pieces(one_table, 5000) is None
    assert extract_module._pieces("<plaintext>" + blocks, 5000) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, len(_BLOCKS) - 1), min_size=1, max_size=30))
def test_every_cut_outside_the_open_spans_keeps_what_the_tree_holds(blocks: list[int]) -> None:
    html = "<body>" + "".join(_BLOCKS[b].format(i=i) for i, b in enumerate(blocks))
    spans = extract_module._open_spans(html)
    assert spans is not None
    whole = extract_module.Found()
    extract_module._walk(extract_module._parser(html), whole)
    for match in extract_module._CUT.finditer(html):
        at = match.start(1)
        if any(start <= at < end for start, end in spans):
            continue
        cut = extract_module.Found()
        extract_module._walk(extract_module._parser(html[:at]), cut)
        extract_module._walk(extract_module._parser(html[at:]), cut)
        assert cut.extracted() == whole.extracted(), html[at : at + 40]
