"""Helper processes that parse pages, so the event loop's core only fetches.

The event loop of one crawler process saturates one core well before the
machine does: parsing and classifying ~50 links a page costs more than the
two requests that fetched it. ``ParsePool`` sends page bodies to
``crawler.parse_child`` processes over pipes and hands back their links.

It only ever saves work: when a helper dies or cannot start, every page it
held, and every later one, is parsed in the crawler's own process as before.
And when the helpers fall behind (``behind``: in pages or in bytes), the
engine parses pages on its own thread meanwhile (``crawler.engine.loop.SHARE_*``).

The pages handed over during one turn of the event loop go to a helper as one
batch, written when the turn ends: one pipe write and one reply to read per
batch, not per page, on the thread that saturates first. Each helper's pipes
are written and read by threads of their own (``_Channel``): moved by the
event loop, a large page or reply would wait whenever this process parses a
page itself, and the helper with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import mmap
import os
import pickle
import queue
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import structlog

from crawler.engine import parse_child
from crawler.fetch_types import Fetched
from crawler.models import Discovered, LeasedUrl, ResultClass, UrlKind
from crawler.outcome import Parsed
from crawler.scope import Scope

log = structlog.get_logger(__name__)

START_TIMEOUT_S = 30.0
# Not `-m crawler.engine.parse_child`: runpy needs the module's source, which a
# compiled build (see setup.py) does not run from. `-P`: the working directory
# is not put first on the path, so a `crawler/` folder there (a checkout, a
# user's own project) is never imported in place of the crawler that runs.
HELPER_MAIN = "from crawler.engine.parse_child import main; main()"
HELPER_ARGS = ("-P", "-c", HELPER_MAIN)
CLOSE_TIMEOUT_S = 5.0
MAX_BATCH_PAGES = 32  # a batch is written at once when it reaches this many pages
# What the pipe to a helper holds: /proc/sys/fs/pipe-max-size's default.
PIPE_BYTES = 1024 * 1024
Replies = list[tuple[int, Parsed | None, str | None]]  # request id, links (None: failed), error


class _Channel:
    """A helper's pipes, each moved by a thread of its own.

    Frames sent go out in order on the sending thread (``send``; ``close``
    ends the helper's input after them). Replies are read and decoded on the
    receiving thread and handed to the event loop (``deliver``); the end of
    the helper's output, for whatever reason, once (``lost``).
    """

    def __init__(
        self,
        to_helper: int,
        from_helper: int,
        deliver: Callable[[Replies], None],
        lost: Callable[[BaseException], None],
    ) -> None:
        self._to_helper = to_helper
        self._from_helper = from_helper
        self._loop = asyncio.get_running_loop()
        self._deliver = deliver
        self._lost = lost
        self._frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._threads = (
            threading.Thread(target=self._send_all, name="parse-sender", daemon=True),
            threading.Thread(target=self._receive_all, name="parse-receiver", daemon=True),
        )
        for thread in self._threads:
            thread.start()

    def send(self, frame: bytes) -> None:
        self._frames.put(frame)

    def close(self) -> None:
        """The helper sees the end of its input once the frames sent before are written."""
        self._frames.put(None)

    def join(self, timeout_s: float) -> None:
        """Wait for both threads (the helper has exited: its output has ended)."""
        for thread in self._threads:
            thread.join(timeout_s)

    def _send_all(self) -> None:
        try:
            while (frame := self._frames.get()) is not None:
                view = memoryview(frame)
                written = 0
                while written < len(view):
                    # Not in the slice: a compiled build evaluates that expression twice.
                    written += os.write(self._to_helper, view[written:])
        except OSError:
            pass  # the helper is gone: its output ends too, and the receiver tells
        finally:
            os.close(self._to_helper)

    def _receive_all(self) -> None:
        error: BaseException = EOFError("the helper's output ended")
        try:
            with open(self._from_helper, "rb") as stream:
                while (frame := parse_child.read_frame(stream)) is not None:
                    replies: list[parse_child.Reply] = pickle.loads(frame)  # noqa: S301 - our child
                    self._call(self._deliver, _decoded(replies))
        except Exception as exc:  # a torn frame, a pickle that does not load: the helper is lost
            error = exc
        self._call(self._lost, error)

    def _call(self, callback: Callable[[Any], None], argument: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(callback, argument)


@dataclass(eq=False)
class _Helper:
    process: asyncio.subprocess.Process
    channel: _Channel | None = None
    pending: dict[int, asyncio.Future[Parsed | None]] = field(default_factory=dict)
    alive: bool = True
    outbox: list[parse_child.Request] = field(default_factory=list)  # the batch being made
    flush: asyncio.Handle | None = None  # writes the batch when this turn of the loop ends
    progress: mmap.mmap | None = None  # the body bytes it has parsed, written as it goes
    sent_bytes: int = 0  # the body bytes sent to it

    def queued_bytes(self) -> int:
        """Body bytes sent and not parsed yet, by the helper's own count (its replies
        come a batch at a time); 0 when no memory could be shared: pages alone tell."""
        if self.progress is None:
            return 0
        (done,) = parse_child.PROGRESS.unpack_from(self.progress)
        return self.sent_bytes - int(done)


class ParsePool:
    """Helper parser processes for one crawl; ``parse`` returns None when it cannot help."""

    def __init__(
        self, scope: Scope, include_fragments: bool, processes: int, max_links: int | None = None
    ) -> None:
        self._setup = (scope, include_fragments, max_links)
        self._wanted = processes
        self._helpers: list[_Helper] = []
        self._ids = itertools.count()

    @property
    def alive(self) -> bool:
        return any(helper.alive for helper in self._helpers)

    async def start(self) -> None:
        """Start the helpers; one that fails to start is simply not used."""
        for _ in range(self._wanted):
            shared = _progress_memory()
            fds = () if shared is None else (shared[0],)
            spawned: tuple[asyncio.subprocess.Process, int, int] | None = None
            try:
                spawned = await _spawn(fds)
            finally:
                if spawned is None and shared is not None:
                    shared[1].close()  # no helper maps it (failed, or cancelled): its copy goes
            if spawned is None:
                continue
            process, to_helper, from_helper = spawned
            helper = _Helper(process, progress=None if shared is None else shared[1])
            helper.channel = _Channel(
                to_helper,
                from_helper,
                partial(self._answered, helper),
                partial(self._lost, helper),
            )
            helper.channel.send(parse_child.encode((*self._setup, fds[0] if fds else None)))
            self._helpers.append(helper)
        log.info("parse_helpers_started", count=len(self._helpers))

    def behind(self, pages_each: int, bytes_each: int | None = None) -> bool:
        """Does every live helper hold at least ``pages_each`` pages not yet answered,
        or (with ``bytes_each``) at least that many bytes of them?

        Pages alone misjudge a site of large pages: a few dozen of the Python
        docs' pages are a second of a helper's work.
        """
        alive = [helper for helper in self._helpers if helper.alive]
        return bool(alive) and all(
            len(helper.pending) >= pages_each
            or (bytes_each is not None and helper.queued_bytes() >= bytes_each)
            for helper in alive
        )

    async def parse(self, leased: LeasedUrl, fetched: Fetched) -> Parsed | None:
        """The links of ``fetched`` as ``outcome.parse_body`` finds them, or None."""
        helpers = self._helpers
        if len(helpers) != 1:
            helpers = [helper for helper in helpers if helper.alive]
            if not helpers:
                return None
        helper = helpers[0] if len(helpers) == 1 else min(helpers, key=_load)
        if not helper.alive:
            return None
        request_id = next(self._ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Parsed | None] = loop.create_future()
        helper.pending[request_id] = future
        helper.sent_bytes += len(fetched.body or b"")
        helper.outbox.append(
            (
                request_id,
                parse_child.row_tuple(leased),
                fetched.content_type,
                fetched.robots_tag,
                fetched.body or b"",
            )
        )
        if len(helper.outbox) >= MAX_BATCH_PAGES:
            self._flush(helper)
        elif helper.flush is None:
            helper.flush = loop.call_soon(self._flush, helper)
        return await future

    def send_now(self) -> None:
        """Write the batches made so far before this thread parses a page itself:
        written when the turn ends, they would wait for that parse, the helpers idle."""
        for helper in self._helpers:
            if helper.outbox:
                self._flush(helper)

    def _flush(self, helper: _Helper) -> None:
        """Write the batch made so far as one frame."""
        if helper.flush is not None:
            helper.flush.cancel()
            helper.flush = None
        batch, helper.outbox = helper.outbox, []
        if batch and helper.alive and helper.channel is not None:
            helper.channel.send(parse_child.encode(batch))

    async def close(self) -> None:
        """Let the helpers see end of input and exit; kill any that do not."""
        for helper in self._helpers:
            self._end_input(helper)
        for helper in self._helpers:
            try:
                await asyncio.wait_for(helper.process.wait(), CLOSE_TIMEOUT_S)
            except TimeoutError:
                _kill(helper)
                await helper.process.wait()
            if helper.channel is not None:
                await asyncio.to_thread(helper.channel.join, CLOSE_TIMEOUT_S)
            self._forget(helper)
        self._helpers.clear()

    def abandon(self) -> None:
        """Stop the helpers without waiting for them: for a crawl whose shutdown was cut
        short before ``close``. Their sending threads would hold their input open, and
        the helpers would wait for it as long as this process lives."""
        for helper in self._helpers:
            self._end_input(helper)
            _kill(helper)
            self._forget(helper)
        self._helpers.clear()

    @staticmethod
    def _end_input(helper: _Helper) -> None:
        """No page goes to it any more; its input ends after the frames already sent."""
        helper.alive = False
        if helper.channel is not None:
            helper.channel.close()

    def _forget(self, helper: _Helper) -> None:
        """Its pages unanswered go back to the engine; its shared count is unmapped."""
        self._fail_pending(helper)
        if helper.progress is not None:
            helper.progress.close()
            helper.progress = None

    def _answered(self, helper: _Helper, replies: Replies) -> None:
        for request_id, parsed, error in replies:
            future = helper.pending.pop(request_id, None)
            if future is None or future.done():
                continue
            if parsed is None:
                log.warning("parse_helper_error", error=error)
            future.set_result(parsed)

    def _lost(self, helper: _Helper, exc: BaseException) -> None:
        if helper.alive:
            helper.alive = False
            log.warning(
                "parse_helper_lost",
                pid=helper.process.pid,
                error=f"{type(exc).__name__}: {exc}",
                hint="pages are parsed in the crawler's process from now on",
            )
        self._fail_pending(helper)

    @staticmethod
    def _fail_pending(helper: _Helper) -> None:
        if helper.flush is not None:
            helper.flush.cancel()
            helper.flush = None
        helper.outbox.clear()
        for future in helper.pending.values():
            if not future.done():
                future.set_result(None)
        helper.pending.clear()


def _kill(helper: _Helper) -> None:
    with contextlib.suppress(ProcessLookupError):  # it has exited already
        helper.process.kill()


async def _spawn(fds: tuple[int, ...]) -> tuple[asyncio.subprocess.Process, int, int] | None:
    """A helper process, handed ``fds`` (closed here once it has them), with the ends of
    its pipes this process keeps: to write its input, to read its output. None if it
    fails to start."""
    to_read, to_write = os.pipe()
    from_read, from_write = os.pipe()
    parse_child.widen(to_write, PIPE_BYTES)
    process: asyncio.subprocess.Process | None = None
    try:
        process = await asyncio.wait_for(
            asyncio.create_subprocess_exec(
                sys.executable,
                *HELPER_ARGS,
                stdin=to_read,
                stdout=from_write,
                pass_fds=fds,
            ),
            START_TIMEOUT_S,
        )
    except (OSError, TimeoutError) as exc:
        log.warning("parse_helper_not_started", error=str(exc))
        return None
    finally:
        for fd in (to_read, from_write, *fds):
            os.close(fd)  # the helper has its own copies; the mapping stays
        if process is None:  # failed, or cancelled (asyncio stops a process it made)
            os.close(to_write)
            os.close(from_read)
    return process, to_write, from_read


def _progress_memory() -> tuple[int, mmap.mmap] | None:
    """Memory shared with a helper, where it counts the body bytes it has parsed.

    An anonymous file (``memfd``), or where there is none a temporary file
    unlinked at once: nothing is left on disk. None if neither can be made.
    """
    try:
        fd = os.memfd_create("crawler-parse-progress")
    except (AttributeError, OSError):
        try:
            fd, path = tempfile.mkstemp(prefix="crawler-parse-progress-")
        except OSError:
            return None
        os.unlink(path)
    try:
        os.ftruncate(fd, mmap.PAGESIZE)
        return fd, mmap.mmap(fd, mmap.PAGESIZE)
    except OSError:
        os.close(fd)
        return None


def _load(helper: _Helper) -> int:
    """Pages a helper holds; a lost one never takes more."""
    return len(helper.pending) if helper.alive else sys.maxsize


_KINDS = tuple(sorted(UrlKind))  # by value: an index is cheaper than an Enum call
_RESULTS: dict[str | None, ResultClass | None] = {None: None} | {str(r): r for r in ResultClass}


def _decoded(replies: list[parse_child.Reply]) -> Replies:
    """The helper's replies as this process's records (on the receiving thread)."""
    return [
        (
            request_id,
            None
            if error is not None or children is None
            else Parsed(_discovered(children), anchors, dropped),
            error,
        )
        for request_id, children, anchors, error, dropped in replies
    ]


def _discovered(
    children: list[parse_child.ChildTuple],
    kinds: tuple[UrlKind, ...] = _KINDS,
    results: dict[str | None, ResultClass | None] = _RESULTS,
) -> list[Discovered]:
    """The helper's tuples as records: ~50 a page.

    One comprehension building the named tuples with ``tuple.__new__`` (no
    Python frame per link, no Enum call): about half the time of calling
    ``Discovered`` per link.
    """
    new = tuple.__new__
    return [
        new(Discovered, (url, host, kinds[kind], element, fragment, results[result], reason,
                         line, column))
        for url, host, kind, element, fragment, result, reason, line, column in children
    ]  # fmt: skip
