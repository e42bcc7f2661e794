"""Should this attempt be retried, and when? One function decides.

Retried: timeouts, connection failures, 5xx (except 501 and 505, which a
retry cannot fix) and 429. The wait grows exponentially with jitter, and a
``Retry-After`` header is honoured up to a cap.
"""

from __future__ import annotations

import email.utils
import random
import time

from crawler.errors import FailureKind

RETRYABLE_FAILURES = frozenset({FailureKind.TIMEOUT, FailureKind.CONNECTION})
NOT_RETRYABLE_5XX = frozenset({501, 505})


def is_retryable(status: int | None, failure: FailureKind | None) -> bool:
    """Could the same request succeed later?"""
    if failure is not None:
        return failure in RETRYABLE_FAILURES
    if status is None:
        return False
    return status == 429 or (500 <= status <= 599 and status not in NOT_RETRYABLE_5XX)


def retry_delay(
    *,
    status: int | None,
    failure: FailureKind | None,
    retry_after: str | None,
    attempts: int,
    max_retries: int,
    base_wait_s: float,
    max_retry_after_s: float,
) -> float | None:
    """Seconds to wait before the next attempt, or None to record the result as final.

    ``attempts`` counts the attempts already made before this one.
    """
    if attempts >= max_retries or not is_retryable(status, failure):
        return None
    hinted = parse_retry_after(retry_after)
    if hinted is not None:
        return min(hinted, max_retry_after_s)
    backoff = base_wait_s * (2**attempts)
    return float(backoff * (0.5 + random.random() / 2))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
