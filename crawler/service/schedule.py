"""When a crawl definition runs next: an interval, or a cron expression in a timezone.

Pure functions of a schedule (as the API validated it) and a time; the
scheduler (``scheduler``) owns the clock. Cron expressions are evaluated by
``cronsim`` (maintained, pure Python, five fields with the usual extensions),
in the definition's IANA timezone from ``zoneinfo``: ``0 3 * * *`` in
``Europe/Paris`` is 03:00 Paris time in winter and in summer, and a time the
daylight-saving change skips runs at the first minute after the gap.

- An interval (``"every": "6h"``) runs its first run at once, then every
  interval after the previous run *started*.
- A cron schedule runs at each time its expression matches.

Either way ``next_run(schedule, now)`` is computed from *now* when a run
starts, so a service that was down for ten slots catches up with one run,
not ten.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from typing import Any

from cronsim import CronSim, CronSimError

UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_INTERVAL_S = 60
MAX_INTERVAL_S = 366 * 86400
DEFAULT_TIMEZONE = "UTC"
_EVERY = re.compile(r"(\d{1,6})([smhd])")


def interval_s(every: str) -> int:
    """``"6h"`` -> 21600; ValueError for anything else or out of range."""
    match = _EVERY.fullmatch(every)
    if match is None:
        raise ValueError(f"every {every[:40]!r}: a number and a unit (s, m, h, d), e.g. '6h'")
    seconds = int(match[1]) * UNITS_S[match[2]]
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise ValueError(
            f"every {every!r}: from {MIN_INTERVAL_S} s to {MAX_INTERVAL_S // 86400} days"
        )
    return seconds


def check_cron(expression: str) -> str:
    """The expression, if cronsim can evaluate it; ValueError naming the problem."""
    try:
        CronSim(expression, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    except CronSimError as exc:
        raise ValueError(f"cron {expression[:100]!r}: {exc}") from None
    return expression


def check_timezone(name: str) -> str:
    """An IANA timezone name zoneinfo knows; ValueError otherwise."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"timezone {name[:60]!r}: not an IANA timezone name") from None
    return name


def first_run(schedule: dict[str, Any], now: float) -> float:
    """When a new (or changed) definition runs first."""
    return now if schedule.get("every") else next_run(schedule, now)


def next_run(schedule: dict[str, Any], now: float) -> float:
    """The first time strictly after ``now`` when the schedule is due."""
    every = schedule.get("every")
    if every:
        return now + interval_s(every)
    zone = zoneinfo.ZoneInfo(schedule.get("timezone") or DEFAULT_TIMEZONE)
    start = dt.datetime.fromtimestamp(now, zone)
    try:
        return next(CronSim(schedule["cron"], start)).timestamp()
    except StopIteration:  # an expression that never matches (Feb 30)
        return float("inf")
