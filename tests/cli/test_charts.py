"""The terminal charts: which metric, which series, smoothing and a log scale."""

from __future__ import annotations

import itertools
import re

from loom.cli.charts import Line, lines_of, pick, plot, smoothed

ANSI = re.compile(r"\x1b\[[0-9;]*m")

TRAIN_TEST = {
    "train": {
        "loss": {"steps": [1, 2, 3], "values": [1.0, 0.5, 0.25]},
        "lr": {"steps": [1], "values": [0.1]},
    },
    "test": {
        "loss": {"steps": [1, 3], "values": [1.2, 0.4]},
        "accuracy": {"steps": [1], "values": [0.5]},
    },
}


def test_a_loss_is_charted_unless_another_metric_is_asked() -> None:
    assert pick([TRAIN_TEST], None, None) == "loss"
    assert pick([TRAIN_TEST], "accuracy", None) == "accuracy"
    assert pick([TRAIN_TEST], "nope", None) is None
    assert pick([TRAIN_TEST], None, "test") == "loss"
    assert pick([{"test": {"accuracy": {"steps": [], "values": []}}}], None, None) == "accuracy"


def test_train_and_test_are_overlaid_and_jobs_labelled_when_compared() -> None:
    one = lines_of({"a": TRAIN_TEST}, "loss", None)
    assert [line.label for line in one] == ["test/loss", "train/loss"]
    both = lines_of({"a": TRAIN_TEST, "b": TRAIN_TEST}, "loss", "train")
    assert [line.label for line in both] == ["a:train/loss", "b:train/loss"]


def test_smoothing_is_a_debiased_moving_average() -> None:
    assert smoothed([1.0, None, 3.0], 0) == [1.0, None, 3.0]
    out = smoothed([2.0, 2.0, None, 2.0], 0.9)
    assert out[2] is None and all(abs(v - 2.0) < 1e-9 for v in out if v is not None)
    rough = [0.0, 10.0, 0.0, 10.0, 0.0, 10.0]
    calm = [v for v in smoothed(rough, 0.8) if v is not None]
    assert max(calm[2:]) - min(calm[2:]) < 10.0 / 2


def test_a_chart_has_every_series_in_its_legend_and_a_log_scale_drops_non_positive() -> None:
    lines = [Line("train/loss", [1, 2, 3], [1.0, 0.1, 0.01]), Line("test/loss", [1, 3], [2.0, 0.5])]
    text = ANSI.sub("", plot(lines, title="loss", width=60, height=12))
    assert "train/loss" in text and "test/loss" in text and "step" in text
    assert len(text.splitlines()) <= 12
    linear = ticks(text)
    logged = ticks(ANSI.sub("", plot(lines, title="loss", log_y=True, width=60, height=12)))
    steps = [a - b for a, b in itertools.pairwise(linear)]
    ratios = [a / b for a, b in itertools.pairwise(logged)]
    assert max(steps) - min(steps) < 0.02  # evenly spaced values: a linear axis
    assert max(ratios) - min(ratios) < 0.1 and min(ratios) > 2  # even ratios: a log axis
    assert plot([Line("x", [1, 2], [0.0, -1.0])], log_y=True) == "(no values to draw)"


def ticks(chart: str) -> list[float]:
    """The y axis' tick values, top down."""
    return [float(line.split("┤")[0]) for line in chart.splitlines() if "┤" in line]
