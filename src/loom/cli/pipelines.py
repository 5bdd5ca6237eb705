"""`loom pipelines run|list|show|logs|halt|retry|delete`: runs of DAGs of jobs, experiments,
model selections and deployments (docs/pipelines.md), drawn as a tree of their steps; and
`schedule|schedules|pause|unpause|unschedule`: runs started at the times of a cron, or when a
deployment drifts or new data arrives."""

from __future__ import annotations

import json
import math
import runpy
from functools import partial
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import yaml
from rich.live import Live
from rich.markup import escape
from rich.table import Column, Table

from loom.cli import jobs
from loom.cli.common import client, console, err
from loom.cli.jobs import zip_code
from loom.cli.output import Format, JsonOpt, OutputOpt, chosen, emit, whole
from loom.client import LoomClient
from loom.client.pipeline_dsl import Pipeline

app = typer.Typer(
    help="Pipelines: DAGs of jobs, experiments, model selections and deployments, run by the "
    "platform.",
    no_args_is_help=True,
)

STATE_STYLE = {
    "PENDING": "white",
    "WAITING": "white",
    "RUNNING": "cyan",
    "SUCCEEDED": "green",
    "CACHED": "blue",
    "FAILED": "red",
    "SKIPPED": "magenta",
    "HALTED": "yellow",
}
UNDONE = ("WAITING", "RUNNING")  # a step in neither has ended


def _styled(state: str) -> str:
    style = STATE_STYLE.get(state, "white")
    return f"[{style}]{state}[/{style}]"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    whole_s = round(seconds)
    if whole_s < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{whole_s} s"
    minutes, secs = divmod(whole_s, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _when(at: str | None) -> str:
    return (at or "")[:19].replace("T", " ")


# -- run ---------------------------------------------------------------------------------------
FileArg = Annotated[
    Path,
    typer.Argument(
        exists=True,
        dir_okay=False,
        readable=True,
        help="the pipeline's YAML, or a .py file whose `pipeline` is a Pipeline (its DSL)",
    ),
]
CodeArg = Annotated[Path | None, typer.Argument(help="the code its steps run: a folder or a zip")]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", help="name=value (YAML-typed: epochs=3 is a number)"),
]


@app.command("run")
def run(
    file: FileArg,
    code: CodeArg = None,
    param: ParamOpt = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="show its steps until it ends")
    ] = False,
) -> None:
    """Start a run of a pipeline (Loom's spec, a KFP-compiled pipeline or an Argo Workflow),
    with the code folder its steps run."""
    spec, code_zip, parameters = _inputs(file, code, param)
    with client() as loom:
        made = loom.run_pipeline(spec, code_zip, parameters)
        console.print(f"Started run [bold]{made['id']}[/bold] of {escape(made['name'])}")
        for warning in made.get("warnings", []):
            err.print(f"[yellow]note:[/yellow] {escape(warning)}", highlight=False)
        if follow:
            _follow(loom, made["id"], Format.TABLE)


def _inputs(
    file: Path, code: Path | None, param: list[str] | None
) -> tuple[str | bytes, bytes | None, dict[str, Any] | None]:
    """What a run or a schedule is made of: the pipeline's YAML, the code zipped (None without
    a folder) and the `-p` parameters (None without any). Bad input is told before zipping."""
    spec = _load(file)
    parameters = _parameters(param or [])
    code_zip = zip_code(code) if code is not None else None
    return spec, code_zip, parameters or None


def _load(file: Path) -> str | bytes:
    """The pipeline's YAML: the file's, or a .py file's `pipeline` written out. A file that is
    not YAML of a mapping is told here, before the code is zipped and sent."""
    if file.suffix == ".py":
        found = runpy.run_path(str(file), run_name="__loom_pipeline__").get("pipeline")
        if not isinstance(found, Pipeline):
            _usage(f"{file} defines no module-level `pipeline` that is a Pipeline")
        return found.to_yaml()
    text = file.read_bytes()
    try:  # several documents: a KFP pipeline's platform spec, Argo's WorkflowTemplates
        loaded = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        _usage(f"{file}: not YAML ({exc})")
    if not loaded or not all(isinstance(d, dict) for d in loaded):
        _usage(
            f"{file}: a pipeline is a mapping with `name` and `steps` (or a KFP-compiled "
            "pipeline, or an Argo Workflow)"
        )
    return text


def _parameters(given: list[str]) -> dict[str, Any]:
    """`-p name=value`s, each value read as YAML (3 is a number, [8, 16] a list)."""
    parameters: dict[str, Any] = {}
    for each in given:
        name, equals, value = each.partition("=")
        if not equals or not name.strip():
            _usage(f"-p {each!r}: say name=value")
        try:
            parameters[name.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            _usage(f"-p {name}: {value!r} is not a YAML value ({exc})")
    return parameters


def _usage(message: str) -> NoReturn:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    raise typer.Exit(2)


def _follow(loom: LoomClient, run_id: str, fmt: Format) -> None:
    """Show the run each time it changes until it ends; exit 1 unless it succeeded."""
    try:
        if fmt in (Format.JSON, Format.YAML):
            found = loom.wait_pipeline_run(
                run_id, math.inf, 1.0, lambda r: emit(fmt, r, lambda _wide: None)
            )
        else:
            with Live(console=console, auto_refresh=False) as live:
                drawn = partial(_redraw, live)
                found = loom.wait_pipeline_run(run_id, math.inf, 1.0, drawn)
    except KeyboardInterrupt:
        err.print(f"the run goes on: loom pipelines show {run_id} -w")
        return
    if found["state"] != "SUCCEEDED":
        raise typer.Exit(1)


def _redraw(live: Live, found: dict[str, Any]) -> None:
    live.update(render(found), refresh=True)


# -- list --------------------------------------------------------------------------------------
@app.command("list")
def list_runs(
    pipeline: Annotated[str | None, typer.Option(help="only this pipeline's runs")] = None,
    owner: Annotated[str | None, typer.Option(help="admins: this user's runs")] = None,
    everyone: Annotated[bool, typer.Option("--all", help="admins: every user's")] = False,
    fmt: OutputOpt = Format.TABLE,
) -> None:
    """Your pipeline runs, newest first."""
    with client() as loom:
        found = loom.pipeline_runs(pipeline, owner, everyone)
    emit(fmt, found, lambda _wide: runs_table(found))


def runs_table(found: list[dict[str, Any]]) -> Table:
    """One line a run: its state, how many steps have ended, and how many were cached."""
    owners = len({r.get("owner") for r in found}) > 1
    scheduled = any(r.get("schedule") for r in found)
    table = Table(
        whole("ID", [r["id"] for r in found]), "PIPELINE", *(["SCHEDULE"] if scheduled else []),
        *(["OWNER"] if owners else []), whole("STATE", [r["state"] for r in found]), "STEPS",
        "CACHED", Column("STARTED", no_wrap=True), "DURATION",
    )  # fmt: skip
    for r in found:
        by_state: dict[str, int] = r.get("steps_by_state") or {}
        done = sum(n for state, n in by_state.items() if state not in UNDONE)
        table.add_row(
            r["id"],
            escape(r["name"]),
            *([escape(r.get("schedule") or "")] if scheduled else []),
            *([r.get("owner") or ""] if owners else []),
            _styled(r["state"]),
            f"{done}/{r.get('steps_total', '?')}",
            str(r.get("cached") or 0),
            _when(r.get("started_at") or r.get("created_at")),
            _duration(r.get("duration_s")),
        )
    return table


# -- show --------------------------------------------------------------------------------------
@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="the run's id")],
    fmt: OutputOpt = Format.TABLE,
    as_json: JsonOpt = False,
    watching: Annotated[
        bool, typer.Option("--watch", "-w", help="redrawn as it changes, until it ends")
    ] = False,
) -> None:
    """The run's DAG: each step's state, time, cache hit and jobs; a fan-out's items under it."""
    with client() as loom:
        if watching:
            _follow(loom, run_id, chosen(fmt, as_json))
            return
        found = loom.pipeline_run(run_id)
    emit(chosen(fmt, as_json), found, lambda _wide: render(found))


def depths(steps: list[dict[str, Any]]) -> dict[str, int]:
    """Each step's depth in the DAG: the longest path to it from a step that needs none (the
    server says it as `depth`; this is for one that does not)."""
    needs = {s["name"]: list(s.get("after") or []) for s in steps}
    found: dict[str, int] = {}

    def depth(name: str, path: frozenset[str]) -> int:
        if name not in found:
            earlier = [a for a in needs[name] if a in needs and a not in path]  # no cycles
            found[name] = max((depth(a, path | {name}) + 1 for a in earlier), default=0)
        return found[name]

    for name in needs:
        depth(name, frozenset())
    return found


def render(found: dict[str, Any]) -> Table:
    """The run as a table of its steps, each indented by its depth, in the order they run."""
    steps: list[dict[str, Any]] = found.get("steps") or []
    deep = depths(steps) | {s["name"]: s["depth"] for s in steps if s.get("depth") is not None}
    ordered = sorted(steps, key=lambda s: (bool(s.get("exit_handler")), deep[s["name"]]))
    rows = [row for s in ordered for row in _step_rows(s, deep[s["name"]])]
    notes = any(row[-1] for row in rows)
    columns: list[Column | str] = [
        Column("STEP", no_wrap=True),
        "KIND",
        "STATE",
        Column("TIME", no_wrap=True, justify="right"),
        "CACHED",
        whole("JOB", [row[5] for row in rows]),
    ]
    title = f"{escape(found['name'])} {found['id']}: {_styled(found['state'])}"
    table = Table(*columns, *(["MESSAGE"] if notes else []), title=title, title_justify="left")
    for row in rows:
        table.add_row(*(row if notes else row[:-1]))
    table.caption = _caption(found)
    return table


def _step_rows(step: dict[str, Any], depth: int) -> list[list[str]]:
    indent = "  " * depth
    mark = " (on exit)" if step.get("exit_handler") else ""
    tasks: list[dict[str, Any]] = step.get("tasks") or []
    fanned = step.get("fan_out", len(tasks) > 1 or any(t.get("item") is not None for t in tasks))
    only = tasks[0] if len(tasks) == 1 and not fanned else {}
    message = step.get("message") or ""
    if only.get("attempt", 1) > 1:
        message = f"attempt {only['attempt']}" + (f": {message}" if message else "")
    rows = [
        [
            f"{indent}{escape(step['name'])}{mark}",
            step.get("kind", ""),
            _styled(step.get("state") or "WAITING"),
            _duration(step.get("duration_s")),
            "cached" if step.get("cached") else "",
            only.get("job_id") or "",
            escape(message),
        ]
    ]
    if fanned:
        rows += [_task_row(t, indent) for t in tasks]
    return rows


def _task_row(task: dict[str, Any], indent: str) -> list[str]:
    message = task.get("message") or ""
    if task.get("attempt", 1) > 1:
        message = f"attempt {task['attempt']}" + (f": {message}" if message else "")
    return [
        f"{indent}  └ \\[{task['index']}] {escape(_item(task.get('item')))}",
        "",
        _styled(task["state"]),
        _duration(task.get("duration_s")),
        "cached" if task.get("cached") else "",
        task.get("job_id") or "",
        escape(message),
    ]


def _item(value: Any) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _caption(found: dict[str, Any]) -> str:
    said = [escape(found["message"])] if found.get("message") else []
    parameters = found.get("parameters") or {}
    if parameters:
        values = ", ".join(f"{k}={json.dumps(v)}" for k, v in parameters.items())
        said.append(f"parameters: {escape(values)}")
    by_state: dict[str, int] = found.get("steps_by_state") or {}
    counts = ", ".join(f"{n} {state.lower()}" for state, n in by_state.items())
    timing = f" in {_duration(found['duration_s'])}" if found.get("duration_s") is not None else ""
    said.append(
        f"{found.get('steps_total', len(found.get('steps') or []))} steps: {counts}{timing}"
    )
    return "\n".join(said)


# -- logs --------------------------------------------------------------------------------------
@app.command("logs")
def logs(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="the run's id")],
    step: Annotated[str, typer.Argument(help="the step's name")],
    index: Annotated[int | None, typer.Option("--index", help="a fan-out's item, from 0")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="go on with new lines")] = False,
) -> None:
    """Print the logs of a step's job, as `loom logs JOB` does."""
    with client() as loom:
        found = loom.pipeline_run(run_id)
    job_id = job_of(found, step, index)
    jobs.logs(job_id, follow=follow, learner=None, tail=None, since=None, grep=None)


def job_of(found: dict[str, Any], name: str, index: int | None) -> str:
    """The job of the step `name` (of its item `index`, in a fan-out); exit 1 if it has none."""
    steps = {s["name"]: s for s in found.get("steps") or []}
    if name not in steps:
        _fail(f"run {found['id']} has no step {name!r}; its steps: {', '.join(steps)}")
    tasks: list[dict[str, Any]] = steps[name].get("tasks") or []
    if index is None and len(tasks) > 1:
        _fail(f"step {name!r} runs {len(tasks)} items: say which with --index 0…{len(tasks) - 1}")
    chosen_task = next((t for t in tasks if index is None or t.get("index") == index), None)
    if chosen_task is None:
        which = f"no item {index}" if index is not None and tasks else "no job yet"
        _fail(f"step {name!r} has {which} ({steps[name].get('state') or 'WAITING'})")
    job_id = chosen_task.get("job_id")
    if not job_id:
        _fail(f"step {name!r} has no job ({chosen_task['state']})")
    return str(job_id)


def _fail(message: str) -> NoReturn:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    raise typer.Exit(1)


# -- halt, retry, delete -----------------------------------------------------------------------
@app.command("halt")
def halt(run_id: Annotated[str, typer.Argument(metavar="RUN")]) -> None:
    """Its running steps' jobs are halted; nothing new starts."""
    with client() as loom:
        found = loom.halt_pipeline_run(run_id)
    console.print(f"{run_id}: {_styled(found.get('state', 'halt requested'))}")


@app.command("retry")
def retry(run_id: Annotated[str, typer.Argument(metavar="RUN")]) -> None:
    """Its failed, halted and skipped steps run again; the rest are kept."""
    with client() as loom:
        found = loom.retry_pipeline_run(run_id)
    console.print(f"{run_id}: {_styled(found.get('state', 'retried'))}")


@app.command("delete")
def delete(run_id: Annotated[str, typer.Argument(metavar="RUN")]) -> None:
    """The run and its jobs; registered models and deployments stay."""
    with client() as loom:
        loom.delete_pipeline_run(run_id)
    console.print(f"Deleted pipeline run {run_id}")


# -- schedules ---------------------------------------------------------------------------------
@app.command("schedule")
def schedule(
    file: FileArg,
    name: Annotated[str, typer.Option("--name", help="the schedule's name (unique among yours)")],
    cron: Annotated[
        str,
        typer.Option(
            "--cron", help='when, in UTC: "minute hour day month weekday" or @hourly, @daily…'
        ),
    ] = "",
    code: CodeArg = None,
    param: ParamOpt = None,
    disabled: Annotated[
        bool, typer.Option("--disabled", help="made paused: no runs until `unpause`")
    ] = False,
    on_drift: Annotated[
        str | None,
        typer.Option(
            "--on-drift",
            metavar="DEPLOYMENT",
            help="also run when a window of requests to this deployment of yours drifts",
        ),
    ] = None,
    cooldown: Annotated[
        float, typer.Option("--cooldown", help="--on-drift: at most one run per SECONDS")
    ] = 3600.0,
    on_new_data: Annotated[
        str | None,
        typer.Option(
            "--on-new-data",
            metavar="URL",
            help="also run when a new object appears under this host folder or s3://BUCKET/PREFIX",
        ),
    ] = None,
    poll: Annotated[
        float, typer.Option("--poll", help="--on-new-data: list it every SECONDS")
    ] = 60.0,
    connection_file: Annotated[
        Path | None,
        typer.Option(
            "--connection-file",
            help="--on-new-data: a YAML or JSON file of the S3 prefix's credentials "
            "(endpoint_url, access_key_id, secret_access_key), sealed by the platform",
        ),
    ] = None,
) -> None:
    """Run a pipeline at each time of a cron (UTC), or when a deployment drifts, or when new
    data arrives, with its own copy of the spec, code and parameters."""
    trigger = _trigger(on_drift, cooldown, on_new_data, poll)
    if connection_file is not None:
        if trigger is None or "new_data" not in trigger:
            _usage("--connection-file goes with --on-new-data")
        trigger["new_data"]["connection"] = _connection(connection_file)
    if cron or trigger is None:
        _check_cron(cron)
    spec, code_zip, parameters = _inputs(file, code, param)
    with client() as loom:
        made = loom.schedule_pipeline(
            spec, name, cron, code_zip, parameters, enabled=not disabled, trigger=trigger
        )
    when = _when(made.get("next_run_at"))
    if disabled:
        then = "paused: no runs until `unpause`"
    else:
        then = ", ".join(
            [*([f"next run {when} UTC"] if when else []), *([_on(trigger)] if trigger else [])]
        )
    said = f" ({escape(made['cron'])})" if made.get("cron") else ""
    console.print(f"Scheduled [bold]{escape(made['name'])}[/bold]{said}: {escape(then)}")


def _trigger(
    on_drift: str | None, cooldown: float, on_new_data: str | None, poll: float
) -> dict[str, Any] | None:
    """The schedule's trigger from the options; one at most."""
    if on_drift and on_new_data:
        _usage("--on-drift and --on-new-data: one trigger a schedule (make two schedules)")
    if on_drift:
        return {"drift": {"deployment": on_drift, "cooldown_s": cooldown}}
    if on_new_data:
        return {"new_data": {"url": on_new_data, "poll_s": poll}}
    return None


def _connection(path: Path) -> dict[str, str]:
    """The credentials a file holds: a mapping of names to text (never echoed)."""
    try:
        found = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        _usage(f"--connection-file {path}: not read ({type(exc).__name__})")
    if not isinstance(found, dict) or not found:
        _usage(f"--connection-file {path}: a mapping such as endpoint_url: …, access_key_id: …")
    return {str(k): str(v) for k, v in found.items()}


def _on(trigger: dict[str, Any]) -> str:
    """What a schedule's trigger waits for, in words."""
    if "drift" in trigger:
        return f"runs when deployment {trigger['drift']['deployment']} drifts"
    return f"runs when new data arrives under {trigger['new_data']['url']}"


def _check_cron(cron: str) -> None:
    """Five fields or an @name: told here before the code is zipped; the server judges the
    rest."""
    fields = cron.split()
    if not cron:
        _usage("say when: --cron, --on-drift DEPLOYMENT or --on-new-data URL")
    if not fields or (not fields[0].startswith("@") and len(fields) != 5):
        _usage(f"--cron {cron!r}: say 5 fields (minute hour day month weekday) or @daily and such")
    if fields[0].startswith("@") and len(fields) != 1:
        _usage(f"--cron {cron!r}: {fields[0]} stands alone")


@app.command("schedules")
def schedules(
    owner: Annotated[str | None, typer.Option(help="admins: this user's schedules")] = None,
    everyone: Annotated[bool, typer.Option("--all", help="admins: every user's")] = False,
    fmt: OutputOpt = Format.TABLE,
) -> None:
    """Your pipeline schedules: when each runs next, its last run and how many it started."""
    if owner is not None and everyone:
        _usage("say --owner or --all, not both")
    with client() as loom:
        found = loom.pipeline_schedules(owner, everyone)
    emit(fmt, found, lambda _wide: schedules_table(found))


def schedules_table(found: list[dict[str, Any]]) -> Table:
    """One line a schedule; a paused one has no next run."""
    owners = len({s.get("owner") for s in found}) > 1
    triggers = any(s.get("trigger") for s in found)
    table = Table(
        whole("NAME", [s["name"] for s in found]), "PIPELINE", *(["OWNER"] if owners else []),
        Column("CRON", no_wrap=True), *(["TRIGGER"] if triggers else []), "ENABLED", "NEXT RUN",
        "LAST RUN", "RUNS",
    )  # fmt: skip
    for s in found:
        last = s.get("last_run_id") or ""
        if last and s.get("last_run_at"):
            last += f" ({_when(s['last_run_at'])})"
        table.add_row(
            escape(s["name"]),
            escape(str(s.get("pipeline") or "")),
            *([s.get("owner") or ""] if owners else []),
            escape(s["cron"]),
            *([escape(_on(s["trigger"]) if s.get("trigger") else "")] if triggers else []),
            "[green]yes[/green]" if s.get("enabled") else "[yellow]paused[/yellow]",
            _when(s.get("next_run_at")),
            last,
            str(s.get("runs") or 0),
        )
    return table


ScheduleArg = Annotated[str, typer.Argument(metavar="NAME", help="the schedule's name or id")]


@app.command("pause")
def pause(ref: ScheduleArg) -> None:
    """The schedule starts no new runs until `unpause`; runs under way go on."""
    with client() as loom:
        found = loom.enable_pipeline_schedule(ref, False)
    console.print(f"{escape(found.get('name', ref))}: [yellow]paused[/yellow]")


@app.command("unpause")
def unpause(ref: ScheduleArg) -> None:
    """The schedule starts runs again, at the times of its cron."""
    with client() as loom:
        found = loom.enable_pipeline_schedule(ref, True)
    when = _when(found.get("next_run_at"))
    then = f", next run {when} UTC" if when else ""
    console.print(f"{escape(found.get('name', ref))}: [green]enabled[/green]{then}")


@app.command("unschedule")
def unschedule(ref: ScheduleArg) -> None:
    """Delete the schedule; the runs it started stay."""
    with client() as loom:
        loom.delete_pipeline_schedule(ref)
    console.print(f"Deleted schedule {escape(ref)}; the runs it started stay")
