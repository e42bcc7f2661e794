"""What one completion batch adds to its worker's counters (``worker.urls_done``, ``pages_done``).

Both backends add these in the transaction that completes the batch, so a
worker's counters never include a rejected stale completion, and the service
can show each worker's rate from two samples of its row.
"""

from __future__ import annotations

from collections.abc import Sequence

from crawler.models import Outcome, UrlKind


def tally(outcomes: Sequence[Outcome], accepted: Sequence[bool]) -> tuple[int, int]:
    """(URLs done, of which pages) among the accepted outcomes that carry a result."""
    urls = pages = 0
    for outcome, ok in zip(outcomes, accepted, strict=True):
        if ok and outcome.result is not None:
            urls += 1
            pages += outcome.leased.kind == UrlKind.PAGE
    return urls, pages
