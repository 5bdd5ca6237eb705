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
from typing import Any

# (x, arrival order, value): x is the point's step (its sequence number where it has none).
Sample = tuple[int, int, float | None]

DEFAULT_BUDGET = 1000
MAX_BUDGET = 10_000
MAX_LINES = 200
MAX_OMITTED_COUNTED = 10_000


class _Line:
    """One line's points: exact up to the budget, and per bucket its first, last, lowest and
    highest samples (kept as a list of four, updated in place: this runs for every value)."""

    __slots__ = ("buckets", "budget", "count", "exact")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.exact: list[Sample] = []
        self.buckets: dict[int, list[Sample]] = {}
        self.count = 0

    def add(self, sample: Sample, bucket: int) -> None:
        self.count += 1
        if self.count <= self.budget:
            self.exact.append(sample)
        elif self.exact:
            self.exact = []  # past the budget: the buckets speak for the line
        found = self.buckets.get(bucket)
        if found is None:
            self.buckets[bucket] = [sample, sample, sample, sample]
            return
        found[1] = sample
        value = sample[2]
        if value is None:
            return
        low, high = found[2][2], found[3][2]
        if low is None or value < low:
            found[2] = sample
        if high is None or value > high:
            found[3] = sample

    def kept(self) -> list[Sample]:
        if self.count <= self.budget:
            return self.exact
        samples = {s for kept in self.buckets.values() for s in kept}
        return sorted(samples, key=lambda s: (s[0], s[1]))


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
        bucket = self._bucket(x)
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
            number = value if type(value) is float else _number(value)
            line.add((x, self.seen, number), bucket)

    def _bucket(self, x: int) -> int:
        span = self.high - self.low
        if span <= 0:
            return 0
        at = (min(max(x, self.low), self.high) - self.low) / span
        return min(int(at * self.buckets), self.buckets - 1)

    def result(self) -> dict[str, Any]:
        """`{"series": {group: {name: {"steps", "values"}}}, …}`: each line exact in arrival
        order when it fits the budget, else its buckets' samples in x order (`downsampled`
        names those lines, with how many points they had)."""
        series: dict[str, dict[str, dict[str, list[Any]]]] = {}
        downsampled: dict[str, int] = {}
        for (group, name), line in self.lines.items():
            kept = line.kept()
            if line.count > line.budget:
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
