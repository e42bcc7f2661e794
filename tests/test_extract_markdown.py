"""Links and anchors out of Markdown: what lychee finds in a README, and where each is written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler import extract_markdown as extract_markdown_module
from crawler import positions
from crawler.extract_markdown import MarkdownLinks, extract_markdown, github_slug

README = """\
# My Project

See the [guide](docs/guide.md#install "Guide") and ![logo](img/logo.png).
Mail <me@example.test> or read <https://auto.test/page>.
A bare link: https://bare.test/path/(x). Another (https://paren.test/a).

[ref link][docs] and [collapsed][]

[docs]: https://ref.test/docs
[collapsed]: /collapsed.html

```sh
curl https://in-fence.test/
```

    indented https://in-indented.test/

Inline `https://in-code.test/` stays out.

| name | link |
|------|------|
| one  | [cell](cell.md) |

<p align="center"><img src="banner.svg"></p>

## Install

Text with <a href="inline.html">inline html</a>.

## Install

### Émigré's `code` & Co.
"""


def links_of(text: str) -> list[tuple[str, str]]:
    return [(link.url, link.element) for link in extract_markdown(text).extracted.links]


def placed_urls(text: str, found: MarkdownLinks) -> list[str]:
    """The links' URLs, each checked to be written where its offset says."""
    for link, at in zip(found.extracted.links, found.offsets, strict=True):
        assert text.startswith(link.url, at), (link, at)
    return [link.url for link in found.extracted.links]


def test_links_images_autolinks_references_bare_urls_and_html_in_document_order() -> None:
    assert links_of(README) == [
        ("docs/guide.md#install", "a"),
        ("img/logo.png", "img"),
        ("mailto:me@example.test", "a"),
        ("https://auto.test/page", "a"),
        ("https://bare.test/path/(x)", "a"),
        ("https://paren.test/a", "a"),
        ("https://ref.test/docs", "a"),
        ("/collapsed.html", "a"),
        ("cell.md", "a"),
        ("banner.svg", "img"),
        ("inline.html", "a"),
    ]


def test_code_spans_and_blocks_hold_no_links() -> None:
    urls = [url for url, _ in links_of(README)]
    assert not [url for url in urls if "in-" in url]


def test_each_link_is_placed_where_it_is_written() -> None:
    found = extract_markdown(README)
    lines = README.splitlines()
    places = positions.line_columns(README, [at for at in found.offsets if at >= 0])
    assert len(places) == len(found.extracted.links)  # every link found in the text
    for link, (line, column) in zip(found.extracted.links, places, strict=True):
        written = link.url.removeprefix("mailto:")
        assert lines[line - 1][column - 1 :].startswith(written), (link, line, column)


def test_a_value_inside_a_longer_one_is_not_taken_for_it() -> None:
    text = "[a](/docs/a) then [b](/a)\n"
    found = extract_markdown(text)
    assert found.offsets == [text.index("/docs/a"), text.index("(/a)") + 1]


def test_headings_give_githubs_anchors_numbered_when_repeated() -> None:
    anchors = extract_markdown(README).extracted.anchors
    assert {"my-project", "install", "install-1", "émigrés-code--co"} <= anchors


def test_ids_of_embedded_html_are_anchors() -> None:
    text = '<a name="legacy"></a>\n\n## <span id="custom"></span>Title\n'
    assert {"legacy", "custom", "title"} <= extract_markdown(text).extracted.anchors


def test_github_slug() -> None:
    assert github_slug("Hello, World!") == "hello-world"
    assert github_slug("  API v2.0 (beta)  ") == "api-v20-beta"
    assert github_slug("snake_case and-kebab") == "snake_case-and-kebab"
    assert github_slug("日本語 タイトル") == "日本語-タイトル"


def test_links_past_the_limit_are_counted_not_kept() -> None:
    text = "".join(f"[{n}](/p{n})\n\n" for n in range(10))
    found = extract_markdown(text, limit=3)
    assert [link.url for link in found.extracted.links] == ["/p0", "/p1", "/p2"]
    assert found.extracted.dropped == 7
    assert len(found.offsets) == 3


def test_hostile_documents_parse_to_a_bounded_answer() -> None:
    deep = "> " * 5_000 + "[x](/deep)\n"
    brackets = "[" * 50_000 + "](/b)\n"
    repeated = "[a](/a)" + " /a" * 20_000 + "\n"
    braces = "# " + "{" * 50_000 + "\n"  # a heading's {#id} is looked for at its end only
    closing = "https://x.test/" + ")" * 50_000 + "." * 50_000 + "\n"  # trimmed in one pass
    hostile = (deep, brackets, repeated, braces, closing)
    for text in (*hostile, "\x00\ufffd[x](\x00)", "\r\r\n[a](/cr)\r"):
        found = extract_markdown(text)
        assert len(found.offsets) == len(found.extracted.links)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]()<>!#*`: \n\r-_/ahtp.x&;\\")), max_size=300))
def test_any_text_yields_links_found_where_the_offsets_say(text: str) -> None:
    found = extract_markdown(text)
    assert len(found.offsets) == len(found.extracted.links)
    for link, at in zip(found.extracted.links, found.offsets, strict=True):
        assert at == -1 or text.startswith(link.url.removeprefix("mailto:"), at)


def test_past_the_parsed_part_links_are_scanned_where_they_are_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(extract_markdown_module, "PARSED_CHARS", 40)
    text = (
        "# Head\n\n[first](/one) in the parsed part.\n\n"
        'Then [second](</two>) and ![pic](/p.png "t"), https://bare.test/x.\n\n'
        "[ref]: https://ref.test/r\n"
    )
    found = extract_markdown(text)
    assert placed_urls(text, found) == [
        "/one", "/two", "/p.png", "https://bare.test/x", "https://ref.test/r",
    ]  # fmt: skip
    assert "head" in found.extracted.anchors


def test_markdown_it_reads_at_most_the_parsed_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hostile text costs markdown-it ~15 us a character: a page of --max-body-bytes
    would take minutes; past PARSED_CHARS it is scanned instead."""
    parsed: list[int] = []
    real = extract_markdown_module._MARKDOWN.parse

    def spy(text: str, env: object = None) -> object:
        parsed.append(len(text))
        return real(text)

    monkeypatch.setattr(extract_markdown_module._MARKDOWN, "parse", spy)
    monkeypatch.setattr(extract_markdown_module, "PARSED_CHARS", 1_000)
    text = ("![" * 60 + "\n") * 100 + "[tail](/tail)\n"
    found = extract_markdown(text)
    assert parsed
    assert max(parsed) <= 1_000
    assert [link.url for link in found.extracted.links] == ["/tail"]


def test_a_footnotes_links_are_links_as_on_github() -> None:
    text = (
        "Hashing[^siphash] is keyed.\n\n"
        "[^siphash]: [https://en.wikipedia.org/wiki/SipHash](https://en.wikipedia.org/wiki/SipHash)\n"
        "[^2]: See <https://two.test/> and [three](/three).\n"
    )
    assert placed_urls(text, extract_markdown(text)) == [
        "https://en.wikipedia.org/wiki/SipHash", "https://two.test/", "/three",
    ]  # fmt: skip


def test_searches_that_find_nothing_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values the text writes escaped are searched to its end in vain; past MAX_MISSES
    such searches the rest of the links go without a place (a hostile page stays linear)."""
    monkeypatch.setattr(extract_markdown_module, "MAX_MISSES", 2)
    text = "[a](&#x2F;a) [b](&#x2F;b) [c](&#x2F;c) [plain](/plain)\n"
    found = extract_markdown(text)
    assert [link.url for link in found.extracted.links] == ["/a", "/b", "/c", "/plain"]
    assert found.offsets == [-1, -1, -1, -1]  # /plain not searched: the budget is spent
    monkeypatch.setattr(extract_markdown_module, "MAX_MISSES", 64)
    assert extract_markdown(text).offsets[-1] == text.index("/plain")


def test_a_headings_own_id_is_an_anchor_beside_githubs() -> None:
    """mkdocs (attr_list) and Pandoc write ``{#id}`` after a heading; GitHub shows it."""
    text = "## Setup steps {#setup}\n\n# Other { .wide #x2 }\n"
    anchors = extract_markdown(text).extracted.anchors
    assert {"setup", "x2", "setup-steps-setup"} <= anchors
