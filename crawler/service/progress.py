"""Live counters of a crawl: pure arithmetic over samples, no I/O.

A running crawl is sampled every second or so (frontier counts from its
database, in-flight requests from its engine); rates are taken over the last
``RATE_WINDOW_S`` seconds and the ETA is the work known now divided by the
current rate, so it grows when the crawl discovers more. A crawl that is not
running is described once from its database.

Each worker of a running crawl (the service's own engine, and ``crawler work``
processes on PostgreSQL) is sampled the same way from its ``worker`` row,
whose ``urls_done``/``pages_done`` grow in the transactions that complete its
URLs; ``WorkerTracker`` turns two samples into its rates.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Sequence

from crawler.models import Counts
from crawler.service.schemas import Progress, WorkerView
from crawler.store.service import WorkerRow

RATE_WINDOW_S = 10.0
WORKER_ID_CHARS = 12  # of the owner token: enough to tell workers apart
ZERO_COUNTS = Counts(pending=0, leased=0, done=0, pages=0, broken=0)


class RunTracker:
    """Samples of one run of one crawl."""

    def __init__(self) -> None:
        self.counts: Counts = ZERO_COUNTS
        self._samples: deque[tuple[float, int, int]] = deque()

    def observe(self, counts: Counts, now: float) -> None:
        """Record frontier counts taken at monotonic time ``now``."""
        self.counts = counts
        self._samples.append((now, counts.done, counts.pages))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()

    def rates(self) -> tuple[float, float]:
        """(pages/s, URLs/s) over the window; zero until two samples exist."""
        if len(self._samples) < 2:
            return 0.0, 0.0
        (t0, done0, pages0), (t1, done1, pages1) = self._samples[0], self._samples[-1]
        span = t1 - t0
        if span <= 0:
            return 0.0, 0.0
        return max(pages1 - pages0, 0) / span, max(done1 - done0, 0) / span

    def progress(self, in_flight: int) -> Progress:
        counts = self.counts
        pages_per_s, urls_per_s = self.rates()
        remaining = counts.pending + counts.leased
        eta = remaining / urls_per_s if urls_per_s > 0 else None
        return Progress(
            crawled=counts.done,
            pages=counts.pages,
            pending=counts.pending,
            leased=counts.leased,
            broken=counts.broken,
            in_flight=in_flight,
            pages_per_s=round(pages_per_s, 2),
            urls_per_s=round(urls_per_s, 2),
            eta_s=None if eta is None else round(eta, 1),
        )


class WorkerTracker:
    """Samples of the workers of one running crawl, by token."""

    def __init__(self) -> None:
        self._rows: dict[str, WorkerRow] = {}
        self._samples: dict[str, deque[tuple[float, int, int]]] = {}

    def observe(self, rows: Sequence[WorkerRow], now: float) -> None:
        """Record the ``worker`` rows read at monotonic time ``now``; gone workers drop out."""
        self._rows = {row.token: row for row in rows}
        for token in list(self._samples):
            if token not in self._rows:
                del self._samples[token]
        for row in rows:
            samples = self._samples.setdefault(row.token, deque())
            samples.append((now, row.urls_done, row.pages_done))
            while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
                samples.popleft()

    def views(self) -> list[WorkerView]:
        """Each worker with its rates over the window, oldest worker first."""
        views = []
        for token, row in self._rows.items():
            pages_per_s, urls_per_s = _rates(self._samples[token])
            views.append(
                WorkerView(
                    id=token[:WORKER_ID_CHARS],
                    hostname=row.hostname,
                    pid=row.pid,
                    started_at=_utc(row.started_at),
                    heartbeat_at=_utc(row.heartbeat_at),
                    crawled=row.urls_done,
                    pages=row.pages_done,
                    pages_per_s=round(pages_per_s, 2),
                    urls_per_s=round(urls_per_s, 2),
                )
            )
        return views


def _rates(samples: deque[tuple[float, int, int]]) -> tuple[float, float]:
    if len(samples) < 2:
        return 0.0, 0.0
    (t0, done0, pages0), (t1, done1, pages1) = samples[0], samples[-1]
    span = t1 - t0
    if span <= 0:
        return 0.0, 0.0
    return max(pages1 - pages0, 0) / span, max(done1 - done0, 0) / span


def _utc(timestamp: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)


def settled(counts: Counts, elapsed_s: float) -> Progress:
    """Progress of a crawl that is not running: averages over its active time."""
    pages_per_s = counts.pages / elapsed_s if elapsed_s > 0 else 0.0
    urls_per_s = counts.done / elapsed_s if elapsed_s > 0 else 0.0
    return Progress(
        crawled=counts.done,
        pages=counts.pages,
        pending=counts.pending,
        leased=counts.leased,
        broken=counts.broken,
        in_flight=0,
        pages_per_s=round(pages_per_s, 2),
        urls_per_s=round(urls_per_s, 2),
        eta_s=None,
    )
