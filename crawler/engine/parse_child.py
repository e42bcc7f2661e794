"""A helper process that parses pages for the crawler (``python -m crawler.parse_child``).

Parsing and classifying a page's links is most of the event loop's work; in a
process of its own it runs on another core, beside the fetches and the
writer. The protocol is length-prefixed pickles: on stdin the crawl's
``Scope``, fragment setting and links-per-page cap first, then one request per page; on stdout one
reply per request, in order. End of stdin (the crawler stopped, or was
killed) ends the process, so it never outlives its crawler.
"""

from __future__ import annotations

import contextlib
import gc
import pickle
import signal
import struct
import sys
from typing import IO, Any

from crawler.fetch_types import Fetched
from crawler.models import Discovered, LeasedUrl
from crawler.outcome import parse_body

FRAME = struct.Struct("!I")  # payload length, then the pickle
PROTOCOL = pickle.HIGHEST_PROTOCOL
GC_YOUNG_THRESHOLD = 20_000

# What crosses the pipe: plain tuples, cheaper to pickle than the records.
Request = tuple[int, LeasedUrl, str | None, str | None, bytes]  # id, row, type, robots, body
ChildTuple = tuple[str, str | None, int, str, str, str | None, str | None, int | None, int | None]
# id, children, anchors, error, links dropped past the cap
Reply = tuple[int, list[ChildTuple] | None, frozenset[str] | None, str | None, int]


def encode(message: Any) -> bytes:
    """One frame: length prefix and pickle."""
    data = pickle.dumps(message, protocol=PROTOCOL)
    return FRAME.pack(len(data)) + data


def as_tuple(found: Discovered) -> ChildTuple:
    result = None if found.result is None else str(found.result)
    return (found.url, found.host, int(found.kind), found.element, found.fragment, result,
            found.reason, found.line, found.column)  # fmt: skip


def _read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(FRAME.size)
    if len(header) < FRAME.size:
        return None
    (size,) = FRAME.unpack(header)
    data = stream.read(size)
    return data if len(data) == size else None


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Answer parse requests until stdin ends."""
    first = _read_frame(stdin)
    if first is None:
        return
    setup = pickle.loads(first)  # noqa: S301 - from our own crawler
    scope, include_fragments = setup[0], setup[1]
    max_links = setup[2] if len(setup) > 2 else None
    while (frame := _read_frame(stdin)) is not None:
        request_id, leased, content_type, robots_tag, body = pickle.loads(frame)  # noqa: S301
        fetched = Fetched(
            method="GET", status=200, content_type=content_type, robots_tag=robots_tag, body=body
        )
        try:
            parsed = parse_body(leased, fetched, scope, include_fragments, max_links)
            reply: Reply = (
                request_id,
                [as_tuple(c) for c in parsed.children],
                parsed.anchors,
                None,
                parsed.dropped,
            )
        except Exception as exc:  # the crawler parses this one itself and records it
            reply = (request_id, None, None, f"{type(exc).__name__}: {exc}", 0)
        stdout.write(encode(reply))
        stdout.flush()


def main() -> None:
    # Ctrl-C, and a SIGTERM sent to the process group (`timeout`, a service
    # manager), reach the helper too; the crawler decides what stops, and a
    # helper killed under it would cost the pages it holds a second parse.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # As the crawler's loop (crawler.engine.loop.GC_YOUNG_THRESHOLD): a page's
    # links are freed by reference counting, collections only walked them.
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    with contextlib.suppress(BrokenPipeError):  # the crawler is gone
        serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
