"""`loom metrics ID [ID ...]`: the latest values per group, and a chart of one metric over
steps in every group that has it (train and test overlaid), or of several jobs compared."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.text import Text

from loom.cli.charts import Series, latest_table, lines_of, merge, pick, plot
from loom.cli.common import client, console, err

MAX_WIDTH = 120  # a chart wider than this is no easier to read


@dataclass(frozen=True)
class Look:
    """What the chart shows and how."""

    metric: str | None = None
    group: str | None = None
    log_y: bool = False
    smooth: float = 0.0


def _view(found: dict[str, Series], look: Look, title: str) -> Group:
    several = len(found) > 1
    parts: list[Any] = [Text(title, style="bold")]
    parts += [latest_table(series, job if several else None) for job, series in found.items()]
    metric = pick(list(found.values()), look.metric, look.group)
    if metric is None:
        asked = f" {look.metric!r}" if look.metric else ""
        parts.append(Text(f"no metric{asked} to chart"))
        return Group(*parts)
    drawn = plot(
        lines_of(found, metric, look.group),
        title=metric + (" (log scale)" if look.log_y else ""),
        log_y=look.log_y,
        smooth=look.smooth,
        width=min(console.width, MAX_WIDTH),
    )
    return Group(*parts, Text.from_ansi(drawn))


def metrics(
    job_ids: Annotated[list[str], typer.Argument(help="a job, or several to compare")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="update live")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="points as JSON lines")] = False,
    metric: Annotated[str | None, typer.Option("--metric", "-m", help="metric to chart")] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="only this group")] = None,
    learner: Annotated[int | None, typer.Option("--learner", "-l")] = None,
    log_y: Annotated[bool, typer.Option("--log", help="a log scale for the values")] = False,
    smooth: Annotated[
        float, typer.Option(min=0.0, max=0.999, help="smoothing, 0 (none) to 0.999")
    ] = 0.0,
) -> None:
    """Show jobs' evaluation metrics: the latest values, and a chart of one metric (a loss,
    unless --metric) in every group that has it; several jobs are drawn together."""
    look = Look(metric, group, log_y, smooth)
    if (follow or as_json) and len(job_ids) > 1:
        err.print("[red]error:[/red] --follow and --json take one job")
        raise typer.Exit(2)
    with client() as loom:
        if follow:
            _follow(loom, job_ids[0], look, learner, as_json)
            return
        if as_json:
            _print_points(loom, job_ids[0], group, learner)
            return
        found = {
            job: loom.metrics(job, form="series", group=group, learner=learner)["series"]
            for job in job_ids
        }
    if not any(found.values()):
        console.print(f"{', '.join(job_ids)}: no metrics yet")
        return
    console.print(_view(found, look, f"{', '.join(job_ids)} metrics"))


def _print_points(loom: Any, job_id: str, group: str | None, learner: int | None) -> None:
    pos = 1
    while True:
        page = loom.metrics(job_id, pos=pos, pagesize=10_000, group=group, learner=learner)
        for point in page["metrics"]:
            print(json.dumps(point))
        if len(page["metrics"]) < 10_000:
            return
        pos += 10_000


def _follow(loom: Any, job_id: str, look: Look, learner: int | None, raw: bool) -> None:
    series: Series = {}
    with Live(console=console, auto_refresh=False, transient=False) as live:
        for kind, data in loom.follow(job_id, learner=learner, metrics=True):
            if kind == "metric" and (look.group is None or data["group"] == look.group):
                if raw:
                    print(json.dumps(data), flush=True)
                    continue
                merge(series, data)
                live.update(_view({job_id: series}, look, f"{job_id} metrics (live)"))
                live.refresh()
            elif kind == "end" and not raw:
                live.update(_view({job_id: series}, look, f"{job_id} {data['state']}"))
                live.refresh()
