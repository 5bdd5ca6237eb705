"""Chart series of a job's metrics in bounded memory, however many points the job logged.

Points arrive as a stream (read from the store in chunks). Each line (a group and a name) keeps
at most `budget` exact points; past that it keeps, per bucket of the x-axis range, the first,
last, lowest and highest point (the M4 reduction: a line chart drawn from them looks the same
as one drawn from every point), so no answer grows with the job. At most `max_lines` lines are
kept; the answer says how many it left out, and `form=points` with `after=` pages through the
exact points.

Pure: no store, no HTTP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# (x, arrival order, value): x is the point's step (its sequence number where it has none).
Sample = tuple[int, int, float | None]

DEFAULT_BUDGET = 1000
MAX_BUDGET = 10_000
MAX_LINES = 200
MAX_OMITTED_COUNTED = 10_000


@dataclass
class _Bucket:
    first: Sample
    last: Sample
    low: Sample | None = None
    high: Sample | None = None

    def add(self, sample: Sample) -> None:
        self.last = sample
        value = sample[2]
        if value is None:
            return
        if self.low is None or self.low[2] is None or value < self.low[2]:
            self.low = sample
        if self.high is None or self.high[2] is None or value > self.high[2]:
            self.high = sample

    def samples(self) -> set[Sample]:
        return {s for s in (self.first, self.last, self.low, self.high) if s is not None}


@dataclass
class _Line:
    budget: int
    exact: list[Sample] = field(default_factory=list)
    buckets: dict[int, _Bucket] = field(default_factory=dict)
    count: int = 0


class SeriesReducer:
    """Feed it points in arrival order (`add`), then take the series (`result`)."""

    def __init__(
        self,
        x_range: tuple[int, int] | None,
        budget: int = DEFAULT_BUDGET,
        *,
        name: str | None = None,
        max_lines: int = MAX_LINES,
    ) -> None:
        self.low, self.high = x_range or (0, 0)
        self.budget = max(4, min(budget, MAX_BUDGET))
        self.buckets = max(1, self.budget // 4)  # up to 4 samples kept per bucket
        self.name = name
        self.max_lines = max_lines
        self.lines: dict[tuple[str, str], _Line] = {}
        self.omitted: set[tuple[str, str]] = set()
        self.seen = 0

    def add(self, group: str, x: int, values: dict[str, Any]) -> None:
        self.seen += 1
        for name, value in values.items():
            if self.name is not None and name != self.name:
                continue
            key = (group, name)
            line = self.lines.get(key)
            if line is None:
                if len(self.lines) >= self.max_lines:
                    if len(self.omitted) < MAX_OMITTED_COUNTED:
                        self.omitted.add(key)
                    continue
                line = self.lines[key] = _Line(self.budget)
            self._add(line, (x, self.seen, _number(value)))

    def _add(self, line: _Line, sample: Sample) -> None:
        line.count += 1
        if line.count <= line.budget:
            line.exact.append(sample)
        elif line.exact:
            line.exact = []  # past the budget: the buckets speak for the line
        bucket = self._bucket(sample[0])
        found = line.buckets.get(bucket)
        if found is None:
            found = line.buckets[bucket] = _Bucket(sample, sample)
        found.add(sample)

    def _bucket(self, x: int) -> int:
        span = self.high - self.low
        if span <= 0:
            return 0
        at = (min(max(x, self.low), self.high) - self.low) / span
        return min(int(at * self.buckets), self.buckets - 1)

    def result(self) -> dict[str, Any]:
        """`{"series": {group: {name: {"steps", "values"}}}, "points": {...}, ...}`: each line
        exact in arrival order when it fits the budget, else its buckets' samples in x order
        (`downsampled` names those lines, with how many points they had)."""
        series: dict[str, dict[str, dict[str, list[Any]]]] = {}
        downsampled: dict[str, int] = {}
        for (group, name), line in self.lines.items():
            if line.count <= line.budget:
                kept = line.exact
            else:
                kept = sorted(
                    {s for b in line.buckets.values() for s in b.samples()},
                    key=lambda s: (s[0], s[1]),
                )
                downsampled[f"{group}/{name}"] = line.count
            series.setdefault(group, {})[name] = {
                "steps": [s[0] for s in kept],
                "values": [s[2] for s in kept],
            }
        answer: dict[str, Any] = {"series": series}
        if downsampled:
            answer["downsampled"] = downsampled
            answer["budget"] = self.budget
        if self.omitted:
            answer["lines_omitted"] = len(self.omitted)
        return answer


def reduce_points(
    points: Iterable[tuple[str, int, dict[str, Any]]],
    x_range: tuple[int, int] | None,
    budget: int = DEFAULT_BUDGET,
    name: str | None = None,
) -> dict[str, Any]:
    reducer = SeriesReducer(x_range, budget, name=name)
    for group, x, values in points:
        reducer.add(group, x, values)
    return reducer.result()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
