"""`loom metrics ID`: the latest values per group and a chart of one metric over steps."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.text import Text

from loom.cli.charts import Series, chart, latest_table, merge, pick
from loom.cli.common import client, console


def _view(series: Series, metric: str | None, group: str | None, title: str) -> Group:
    parts: list[Any] = [Text(title, style="bold"), latest_table(series)]
    chosen = pick(series, metric, group)
    if chosen is not None:
        line = series[chosen[0]][chosen[1]]
        parts += [Text(f"{chosen[0]} / {chosen[1]}"), Text(chart(line["steps"], line["values"]))]
    return Group(*parts)


def metrics(
    job_id: str,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="update live")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="points as JSON lines")] = False,
    metric: Annotated[str | None, typer.Option("--metric", "-m", help="metric to chart")] = None,
    group: Annotated[str | None, typer.Option("--group", "-g")] = None,
    learner: Annotated[int | None, typer.Option("--learner", "-l")] = None,
) -> None:
    """Show a job's evaluation metrics: a table of the latest values and a chart."""
    with client() as loom:
        if follow:
            _follow(loom, job_id, metric, group, learner, as_json)
            return
        if as_json:
            pos = 1
            while True:
                page = loom.metrics(job_id, pos=pos, pagesize=10_000, group=group, learner=learner)
                for point in page["metrics"]:
                    print(json.dumps(point))
                if len(page["metrics"]) < 10_000:
                    return
                pos += 10_000
        series = loom.metrics(job_id, form="series", group=group, learner=learner)["series"]
    if not series:
        console.print(f"{job_id}: no metrics yet")
        return
    console.print(_view(series, metric, group, f"{job_id} metrics"))


def _follow(
    loom: Any, job_id: str, metric: str | None, group: str | None, learner: int | None, raw: bool
) -> None:
    series: Series = {}
    with Live(console=console, auto_refresh=False, transient=False) as live:
        for kind, data in loom.follow(job_id, learner=learner, metrics=True):
            if kind == "metric" and (group is None or data["group"] == group):
                if raw:
                    print(json.dumps(data), flush=True)
                    continue
                merge(series, data)
                live.update(_view(series, metric, group, f"{job_id} metrics (live)"))
                live.refresh()
            elif kind == "end" and not raw:
                live.update(_view(series, metric, group, f"{job_id} {data['state']}"))
                live.refresh()
