"""Small terminal renderings of metrics: the latest values per group, and a chart over steps."""

from __future__ import annotations

from typing import Any

from rich.table import Table

Series = dict[str, dict[str, dict[str, list[Any]]]]


def latest_table(series: Series) -> Table:
    table = Table("GROUP", "METRIC", "STEP", "LATEST", "MIN", "MAX", "POINTS")
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


def pick(series: Series, metric: str | None, group: str | None) -> tuple[str, str] | None:
    """The (group, metric) to chart: the one asked for, else a loss, else the first."""
    pairs = [(g, n) for g, names in sorted(series.items()) for n in sorted(names)]
    if group is not None:
        pairs = [p for p in pairs if p[0] == group]
    if metric is not None:
        pairs = [p for p in pairs if p[1] == metric]
    losses = [p for p in pairs if "loss" in p[1]]
    chosen = losses or pairs
    return chosen[0] if chosen else None


def chart(steps: list[int], values: list[float | None], width: int = 60, height: int = 10) -> str:
    """An ASCII chart of values over steps, with the value range on the left."""
    points = [(s, v) for s, v in zip(steps, values, strict=True) if v is not None]
    if not points:
        return "(no values)"
    low, high = min(v for _, v in points), max(v for _, v in points)
    first, last = min(s for s, _ in points), max(s for s, _ in points)
    span_x, span_y = max(last - first, 1), (high - low) or 1.0
    grid = [[" "] * width for _ in range(height)]
    for step, value in points:
        x = min(int((step - first) / span_x * (width - 1)), width - 1)
        y = min(int((value - low) / span_y * (height - 1)), height - 1)
        grid[height - 1 - y][x] = "•"
    label = max(len(f"{high:.4g}"), len(f"{low:.4g}"))
    rows = []
    for i, row in enumerate(grid):
        tick = f"{high:.4g}" if i == 0 else f"{low:.4g}" if i == height - 1 else ""
        rows.append(f"{tick:>{label}} │{''.join(row)}")
    rows.append(" " * label + " └" + "─" * width)
    rows.append(" " * label + f"  step {first}" + f"step {last}".rjust(width - 6 - len(str(first))))
    return "\n".join(rows)


def merge(series: Series, point: dict[str, Any]) -> None:
    """Add one streamed point to a series."""
    step = point["step"] if point["step"] is not None else point["seq"]
    for name, value in point["values"].items():
        line = series.setdefault(point["group"], {}).setdefault(name, {"steps": [], "values": []})
        line["steps"].append(step)
        line["values"].append(value)
