"""Text from servers and pages made fit for a store (crawler.net.storable)."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from hypothesis import given
from hypothesis import strategies as st

from crawler.net import storable


@given(st.binary(max_size=40))
def test_stored_text_is_utf8_without_nul_and_keeps_what_it_can(raw: bytes) -> None:
    # Both clients decode header bytes with surrogateescape.
    text = storable.text(raw.decode("utf-8", "surrogateescape"))
    assert text is not None
    text.encode("utf-8")  # no lone surrogate left
    assert "\x00" not in text
    if b"\x00" not in raw:
        try:
            assert text == raw.decode("utf-8")
        except UnicodeDecodeError:
            assert "\ufffd" in text


def test_a_validator_is_kept_as_it_came_or_dropped() -> None:
    assert storable.validator('W/"5f3a-1b"') == 'W/"5f3a-1b"'
    assert storable.validator("Mon, 07 Dec 2026 10:00:00 GMT") == "Mon, 07 Dec 2026 10:00:00 GMT"
    for odd in ('"a\x00b"', '"a\udcffb"', '"caf\u00e9"', None):
        assert storable.validator(odd) is None


def test_a_script_s_lone_surrogate_and_nul_are_replaced() -> None:
    # JSON from the browser can carry "\\ud800" and "\\u0000" (a rendered page's console).
    assert storable.text("a\ud800b\x00c") == "a\ufffd\ufffd\ufffdb\ufffdc"
    assert storable.text("\U0001f600 fine") == "\U0001f600 fine"


@given(st.binary(max_size=40).filter(lambda raw: b"%" not in raw))
def test_a_location_keeps_its_bytes_each_not_utf8_one_percent_encoded(raw: bytes) -> None:
    # Decoded as both clients decode headers; its bytes come back from the result.
    location = storable.location(raw.decode("utf-8", "surrogateescape"))
    assert location is not None
    assert unquote_to_bytes(location.encode("utf-8")) == raw  # no lone surrogate left
    if raw.isascii():
        assert location == raw.decode("ascii")


def test_a_location_s_latin1_byte_is_asked_as_browsers_ask_it() -> None:
    header = b"/caf\xe9/\xc3\xa9".decode("utf-8", "surrogateescape")
    assert storable.location(header) == "/caf%E9/\u00e9"  # a UTF-8 letter stays one
    assert storable.location(None) is None
