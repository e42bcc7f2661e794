"""Live counters of a crawl: pure arithmetic over samples, no I/O.

A running crawl is sampled every second or so (frontier counts from its
database, in-flight requests from its engine); rates are taken over the last
``RATE_WINDOW_S`` seconds and the ETA is the work known now divided by the
current rate, so it grows when the crawl discovers more. A crawl that is not
running is described once from its database.
"""

from __future__ import annotations

from collections import deque

from crawler.models import Counts
from crawler.service.schemas import Progress

RATE_WINDOW_S = 10.0
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
