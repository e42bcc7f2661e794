"""Schedules as pure functions: intervals, cron in a timezone across daylight-saving
changes, and the one catch-up run after downtime."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from crawler.service import schedule

PARIS = ZoneInfo("Europe/Paris")


def _at(year: int, month: int, day: int, hour: int, minute: int = 0, tz: ZoneInfo = PARIS) -> float:
    return dt.datetime(year, month, day, hour, minute, tzinfo=tz).timestamp()


def _local(timestamp: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(timestamp, PARIS).replace(tzinfo=None)


def test_cron_runs_at_local_time_in_winter_and_in_summer() -> None:
    nightly = {"cron": "0 3 * * *", "timezone": "Europe/Paris"}
    assert _local(schedule.next_run(nightly, _at(2027, 1, 15, 9))) == dt.datetime(2027, 1, 16, 3)
    assert _local(schedule.next_run(nightly, _at(2027, 7, 15, 9))) == dt.datetime(2027, 7, 16, 3)
    utc = {"cron": "0 3 * * *", "timezone": "UTC"}
    assert schedule.next_run(utc, _at(2027, 7, 15, 9)) - schedule.next_run(
        nightly, _at(2027, 7, 15, 9)
    ) == pytest.approx(2 * 3600)


def test_a_time_the_clock_change_skips_runs_right_after_the_gap() -> None:
    # 2027-03-28 in Paris: 02:00 -> 03:00.
    at_0230 = {"cron": "30 2 * * *", "timezone": "Europe/Paris"}
    due = schedule.next_run(at_0230, _at(2027, 3, 28, 0))
    assert _local(due) == dt.datetime(2027, 3, 28, 3, 0)


def test_after_downtime_the_next_run_is_computed_from_now() -> None:
    hourly = {"cron": "0 * * * *", "timezone": "UTC"}
    down_since = _at(2027, 1, 1, 0, tz=ZoneInfo("UTC"))
    back_at = down_since + 10 * 3600 + 600  # ten slots missed
    assert schedule.next_run(hourly, back_at) == _at(2027, 1, 1, 11, tz=ZoneInfo("UTC"))
    assert schedule.next_run({"every": "6h"}, back_at) == back_at + 6 * 3600


def test_intervals_start_at_once_cron_at_its_next_time() -> None:
    assert schedule.first_run({"every": "30m"}, 100.0) == 100.0
    assert schedule.first_run({"cron": "0 0 1 1 *", "timezone": "UTC"}, 100.0) == _at(
        1971, 1, 1, 0, tz=ZoneInfo("UTC")
    )


@pytest.mark.parametrize(
    ("every", "seconds"), [("1m", 60), ("90s", 90), ("6h", 21600), ("7d", 604800)]
)
def test_intervals(every: str, seconds: int) -> None:
    assert schedule.interval_s(every) == seconds


@pytest.mark.parametrize("every", ["", "5", "h", "1.5h", "59s", "400d", "1w", "-1h", " 1h"])
def test_bad_intervals(every: str) -> None:
    with pytest.raises(ValueError, match="every"):
        schedule.interval_s(every)


@pytest.mark.parametrize("cron", ["", "* * * *", "60 * * * *", "0 0 30 2 *", "@reboot"])
def test_bad_cron(cron: str) -> None:
    with pytest.raises(ValueError, match="cron"):
        schedule.check_cron(cron)
