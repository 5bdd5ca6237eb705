"""Cron expressions as schedules read them: five fields (minute, hour, day of month, month, day
of week), in UTC, with `*`, lists, ranges, steps, month and day names, and `@hourly`, `@daily`,
`@weekly`, `@monthly`, `@yearly`. As in Vixie cron, when both day fields are restricted a day
matching either one is taken."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from loom.domain.errors import InvalidInput

_NAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
_DAYS = {d.lower(): (i + 1) % 7 for i, d in enumerate(calendar.day_abbr)}  # sun = 0
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),  # 7 is Sunday too
)
_HORIZON = timedelta(days=366 * 5)  # Feb 29 on a Monday comes round within 28 years; enough


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # day of month is `*`
    any_weekday: bool  # day of week is `*`

    def matches_day(self, when: datetime) -> bool:
        weekday = (when.weekday() + 1) % 7
        by_day, by_weekday = when.day in self.days, weekday in self.weekdays
        if self.any_day or self.any_weekday:
            return by_day and by_weekday
        return by_day or by_weekday

    def next_after(self, when: datetime) -> datetime:
        """The first time strictly after `when` (UTC, to the minute) that the expression names."""
        at = when.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        end = at + _HORIZON
        while at < end:
            if at.month not in self.months:
                at = (at.replace(day=1) + timedelta(days=32)).replace(day=1, hour=0, minute=0)
            elif not self.matches_day(at):
                at = (at + timedelta(days=1)).replace(hour=0, minute=0)
            elif at.hour not in self.hours:
                at = (at + timedelta(hours=1)).replace(minute=0)
            elif at.minute not in self.minutes:
                at += timedelta(minutes=1)
            else:
                return at
        raise InvalidInput(
            f"cron: {self.text!r} names no time in the next five years", field="cron"
        )


def parse_cron(text: str) -> Cron:
    """The expression, or a refusal naming the field that is wrong and why."""
    given = " ".join(str(text).split())
    expanded = _NAMES.get(given.lower(), given)
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise InvalidInput(
            f"cron: {text!r} has {len(parts)} fields; give five (minute hour day-of-month month "
            "day-of-week, e.g. `0 3 * * *`) or @hourly, @daily, @weekly, @monthly, @yearly",
            field="cron",
        )
    sets = [_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    return Cron(
        text=given,
        minutes=sets[0],
        hours=sets[1],
        days=sets[2],
        months=sets[3],
        weekdays=weekdays,
        any_day=parts[2] == "*",
        any_weekday=parts[4] == "*",
    )


def _field(part: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    found: set[int] = set()
    for piece in part.split(","):
        found |= _piece(piece, name, low, high, names)
    return frozenset(found)


def _piece(piece: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    span, _, step_text = piece.partition("/")
    step = _number(step_text, name, 1, high) if step_text else 1
    if span == "*":
        first, last = low, high
    elif "-" in span:
        a, _, b = span.partition("-")
        first, last = _value(a, name, low, high, names), _value(b, name, low, high, names)
        if first > last:
            raise InvalidInput(f"cron: {name} range {span!r} runs backwards", field="cron")
    else:
        first = _value(span, name, low, high, names)
        last = high if step_text else first
    return set(range(first, last + 1, step))


def _value(text: str, name: str, low: int, high: int, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    return _number(text, name, low, high)


def _number(text: str, name: str, low: int, high: int) -> int:
    if not text.isdecimal() or not low <= int(text) <= high:
        raise InvalidInput(
            f"cron: {name} {text!r} is not a whole number from {low} to {high}", field="cron"
        )
    return int(text)


def next_time(cron: str, after: float) -> float:
    """The next time (epoch seconds) after `after` that `cron` names."""
    return parse_cron(cron).next_after(datetime.fromtimestamp(after, UTC)).timestamp()
