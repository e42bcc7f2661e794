"""A helper process that parses pages for the crawler (``python -m crawler.parse_child``).

Parsing and classifying a page's links is most of the event loop's work; in a
process of its own it runs on another core, beside the fetches and the
writer. The protocol is length-prefixed pickles: on stdin the crawl's
``Scope``, fragment setting and links-per-page cap first, then batches of
requests (the pages one turn of the crawler's event loop handed over); on
stdout one batch of replies per batch of requests, in order. A batch costs
one write and one wake-up on each side however many pages it holds. End of
stdin (the crawler stopped, or was killed) ends the process, so it never
outlives its crawler.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import mmap
import pickle
import signal
import struct
import sys
from typing import IO, Any

from crawler.fetch_types import Fetched
from crawler.models import Discovered, LeasedUrl, UrlKind
from crawler.outcome import parse_body
from crawler.scope import Scope

FRAME = struct.Struct("!I")  # payload length, then the pickle
# The body bytes a helper has parsed, in memory the crawler shares (``ParsePool``).
PROGRESS = struct.Struct("=Q")
REPLY_PIPE_BYTES = 1024 * 1024  # /proc/sys/fs/pipe-max-size's default
PROTOCOL = pickle.HIGHEST_PROTOCOL
GC_YOUNG_THRESHOLD = 20_000

# What crosses the pipe: plain tuples, cheaper to pickle than the records.
Row = tuple[int, str, str, int, int, int, int]  # a LeasedUrl's fields, its kind as an int
Request = tuple[int, Row, str | None, str | None, bytes]  # id, row, type, robots, body
ChildTuple = tuple[str, str | None, int, str, str, str | None, str | None, int | None, int | None]
# id, children, anchors, error, links dropped past the cap
Reply = tuple[int, list[ChildTuple] | None, frozenset[str] | None, str | None, int]


def encode(message: Any) -> bytes:
    """One frame: length prefix and pickle."""
    data = pickle.dumps(message, protocol=PROTOCOL)
    return FRAME.pack(len(data)) + data


def row_tuple(row: LeasedUrl) -> Row:
    """A leased row as plain values: pickling the record would run Python per page."""
    return (row.id, row.url, row.host, int(row.kind), row.depth, row.hop, row.attempts)


def as_tuple(found: Discovered) -> ChildTuple:
    result = None if found.result is None else str(found.result)
    return (found.url, found.host, int(found.kind), found.element, found.fragment, result,
            found.reason, found.line, found.column)  # fmt: skip


def read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(FRAME.size)
    if len(header) < FRAME.size:
        return None
    (size,) = FRAME.unpack(header)
    data = stream.read(size)
    return data if len(data) == size else None


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Answer batches of parse requests until stdin ends."""
    first = read_frame(stdin)
    if first is None:
        return
    setup = pickle.loads(first)  # noqa: S301 - from our own crawler
    scope, include_fragments = setup[0], setup[1]
    max_links = setup[2] if len(setup) > 2 else None
    progress = _shared_progress(setup[3] if len(setup) > 3 else None)
    done = 0
    while (frame := read_frame(stdin)) is not None:
        batch: list[Request] = pickle.loads(frame)  # noqa: S301
        replies = []
        for request in batch:
            replies.append(answer(request, scope, include_fragments, max_links))
            if progress is not None:
                done += len(request[4])
                PROGRESS.pack_into(progress, 0, done)
        stdout.write(encode(replies))
        stdout.flush()


def widen(pipe: int, size: int) -> None:
    """Let ``pipe`` hold ``size`` bytes (Linux; elsewhere, or past the system's limit,
    it stays as it is)."""
    setting = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setting is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe, setting, size)


def _shared_progress(fd: int | None) -> mmap.mmap | None:
    """The crawler's memory for this helper's progress, if it shared one."""
    if fd is None:
        return None
    try:
        return mmap.mmap(fd, PROGRESS.size)
    except (OSError, ValueError):
        return None


def answer(request: Request, scope: Scope, include_fragments: bool, max_links: int | None) -> Reply:
    """The reply to one page: its links, or the error that makes the crawler parse it itself."""
    request_id, (row_id, url, host, kind, depth, hop, attempts), content_type, robots_tag, body = (
        request
    )
    leased = LeasedUrl(row_id, url, host, UrlKind(kind), depth, hop, attempts)
    fetched = Fetched(
        method="GET", status=200, content_type=content_type, robots_tag=robots_tag, body=body
    )
    try:
        parsed = parse_body(leased, fetched, scope, include_fragments, max_links)
    except Exception as exc:  # the crawler parses this one itself and records it
        return (request_id, None, None, f"{type(exc).__name__}: {exc}", 0)
    return (
        request_id,
        [as_tuple(c) for c in parsed.children],
        parsed.anchors,
        None,
        parsed.dropped,
    )


def main() -> None:
    # Ctrl-C, and a SIGTERM sent to the process group (`timeout`, a service
    # manager), reach the helper too; the crawler decides what stops, and a
    # helper killed under it would cost the pages it holds a second parse.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # As the crawler's loop (crawler.engine.loop.GC_YOUNG_THRESHOLD): a page's
    # links are freed by reference counting, collections only walked them.
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    # A pipe that holds a batch's replies (1.45 MB for the Python docs' index of
    # everything): this helper goes on to the next batch while the crawler's
    # receiving thread reads them, not a 64 KiB piece at a time.
    widen(sys.stdout.fileno(), REPLY_PIPE_BYTES)
    with contextlib.suppress(BrokenPipeError):  # the crawler is gone
        serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
