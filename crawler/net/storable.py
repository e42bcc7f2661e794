"""Text from servers and pages made fit for a store: no NUL, nothing but UTF-8.

A response's reason phrase and headers, the messages a rendered page's scripts
write (crawler/net/render/page.py), a webhook receiver's error.

A server chooses these bytes: a NUL, or bytes that are not UTF-8 (decoded
with ``surrogateescape``, so lone surrogates), reached the store as they
came. PostgreSQL refuses both in a text, so one such answer stopped the
crawl at every resume; SQLite kept them, and the report then failed to read
them back. Text shown to the user (the reason phrase, the content type)
keeps what it can, with U+FFFD for what it cannot; a validator is sent back
to the server as it came or not at all, so one that is not plain ASCII is
dropped (the page is then fetched in full). A ``Location`` is followed, so
its bytes that are not UTF-8 are percent-encoded as they came.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def text(value: str | None) -> str | None:
    """Text with NUL, undecodable bytes and lone surrogates replaced by U+FFFD."""
    if value is None:
        return None
    if not value.isascii():
        try:
            raw = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate no decoder made: a script's string
            raw = value.encode("utf-8", "surrogatepass")
        value = raw.decode("utf-8", "replace")
    return value.replace("\x00", REPLACEMENT) if "\x00" in value else value


def validator(value: str | None) -> str | None:
    """An ETag or Last-Modified to send back as it came: printable ASCII, else None."""
    if value is None or not value.isascii() or not value.isprintable():
        return None
    return value


def location(value: str | None) -> str | None:
    """A ``Location`` to follow, each byte that is not UTF-8 percent-encoded as it came.

    A server writing Latin-1 sends ``Location: /caf\\xe9`` and browsers ask for
    ``/caf%E9``; read as U+FFFD by the URL parser, the byte named another page
    (``%EF%BF%BD``), and a redirect that works was reported broken.
    """
    if value is None or value.isascii():
        return value
    return "".join(f"%{ord(c) - 0xDC00:02X}" if "\udc80" <= c <= "\udcff" else c for c in value)
