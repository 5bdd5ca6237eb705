"""`loom runs list|show|compare`: tracked runs (every job is one; so is a run logged with
MLflow's client), searched with MLflow's filter grammar."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from loom.cli.common import client
from loom.cli.output import Format, OutputOpt, emit, whole

app = typer.Typer(
    help="Tracked runs: jobs, and runs logged with MLflow's client.", no_args_is_help=True
)
COLUMNS = 3  # params and metrics a table shows beyond the fixed ones, unless asked


def _value(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


@app.command("list")
def list_runs(
    filter: Annotated[
        str | None,
        typer.Option(
            "--filter",
            "-f",
            help="MLflow's grammar: \"metrics.loss < 0.5 and "
            "params.lr = '0.1' and tags.team LIKE 'vis%' and status = 'FINISHED'\"",
        ),
    ] = None,
    project: Annotated[list[str] | None, typer.Option("--project", "-p", help="id or name")] = None,
    order_by: Annotated[
        list[str] | None, typer.Option("--order-by", help="e.g. 'metrics.accuracy DESC'")
    ] = None,
    column: Annotated[
        list[str] | None,
        typer.Option("--column", "-c", help="a param or metric to show (params.lr, metrics.loss)"),
    ] = None,
    limit: Annotated[int, typer.Option(help="how many runs at most")] = 50,
    deleted: Annotated[bool, typer.Option(help="the deleted runs instead")] = False,
    fmt: OutputOpt = Format.TABLE,
) -> None:
    """Runs that match a filter, newest first (or by --order-by)."""
    with client() as loom:
        found = loom.runs(
            filter=filter, project=project, order_by=order_by, deleted=deleted, max_results=limit
        )
    runs = found["runs"]
    emit(fmt, found, lambda wide: _runs_table(runs, column, wide))


def _chosen(runs: list[dict[str, Any]], columns: list[str] | None, wide: bool) -> list[str]:
    if columns:
        return columns
    params = sorted({f"params.{k}" for r in runs for k in r["params"]})
    metrics = sorted({f"metrics.{k}" for r in runs for k in r["metrics"]})
    found = params + metrics
    return found if wide else found[: COLUMNS * 2]


def _cell(run: dict[str, Any], column: str) -> str:
    kind, _, key = column.partition(".")
    source = {
        "params": "params",
        "param": "params",
        "metrics": "metrics",
        "metric": "metrics",
        "tags": "tags",
        "tag": "tags",
    }.get(kind)
    if source is None:
        return _value(run.get(column))
    return _value(run[source].get(key))


def _runs_table(runs: list[dict[str, Any]], columns: list[str] | None, wide: bool) -> Table:
    chosen = _chosen(runs, columns, wide)
    table = Table(
        whole("RUN", [r["id"] for r in runs]), "NAME", "PROJECT", "STATUS", "STARTED", *chosen
    )
    for run in runs:
        started = (run["start_time"] or "")[:19].replace("T", " ")
        table.add_row(
            run["id"],
            run["name"],
            run["project"] or run["project_id"],
            run["status"],
            started,
            *(_cell(run, c) for c in chosen),
        )
    return table


@app.command("show")
def show(run_id: str, fmt: OutputOpt = Format.TABLE) -> None:
    """A run: its params, tags, latest metrics and the runs it started."""
    with client() as loom:
        run = loom.run(run_id)
    emit(fmt, run, lambda _wide: _run_table(run))


def _run_table(run: dict[str, Any]) -> Table:
    table = Table("", "", title=f"{run['name']} ({run['id']}, {run['status']})")
    for key, value in sorted(run["params"].items()):
        table.add_row(f"param {key}", value)
    for key, value in sorted(run["metrics"].items()):
        table.add_row(f"metric {key}", _value(value))
    for key, value in sorted(run["tags"].items()):
        table.add_row(f"tag {key}", value[:80])
    for child in run.get("children", []):
        table.add_row("child run", f"{child['id']} {child['name']} {child['status']}")
    return table


@app.command("compare")
def compare(
    run_ids: Annotated[list[str], typer.Argument(help="2 to 10 run or job ids")],
    fmt: OutputOpt = Format.TABLE,
) -> None:
    """Runs side by side: params (those that differ marked *) and last metric values."""
    with client() as loom:
        found = loom.compare_runs(run_ids)
    emit(fmt, found, lambda _wide: _compare_table(found))


def _compare_table(found: dict[str, Any]) -> Table:
    runs = found["runs"]
    table = Table("", *(f"{r['name']}\n{r['id']}" for r in runs))
    for param in found["params"]:
        mark = "* " if param["differ"] else "  "
        table.add_row(f"{mark}params.{param['key']}", *(_value(v) for v in param["values"]))
    for key in found["metrics"]:
        last = [r["metrics"].get(key) for r in runs]
        table.add_row(f"  metrics.{key}", *(_value(v) for v in last))
    return table
