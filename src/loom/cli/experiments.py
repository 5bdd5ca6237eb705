"""`loom experiments create|list|show|halt|resume|delete`: hyperparameter searches in Katib's
form, with their trial table and a chart of the objective over trials."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from loom.cli.charts import Line, plot
from loom.cli.common import client, console, err
from loom.cli.jobs import zip_code
from loom.cli.output import Format, JsonOpt, OutputOpt, WatchOpt, chosen, emit, watch, whole
from loom.domain.errors import ManifestError
from loom.domain.katib import parse_experiment

app = typer.Typer(
    help="Experiments: hyperparameter searches (Katib's v1beta1 form) whose trials are jobs.",
    no_args_is_help=True,
)

TRIAL_STYLE = {
    "SUCCEEDED": "green",
    "RUNNING": "cyan",
    "CREATED": "white",
    "FAILED": "red",
    "KILLED": "yellow",
    "EARLY_STOPPED": "magenta",
    "METRICS_UNAVAILABLE": "yellow",
}


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else ("" if value is None else str(value))


@app.command("create")
def create(
    experiment: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    code: Annotated[Path, typer.Argument(help="the code every trial runs: a folder or a zip")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="show the trials until it ends")
    ] = False,
) -> None:
    """Start an experiment: a Katib Experiment whose trialSpec is a Loom manifest."""
    text = experiment.read_bytes()
    try:  # here first: a typo is told before the code is zipped and sent
        parse_experiment(text)
    except ManifestError as exc:
        err.print(f"[red]error:[/red] {escape(exc.message)}", highlight=False)
        raise typer.Exit(2) from exc
    with client() as loom:
        made = loom.create_experiment(text, zip_code(code))
        console.print(f"Created experiment [bold]{made['name']}[/bold] ({made['id']})")
        for warning in made.get("warnings", []):
            err.print(f"[yellow]note:[/yellow] {escape(warning)}", highlight=False)
        if not follow:
            return
        found = loom.wait_experiment(made["id"], seen=_progress)
    _show(found)
    if found["state"] != "SUCCEEDED":
        raise typer.Exit(1)


def _progress(found: dict[str, Any]) -> None:
    counts = ", ".join(f"{n} {s.lower()}" for s, n in found["trials_by_state"].items())
    best = found.get("best_trial") or {}
    said = f"; best {_num(best.get('objective'))}" if best else ""
    err.print(f"{found['name']}: {found['state']}, {counts or 'no trials yet'}{said}")


@app.command("list")
def list_experiments(
    owner: Annotated[str | None, typer.Option(help="admins: this user's experiments")] = None,
    everyone: Annotated[bool, typer.Option("--all", help="admins: every user's")] = False,
    fmt: OutputOpt = Format.TABLE,
    watching: WatchOpt = False,
) -> None:
    """Your experiments, newest first."""
    with client() as loom:
        fetch = partial(loom.experiments, owner, everyone)
        if watching:
            watch(fmt, fetch, lambda found, _wide: _table(found))
            return
        found = fetch()
    emit(fmt, found, lambda _wide: _table(found))


def _table(found: list[dict[str, Any]]) -> Table:
    name = whole("NAME", [e["name"] for e in found])
    owners = any(e.get("owner") for e in found) and len({e.get("owner") for e in found}) > 1
    states = whole("STATE", [e["state"] for e in found])
    table = Table(name, *(["OWNER"] if owners else []), states, "ALGORITHM", "TRIALS", "BEST",
                  "MODEL", "MESSAGE")  # fmt: skip
    for e in found:
        best = e.get("best_trial") or {}
        table.add_row(
            e["name"],
            *([e.get("owner") or ""] if owners else []),
            e["state"],
            e.get("algorithm") or "",
            f"{e['trials']}/{e['max_trial_count'] or '∞'}",
            _num(best.get("objective")),
            e.get("best_model") or "",
            escape(e["message"]),
        )
    return table


@app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="the experiment's name or id")],
    fmt: OutputOpt = Format.TABLE,
    as_json: JsonOpt = False,
    watching: WatchOpt = False,
) -> None:
    """The experiment, its trial table, and the objective over trials."""
    with client() as loom:
        if watching:
            watch(chosen(fmt, as_json), lambda: loom.experiment(ref), lambda f, _w: _render(f))
            return
        found = loom.experiment(ref)
    emit(chosen(fmt, as_json), found, lambda _wide: _show(found))


def _show(found: dict[str, Any]) -> None:
    console.print(_render(found))
    chart = objective_chart(found)
    if chart:  # plotext's colours, as Rich's: none into a pipe or a file
        console.print(Text.from_ansi(chart))


def _render(found: dict[str, Any]) -> Table:
    objective = found.get("objective") or {}
    title = (
        f"{found['name']}: {found['state']}"
        + (f" ({found['reason']})" if found.get("reason") else "")
        + f" — {objective.get('type', '')} {objective.get('objectiveMetricName', '')}"
        + f", {found.get('algorithm')}"
    )
    trials = found.get("trial_list", [])
    names = sorted({k for t in trials for k in t["parameters"]})
    notes = any(t.get("message") for t in trials)
    columns = [
        Column("#", no_wrap=True),
        whole("STATE", [t["state"] for t in trials]),
        *names,
        Column("OBJECTIVE", no_wrap=True),
        Column("TIME", no_wrap=True),
        whole("JOB", [t["job_id"] for t in trials]),
    ]
    table = Table(*columns, *(["NOTE"] if notes else []), title=title)
    best = (found.get("best_trial") or {}).get("number")
    for t in trials:
        style = TRIAL_STYLE.get(t["state"], "white")
        mark = " ★" if t["number"] == best else ""
        duration = t.get("duration_s")
        row = [
            f"{t['number']}{mark}",
            f"[{style}]{t['state']}[/{style}]",
            *(t["parameters"].get(n, "") for n in names),
            _num(t.get("objective")),
            f"{duration:.0f} s" if duration is not None else "",
            t["job_id"],
        ]
        table.add_row(*row, *([escape(t.get("message") or "")] if notes else []))
    caption = escape(found.get("message") or "")
    if found.get("best_model"):
        model = found["best_model"].split("@")[0]
        caption += (
            f"\nbest model: {found['best_model']}, now {model}@best: loom deploy {model}@best"
        )
    table.caption = caption
    return table


def objective_chart(found: dict[str, Any]) -> str:
    """Each trial's objective by trial number, and the best so far."""
    trials = [t for t in found.get("trial_list", []) if t.get("objective") is not None]
    if not trials:
        return ""
    maximize = (found.get("objective") or {}).get("type") == "maximize"
    steps = [t["number"] for t in trials]
    values = [float(t["objective"]) for t in trials]
    running: list[float | None] = []
    for value in values:
        last = running[-1] if running else None
        better = last is None or (value > last if maximize else value < last)
        running.append(value if better else last)
    metric = (found.get("objective") or {}).get("objectiveMetricName", "objective")
    lines = [Line(metric, steps, list(values)), Line("best so far", steps, running)]
    return plot(lines, title=f"{metric} over trials", height=12).replace("step", "trial")


@app.command("halt")
def halt(ref: str) -> None:
    """No new trial; running trials are halted, to go on when it resumes."""
    with client() as loom:
        found = loom.halt_experiment(ref)
    console.print(f"{found['name']}: {found['state']}")


@app.command("resume")
def resume(
    ref: str,
    max_trials: Annotated[
        int | None,
        typer.Option("--max-trials", help="an ended experiment's new maxTrialCount"),
    ] = None,
) -> None:
    """Go on where it was (halted), or with more trials (ended, resumePolicy LongRunning)."""
    with client() as loom:
        found = loom.resume_experiment(ref, max_trials)
    console.print(f"{found['name']}: {found['state']}")


@app.command("delete")
def delete(ref: str) -> None:
    """The experiment, its trials and their jobs (registered models stay)."""
    with client() as loom:
        loom.delete_experiment(ref)
    console.print(f"Deleted experiment {ref}")
