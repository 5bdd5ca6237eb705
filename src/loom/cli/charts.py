"""Terminal renderings of metrics: the latest values per group, and charts over steps (drawn
by plotext: several series overlaid, log scale, smoothing)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import plotext as plt  # type: ignore[import-untyped]
from rich.table import Table

Series = dict[str, dict[str, dict[str, list[Any]]]]


def latest_table(series: Series, title: str | None = None) -> Table:
    table = Table("GROUP", "METRIC", "STEP", "LATEST", "MIN", "MAX", "POINTS", title=title)
    for group, names in sorted(series.items()):
        for name, line in sorted(names.items()):
            values = [v for v in line["values"] if v is not None]
            if not values:
                continue
            table.add_row(
                group,
                name,
                str(line["steps"][-1]),
                f"{values[-1]:.4g}",
                f"{min(values):.4g}",
                f"{max(values):.4g}",
                str(len(values)),
            )
    return table


def pick(found: list[Series], metric: str | None, group: str | None) -> str | None:
    """The metric to chart: the one asked for, else a loss, else the first there is."""
    names = sorted(
        {n for series in found for g, names in series.items() if group in (None, g) for n in names}
    )
    if metric is not None:
        return metric if metric in names else None
    losses = [n for n in names if "loss" in n]
    chosen = losses or names
    return chosen[0] if chosen else None


def lines_of(found: dict[str, Series], metric: str, group: str | None) -> list[Line]:
    """That metric in every group that has it (train and test, say), of each job; labelled by
    group, and by job too when there are several."""
    several = len(found) > 1
    return [
        Line(f"{job}:{g}/{metric}" if several else f"{g}/{metric}", *_xy(series[g][metric]))
        for job, series in found.items()
        for g in sorted(series)
        if metric in series[g] and group in (None, g)
    ]


def _xy(line: dict[str, list[Any]]) -> tuple[list[Any], list[float | None]]:
    return line["steps"], line["values"]


@dataclass(frozen=True)
class Line:
    """One series to draw: its label (`train/loss`, or `job:train/loss` when comparing)."""

    label: str
    steps: list[Any]
    values: list[float | None]


COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "white")


def smoothed(values: list[float | None], weight: float) -> list[float | None]:
    """TensorBoard's smoothing: an exponential moving average, debiased so the curve starts at
    the first value. `weight` 0 draws the values as they are, 0.99 a very smooth curve."""
    if weight <= 0:
        return list(values)
    out: list[float | None] = []
    average, count = 0.0, 0
    for value in values:
        if value is None or math.isnan(value):  # a gap stays a gap
            out.append(None)
            continue
        average = average * weight + (1 - weight) * value
        count += 1
        out.append(average / (1 - weight**count))
    return out


def plot(
    lines: list[Line],
    *,
    title: str = "",
    log_y: bool = False,
    smooth: float = 0.0,
    width: int = 80,
    height: int = 16,
) -> str:
    """The lines overlaid in one chart (plotext, braille dots, a legend), as text with ANSI
    colours. With `log_y`, values ≤ 0 are left out (a log scale cannot show them)."""
    plt.clear_figure()
    plt.theme("clear")
    plt.plotsize(width, height)
    drawn = 0
    for n, line in enumerate(lines):
        points = [
            (step, value)
            for step, value in zip(line.steps, smoothed(line.values, smooth), strict=True)
            if value is not None and (value > 0 or not log_y)
        ]
        if points:
            xs, ys = zip(*points, strict=True)
            color = COLORS[n % len(COLORS)]
            plt.plot(list(xs), list(ys), label=line.label, marker="braille", color=color)
            drawn += 1
    if not drawn:
        return "(no values to draw)"
    if log_y:
        plt.yscale("log")
    plt.title(title)
    plt.xlabel("step")
    return str(plt.build())


def merge(series: Series, point: dict[str, Any]) -> None:
    """Add one streamed point to a series."""
    step = point["step"] if point["step"] is not None else point["seq"]
    for name, value in point["values"].items():
        line = series.setdefault(point["group"], {}).setdefault(name, {"steps": [], "values": []})
        line["steps"].append(step)
        line["values"].append(value)
