"""`loom models list|show|best|alias|download|delete`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from loom.cli.common import client, console
from loom.cli.output import Format, JsonOpt, OutputOpt, WatchOpt, chosen, emit, watch, whole
from loom.cli.progress import transfer

app = typer.Typer(help="The model registry: versions of trained models.", no_args_is_help=True)


def _metrics(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))


def _version_row(table: Table, v: dict[str, Any]) -> None:
    params = v["provenance"].get("params", {})
    table.add_row(
        str(v["version"]),
        ",".join(v["aliases"]),
        v["provenance"]["job_id"],
        " ".join(f"{k}={value}" for k, value in params.items()),
        _metrics(v["metrics"]),
        ", ".join(f["path"] for f in v["files"]),
    )


@app.command("list")
def list_models(fmt: OutputOpt = Format.TABLE, watching: WatchOpt = False) -> None:
    """Your models."""
    with client() as loom:
        if watching:
            watch(fmt, loom.models, lambda found, _wide: _models_table(found))
            return
        models = loom.models()
    emit(fmt, models, lambda _wide: _models_table(models))


def _models_table(models: list[dict[str, Any]]) -> Table:
    table = Table(whole("NAME", [m["name"] for m in models]), "VERSIONS", "LATEST", "ALIASES")
    for m in models:
        aliases = " ".join(f"{a}→{v}" for a, v in sorted(m["aliases"].items()))
        table.add_row(m["name"], str(m["versions"]), str(m["latest_version"]), aliases)
    return table


@app.command("show")
def show(name: str, fmt: OutputOpt = Format.TABLE, as_json: JsonOpt = False) -> None:
    """A model's versions with their provenance and final metrics."""
    with client() as loom:
        model = loom.model(name)
    emit(chosen(fmt, as_json), model, lambda _wide: _versions_table(name, model))


def _versions_table(name: str, model: dict[str, Any]) -> Table:
    jobs = whole("JOB", [v["provenance"]["job_id"] for v in model["version_list"]])
    table = Table("VERSION", "ALIASES", jobs, "PARAMS", "FINAL METRICS", "FILES", title=name)
    for version in model["version_list"]:
        _version_row(table, version)
    return table


@app.command("best")
def best(
    name: str,
    metric: Annotated[str, typer.Option("--metric", "-m", help="e.g. accuracy")],
    mode: Annotated[str, typer.Option(help="max or min")] = "max",
) -> None:
    """The version with the best final value of a metric."""
    with client() as loom:
        version = loom.best_model(name, metric, mode)
    console.print(
        f"{name} version {version['version']} (job {version['provenance']['job_id']}): "
        f"{_metrics(version['metrics'])}"
    )


@app.command("alias")
def alias(name: str, alias_name: str, version: str) -> None:
    """Point an alias such as `production` at a version."""
    with client() as loom:
        found = loom.set_alias(name, alias_name, version)
    console.print(f"{name}@{alias_name} → version {found['version']}")


@app.command("download")
def download(
    name: str,
    version: Annotated[str, typer.Argument(help="number, alias or latest")] = "latest",
    file: Annotated[str | None, typer.Option(help="one file, e.g. model.onnx")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o")] = None,
) -> None:
    """Download a version's files (a zip) or one of them."""
    target = output or Path(file or f"{name}-{version}.zip")
    with client() as loom, transfer(f"downloading {target.name}") as told:
        loom.download_model(name, version, target, file, progress=told)
    console.print(f"saved {target}")


@app.command("factsheet")
def factsheet(
    ref: Annotated[str, typer.Argument(help="MODEL@VERSION (a number, an alias or latest)")],
    fmt: Annotated[
        str, typer.Option("--output", "-o", help="markdown (default), json or yaml")
    ] = "markdown",
) -> None:
    """A version's factsheet: provenance, training metrics, evaluations, drift history,
    owner and deployments."""
    name, _, version = ref.partition("@")
    if not name:
        raise typer.BadParameter(f"{ref!r}: use MODEL@VERSION")
    with client() as loom:
        if fmt == "markdown":
            typer.echo(loom.factsheet(name, version or "latest", markdown=True), nl=False)
            return
        found = loom.factsheet(name, version or "latest")
    emit(Format(fmt), found, lambda _wide: None)


@app.command("delete")
def delete(
    name: str, version: Annotated[str | None, typer.Argument(help="one version only")] = None
) -> None:
    """Delete a model, or one of its versions."""
    with client() as loom:
        loom.delete_model(name, version)
    console.print(f"deleted {name}" + (f" version {version}" if version else ""))
