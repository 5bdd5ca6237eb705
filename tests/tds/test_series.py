"""Chart series in bounded memory: exact up to the budget, reduced beyond it."""

from __future__ import annotations

import math

from loom.tds.series import MAX_LINES, SeriesReducer, reduce_points


def test_a_line_within_the_budget_is_exact_in_arrival_order() -> None:
    """Points under the budget come back as they arrived, steps and values alike."""
    points = [("test", step, {"acc": step / 10}) for step in (3, 1, 2)]
    found = reduce_points(points, (1, 3), budget=10)
    assert found == {"series": {"test": {"acc": {"steps": [3, 1, 2], "values": [0.3, 0.1, 0.2]}}}}


def test_a_long_line_keeps_its_extremes_and_ends_within_the_budget() -> None:
    """100,000 points of a noisy line come back as at most the budget's points, in step order,
    with the first and last points and every bucket's lowest and highest (the spikes)."""
    count, budget = 100_000, 400
    values = {step: math.sin(step / 500) for step in range(count)}
    values[31_337], values[77_777] = 50.0, -50.0  # spikes a naive stride would miss
    reducer = SeriesReducer((0, count - 1), budget)
    for step in range(count):
        reducer.add("train", step, {"loss": values[step]})
    found = reducer.result()
    line = found["series"]["train"]["loss"]
    assert len(line["steps"]) <= budget
    assert line["steps"] == sorted(line["steps"])
    assert line["steps"][0] == 0 and line["steps"][-1] == count - 1
    assert 50.0 in line["values"] and -50.0 in line["values"]
    assert found["downsampled"] == {"train/loss": count} and found["budget"] == budget


def test_lines_past_the_most_kept_are_counted_not_kept() -> None:
    """A job that logs a new name on every point cannot grow the answer: lines past
    MAX_LINES are left out and counted; a name filter keeps only its own line."""
    reducer = SeriesReducer((0, 10), 100)
    for i in range(MAX_LINES + 50):
        reducer.add("g", 1, {f"m{i}": 1.0})
    found = reducer.result()
    assert len(found["series"]["g"]) == MAX_LINES and found["lines_omitted"] == 50
    only = SeriesReducer((0, 10), 100, name="m7")
    only.add("g", 1, {"m7": 1.0, "m8": 2.0})
    assert only.result()["series"] == {"g": {"m7": {"steps": [1], "values": [1.0]}}}
