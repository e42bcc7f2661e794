"""Helper processes that parse pages, so the event loop's core only fetches.

The event loop of one crawler process saturates one core well before the
machine does: parsing and classifying ~50 links a page costs more than the
two requests that fetched it. ``ParsePool`` sends page bodies to
``crawler.parse_child`` processes over pipes and hands back their links.

It only ever saves work: when a helper dies or cannot start, every page it
held, and every later one, is parsed in the crawler's own process as before.
And when the helpers fall behind (``behind``), the engine parses small pages
on its own thread meanwhile (``crawler.engine.loop.SHARE_ABOVE_ROUNDS``).

The pages handed over during one turn of the event loop go to a helper as one
batch, written when the turn ends: one pipe write and one reply to read per
batch, not per page, on the thread that saturates first.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import pickle
import sys
from dataclasses import dataclass, field

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


@dataclass(eq=False)
class _Helper:
    process: asyncio.subprocess.Process
    pending: dict[int, asyncio.Future[Parsed | None]] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None
    alive: bool = True
    outbox: list[parse_child.Request] = field(default_factory=list)  # the batch being made
    flush: asyncio.Handle | None = None  # writes the batch when this turn of the loop ends


class ParsePool:
    """Helper parser processes for one crawl; ``parse`` returns None when it cannot help."""

    def __init__(
        self, scope: Scope, include_fragments: bool, processes: int, max_links: int | None = None
    ) -> None:
        self._setup = parse_child.encode((scope, include_fragments, max_links))
        self._wanted = processes
        self._helpers: list[_Helper] = []
        self._ids = itertools.count()

    @property
    def alive(self) -> bool:
        return any(helper.alive for helper in self._helpers)

    async def start(self) -> None:
        """Start the helpers; one that fails to start is simply not used."""
        for _ in range(self._wanted):
            try:
                process = await asyncio.wait_for(
                    asyncio.create_subprocess_exec(
                        sys.executable,
                        *HELPER_ARGS,
                        stdin=asyncio.subprocess.PIPE,
                        stdout=asyncio.subprocess.PIPE,
                    ),
                    START_TIMEOUT_S,
                )
            except (OSError, TimeoutError) as exc:
                log.warning("parse_helper_not_started", error=str(exc))
                continue
            helper = _Helper(process)
            assert process.stdin is not None
            process.stdin.write(self._setup)
            helper.reader = asyncio.create_task(self._read_replies(helper))
            self._helpers.append(helper)
        log.info("parse_helpers_started", count=len(self._helpers))

    def behind(self, pages_each: int) -> bool:
        """Does every live helper hold at least ``pages_each`` pages not yet answered?"""
        alive = [helper for helper in self._helpers if helper.alive]
        return bool(alive) and all(len(helper.pending) >= pages_each for helper in alive)

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
        stdin = helper.process.stdin
        assert stdin is not None
        request_id = next(self._ids)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Parsed | None] = loop.create_future()
        helper.pending[request_id] = future
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
        try:
            await stdin.drain()  # what earlier batches left unwritten bounds the next
        except (ConnectionError, RuntimeError) as exc:
            self._lost(helper, exc)
        return await future

    def _flush(self, helper: _Helper) -> None:
        """Write the batch made so far as one frame."""
        if helper.flush is not None:
            helper.flush.cancel()
            helper.flush = None
        batch, helper.outbox = helper.outbox, []
        if not batch or not helper.alive:
            return
        stdin = helper.process.stdin
        assert stdin is not None
        try:
            stdin.write(parse_child.encode(batch))
        except (ConnectionError, RuntimeError) as exc:
            self._lost(helper, exc)

    async def close(self) -> None:
        """Let the helpers see end of input and exit; kill any that do not."""
        for helper in self._helpers:
            helper.alive = False
            if helper.process.stdin is not None:
                helper.process.stdin.close()
        for helper in self._helpers:
            try:
                await asyncio.wait_for(helper.process.wait(), CLOSE_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    helper.process.kill()
                await helper.process.wait()
            if helper.reader is not None:
                helper.reader.cancel()
                await asyncio.gather(helper.reader, return_exceptions=True)
            self._fail_pending(helper)
        self._helpers.clear()

    async def _read_replies(self, helper: _Helper) -> None:
        stdout = helper.process.stdout
        assert stdout is not None
        try:
            while True:
                header = await stdout.readexactly(parse_child.FRAME.size)
                (size,) = parse_child.FRAME.unpack(header)
                data = await stdout.readexactly(size)
                replies: list[parse_child.Reply] = pickle.loads(data)  # noqa: S301 - our own child
                for request_id, children, anchors, error, dropped in replies:
                    future = helper.pending.pop(request_id, None)
                    if future is None or future.done():
                        continue
                    if error is not None or children is None:
                        log.warning("parse_helper_error", error=error)
                        future.set_result(None)
                    else:
                        future.set_result(Parsed(_discovered(children), anchors, dropped))
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self._lost(helper, exc)

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


def _load(helper: _Helper) -> int:
    """Pages a helper holds; a lost one never takes more."""
    return len(helper.pending) if helper.alive else sys.maxsize


_KINDS = tuple(sorted(UrlKind))  # by value: an index is cheaper than an Enum call
_RESULTS: dict[str | None, ResultClass | None] = {None: None} | {str(r): r for r in ResultClass}


def _discovered(
    children: list[parse_child.ChildTuple],
    kinds: tuple[UrlKind, ...] = _KINDS,
    results: dict[str | None, ResultClass | None] = _RESULTS,
) -> list[Discovered]:
    """The helper's tuples as records, on the event loop's thread: ~50 a page.

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
