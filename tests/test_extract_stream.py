"""The streaming extractor (documents over 1 MB) against every extraction test.

Each test of ``test_extract`` runs again here with every document streamed, so
the tokenizer must find what the tree walk finds, element for element.
"""

from __future__ import annotations

import pytest
from test_extract import (  # collected again here, streamed
    test_anchors_are_ids_and_a_names,
    test_attribute_names_and_tags_are_case_insensitive,
    test_base_href_is_the_first_one_with_href,
    test_css_in_style_elements_and_attributes,
    test_deep_nesting_keeps_head_base_and_meta,
    test_deeply_nested_elements_keep_their_links,
    test_entities_in_attributes_are_decoded,
    test_every_link_bearing_element_in_document_order,
    test_frames_in_a_frameset_document,
    test_links_inside_templates_and_comments_are_not_extracted,
    test_malformed_html_never_raises,
    test_meta_refresh_link,
    test_nofollow,
    test_srcset_links,
    test_svg_links_by_href_and_xlink_href,
    test_tag_soup_never_raises,
    test_values_are_stripped_and_empty_ones_skipped,
)

from crawler import extract

__all__ = [
    "test_anchors_are_ids_and_a_names",
    "test_attribute_names_and_tags_are_case_insensitive",
    "test_base_href_is_the_first_one_with_href",
    "test_css_in_style_elements_and_attributes",
    "test_deep_nesting_keeps_head_base_and_meta",
    "test_deeply_nested_elements_keep_their_links",
    "test_entities_in_attributes_are_decoded",
    "test_every_link_bearing_element_in_document_order",
    "test_frames_in_a_frameset_document",
    "test_links_inside_templates_and_comments_are_not_extracted",
    "test_malformed_html_never_raises",
    "test_meta_refresh_link",
    "test_nofollow",
    "test_srcset_links",
    "test_svg_links_by_href_and_xlink_href",
    "test_tag_soup_never_raises",
    "test_values_are_stripped_and_empty_ones_skipped",
]


@pytest.fixture(autouse=True)
def stream_every_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extract, "STREAM_ABOVE_CHARS", -1)


def test_a_large_document_is_streamed_with_the_links_a_tree_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.undo()  # the real threshold
    block = (
        '<div id="s{i}"><p>text {i} <a href="../p/{i}.html#s1">p</a> <img src="/i/{i}.png" '
        'srcset="/i/{i}@2x.png 2x" style="background:url(bg{i}.gif)"></p>'
        "<textarea><a href=/not-a-link></textarea><template><a href=/nor-this></template>"
        "<!-- <a href=/comment> --><script>var s = '<a href=/script>';</script></div>\n"
    )
    head = "<!doctype html><html><head><base href='/docs/'><style>@import 'x.css';</style></head>"
    html = head + "<body>" + "".join(block.format(i=i) for i in range(6000)) + "</body></html>"
    assert len(html) > extract.STREAM_ABOVE_CHARS
    streamed = extract.extract_links(html)
    monkeypatch.setattr(extract, "STREAM_ABOVE_CHARS", len(html))
    assert streamed == extract.extract_links(html)  # the tree walk
    assert len(streamed.links) == 1 + 6000 * 4
    assert streamed.base_href == "/docs/"
