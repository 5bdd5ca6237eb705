"""Cron expressions for pipeline schedules: the next time each names, and refusals that say
which field is wrong."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loom.domain.cron import next_time, parse_cron
from loom.domain.errors import InvalidInput

START = datetime(2026, 11, 25, 20, 30, 15, tzinfo=UTC)  # a Wednesday


def after(cron: str, when: datetime = START) -> datetime:
    return parse_cron(cron).next_after(when)


@pytest.mark.parametrize(
    ("cron", "expected"),
    [
        ("* * * * *", datetime(2026, 11, 25, 20, 31, tzinfo=UTC)),
        ("*/15 * * * *", datetime(2026, 11, 25, 20, 45, tzinfo=UTC)),
        ("0 3 * * *", datetime(2026, 11, 26, 3, 0, tzinfo=UTC)),
        ("@daily", datetime(2026, 11, 26, 0, 0, tzinfo=UTC)),
        ("@hourly", datetime(2026, 11, 25, 21, 0, tzinfo=UTC)),
        ("0 9 * * mon-fri", datetime(2026, 11, 26, 9, 0, tzinfo=UTC)),
        ("0 0 * * 0", datetime(2026, 11, 29, 0, 0, tzinfo=UTC)),
        ("0 0 * * 7", datetime(2026, 11, 29, 0, 0, tzinfo=UTC)),
        ("30 6 1 jan *", datetime(2027, 1, 1, 6, 30, tzinfo=UTC)),
        ("0 12 29 2 *", datetime(2028, 2, 29, 12, 0, tzinfo=UTC)),
        ("0 0 1,15 * *", datetime(2026, 12, 1, 0, 0, tzinfo=UTC)),
        # both day fields restricted: either one (the 1st, or a Friday)
        ("0 0 1 * fri", datetime(2026, 11, 27, 0, 0, tzinfo=UTC)),
        ("5-10/5 20 * * *", datetime(2026, 11, 26, 20, 5, tzinfo=UTC)),
    ],
)
def test_the_next_time(cron: str, expected: datetime) -> None:
    assert after(cron) == expected


def test_next_time_in_epoch_seconds() -> None:
    assert (
        next_time("0 * * * *", START.timestamp())
        == datetime(2026, 11, 25, 21, 0, tzinfo=UTC).timestamp()
    )


@pytest.mark.parametrize(
    ("cron", "words"),
    [
        ("* * * *", "has 4 fields"),
        ("60 * * * *", "minute '60' is not a whole number from 0 to 59"),
        ("\u00b9 * * * *", "minute '\u00b9' is not a whole number"),  # a digit, not a number
        ("* 24 * * *", "hour '24'"),
        ("* * 0 * *", "day of month '0'"),
        ("* * * 13 *", "month '13'"),
        ("* * * * 8", "day of week '8'"),
        ("5-1 * * * *", "runs backwards"),
        ("*/0 * * * *", "minute '0' is not a whole number from 1"),
        ("0 0 30 2 *", "names no time"),
        ("@often", "has 1 fields"),
    ],
)
def test_bad_expressions_are_refused_with_the_field(cron: str, words: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        after(cron)
    assert refused.value.field == "cron"
    assert words in refused.value.message
