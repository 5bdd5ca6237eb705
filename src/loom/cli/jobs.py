"""Job commands: train, list, show, logs, halt, delete, download."""

from __future__ import annotations

import re
import sys
import time
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Column, Table

from loom.cli.common import client, console, err
from loom.cli.output import (
    Format,
    JsonOpt,
    OutputOpt,
    WatchOpt,
    chosen,
    emit,
    minute,
    watch,
    whole,
)
from loom.client import LoomClient
from loom.client.archive import zip_folder
from loom.domain.states import TERMINAL_STATES

STATE_STYLE = {"COMPLETED": "green", "FAILED": "red", "HALTED": "yellow", "QUEUED": "cyan"}


def zip_code(path: Path) -> bytes:
    if path.is_file():
        return path.read_bytes()
    if not path.is_dir():
        err.print(f"[red]error:[/red] {path} is neither a folder nor a zip file")
        raise typer.Exit(2)
    return zip_folder(path)


def _styled(state: str) -> str:
    style = STATE_STYLE.get(state, "white")
    return f"[{style}]{state}[/{style}]"


def follow_job(
    loom: LoomClient,
    job_id: str,
    learner: int | None = None,
    *,
    metrics: bool = False,
    grep: re.Pattern[str] | None = None,
    pos: int = 0,
    pagesize: int = 10_000,
    after: int | None = None,
) -> str:
    """Print the job's lines (and metric points) as they arrive, and on standard error each
    change of its state with its reason (why it waits, what it does); returns its final state.
    Lines start at `pos` (`-1` with `pagesize` N: the last N), or after the line `after`."""
    several = loom.job(job_id).get("learners", 1) > 1 and learner is None
    stream = loom.follow(
        job_id,
        learner=learner,
        pos=pos,
        pagesize=pagesize,
        after=after,
        metrics=metrics,
        states=True,
    )
    told = ""  # the last state message printed: a state that keeps it is printed bare
    for kind, data in stream:
        if kind == "line":
            _print_line(data, several, grep)
        elif kind == "metric":
            prefix = f"[{data.get('learner')}] " if several else ""
            values = " ".join(f"{k}={_short(v)}" for k, v in data["values"].items())
            step = f" step {data['step']}" if data["step"] is not None else ""
            console.print(f"{prefix}[dim]▸ {data['group']}{step}: {values}[/dim]", highlight=False)
        elif kind == "state":
            message = data.get("message") or ""
            said = f": {message}" if message and message != told else ""
            told = message
            err.print(f"[dim]▸ {_styled(data['state'])}{said}[/dim]", highlight=False)
        elif kind == "end":
            return str(data.get("state"))
    return str(loom.job(job_id)["state"])


def _last_id(loom: LoomClient, job_id: str) -> int:
    last = loom.logs(job_id, pos=-1, pagesize=1)
    return int(last[-1]["id"]) if last else 0


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _final(loom: LoomClient, job_id: str) -> dict[str, Any]:
    for _ in range(50):
        job = loom.job(job_id)
        if job["state"] in TERMINAL_STATES:
            return job
        time.sleep(0.1)
    return loom.job(job_id)


def train(
    manifest: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    code: Annotated[Path, typer.Argument(help="the model code: a folder or a zip")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="stream the logs")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print only the job's id")] = False,
) -> None:
    """Submit a training job."""
    from loom.cli.progress import transfer
    from loom.domain.errors import ManifestError
    from loom.domain.manifest import load_manifest  # its schema: only `train` needs it

    text = manifest.read_bytes()
    try:  # here first: a typo is told before the code is zipped and sent
        load_manifest(text, source=str(manifest))
    except ManifestError as exc:
        err.print(f"[red]error:[/red] {escape(exc.message)}", highlight=False)
        raise typer.Exit(2) from exc
    with client() as loom:
        with transfer("uploading the code") as told:
            answer = loom.submit_job(text, zip_code(code), progress=told)
        job_id = str(answer["id"])
        for warning in answer.get("warnings") or []:
            err.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
        if quiet:
            sys.stdout.write(job_id + "\n")
        else:
            console.print(f"Submitted [bold]{job_id}[/bold]")
        if not follow:
            return
        follow_job(loom, job_id, metrics=True)
        job = _final(loom, job_id)
        console.print(f"{job_id}: {_styled(job['state'])} {job.get('status_message') or ''}")
        if job["state"] != "COMPLETED":
            raise typer.Exit(1)


def list_jobs(
    state: Annotated[list[str] | None, typer.Option("--state", "-s")] = None,
    limit: int = 50,
    owner: Annotated[str | None, typer.Option(help="admins: this user's jobs")] = None,
    everyone: Annotated[bool, typer.Option("--all", help="admins: every user's jobs")] = False,
    name: Annotated[str | None, typer.Option(help="only jobs whose name holds this")] = None,
    fmt: OutputOpt = Format.TABLE,
    watching: WatchOpt = False,
) -> None:
    """List your jobs, newest first."""
    with client() as loom:
        fetch = partial(
            loom.jobs, state=state, limit=limit, owner=owner, everyone=everyone, name=name
        )
        if watching:
            watch(fmt, fetch, _jobs_table)
            return
        page = fetch()
    emit(fmt, page, lambda wide: _jobs_table(page, wide))
    if fmt in (Format.TABLE, Format.WIDE) and page["total"] > len(page["jobs"]):
        more = "" if page.get("total_exact", True) else "+"
        console.print(f"{len(page['jobs'])} of {page['total']:,}{more} jobs shown")


def _jobs_table(page: dict[str, Any], wide: bool) -> Table:
    """Ids, states and dates are never cut (ids are copied from here); names fold and notes
    wrap to make room, and the owner is shown only when the jobs are not all one user's."""
    jobs = page["jobs"]
    owners = len({j.get("owner") for j in jobs}) > 1
    columns: list[Column | str] = [
        whole("ID", [j["id"] for j in jobs]),
        Column("NAME", overflow="fold"),
        *([Column("OWNER", overflow="fold")] if owners else []),
        whole("STATE", [j["state"] for j in jobs]),
        whole("SUBMITTED (UTC)", [minute(j["submitted_at"]) for j in jobs]),
    ]
    columns += ["LEARNERS", "ATTEMPT"] if wide else []
    table = Table(*columns, Column("WHY QUEUED / STATUS", overflow="fold"), box=box.SIMPLE_HEAD)
    for job in jobs:
        note = job.get("queue_reason") or job.get("status_message") or ""
        row = [job["id"], job["name"], *([job.get("owner") or ""] if owners else [])]
        row += [_styled(job["state"]), minute(job["submitted_at"])]
        row += [str(job.get("learners", "")), str(job.get("attempt", ""))] if wide else []
        table.add_row(*row, note if wide else note[:60])
    return table


JobRef = Annotated[str, typer.Argument(metavar="JOB", help="the job's id, or its name")]


def show(job_id: JobRef, fmt: OutputOpt = Format.TABLE, as_json: JsonOpt = False) -> None:
    """Show a job: state, history, learners."""
    with client() as loom:
        job = loom.find_job(job_id)
    emit(chosen(fmt, as_json), job, lambda wide: _show_job(job, wide))


def _show_job(job: dict[str, Any], wide: bool) -> None:
    console.print(f"[bold]{job['id']}[/bold] {job['name']} — {_styled(job['state'])}")
    if job.get("error_code"):
        console.print(f"error {job['error_code']}: {job['status_message']}")
    elif job.get("queue_reason"):
        console.print(f"queued: {job['queue_reason']}")
    lineage = job.get("lineage") or {}
    if lineage.get("kind") == "experiment":
        values = ", ".join(f"{k}={v}" for k, v in lineage.get("parameters", {}).items())
        console.print(f"trial {lineage['trial']} of experiment {lineage['experiment']}: {values}")
    elif lineage.get("kind") == "pipeline":
        item = f" (item {lineage['index']})" if lineage.get("index") else ""
        console.print(
            f"step {lineage['step']}{item} of pipeline {lineage['pipeline']}, run {lineage['run']}"
        )
    elif lineage.get("kind") == "object":
        console.print(f"{lineage['object']} ({lineage.get('apiVersion', '')}), loom apply")
    _show_logged(job, wide)
    history = job["history"]
    table = Table(
        whole("STATE", [e["state"] for e in history]),
        whole("AT", [e["at"] or "" for e in history]),
        "MESSAGE",
        title="history",
    )
    for event in job["history"]:
        table.add_row(
            event["state"], event["at"], event["message"] if wide else event["message"][:80]
        )
    console.print(table)
    states = whole("STATE", [lr["state"] for lr in job["learner_status"]])
    learners = Table("LEARNER", "ATTEMPT", states, "EXIT", "MESSAGE", title="learners")
    for lr in job["learner_status"]:
        exit_code = "" if lr["exit_code"] is None else str(lr["exit_code"])
        message = lr["message"] if wide else lr["message"][:60]
        learners.add_row(str(lr["learner"]), str(lr["attempt"]), lr["state"], exit_code, message)
    console.print(learners)


def _show_logged(job: dict[str, Any], wide: bool) -> None:
    """The job's params and tags, and each run its code started with MLflow's client."""
    for kind in ("params", "tags"):
        if job.get(kind):
            logged = Table("NAME", "VALUE", title=kind)
            for key, value in job[kind].items():
                logged.add_row(key, value if wide else value[:80])
            console.print(logged)
    for run in job.get("runs", []):
        logged = Table("NAME", "VALUE", title=f"run {run['name']} ({run['id']}, {run['status']})")
        for kind in ("params", "tags", "metrics"):
            for key, value in run[kind].items():
                logged.add_row(f"{kind[:-1]} {key}", str(value) if wide else str(value)[:80])
        console.print(logged)


def logs(
    job_id: JobRef,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="go on with new lines")] = False,
    learner: Annotated[int | None, typer.Option("--learner", "-l", help="one learner's")] = None,
    tail: Annotated[
        int | None, typer.Option("--tail", "-n", min=0, help="the last N lines")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="lines from this time: ISO-8601 or epoch milliseconds")
    ] = None,
    grep: Annotated[str | None, typer.Option("--grep", "-g", help="lines matching a regex")] = None,
    metrics: Annotated[
        bool, typer.Option("--metrics", help="with -f: the evaluation metrics too (FfDL's)")
    ] = False,
) -> None:
    """Print a job's log lines, all of them (paged), or the last --tail; -f follows them live
    until the job ends, with its state changes on standard error."""
    try:
        wanted = re.compile(grep) if grep else None
    except re.error as exc:
        err.print(f"[red]error:[/red] --grep: not a regular expression ({exc})")
        raise typer.Exit(2) from exc
    with client() as loom:
        job_id = loom.find_job(job_id)["id"]
        if follow and metrics:  # FfDL's `logs --follow --metrics`
            follow_job(loom, job_id, learner, metrics=True, grep=wanted)
            return
        if follow and since is None:  # `--tail N -f`: the last N lines, then the new ones
            if tail == 0:
                follow_job(loom, job_id, learner, grep=wanted, after=_last_id(loom, job_id))
            elif tail:
                follow_job(loom, job_id, learner, grep=wanted, pos=-1, pagesize=tail)
            else:
                follow_job(loom, job_id, learner, grep=wanted)
            return
        several = loom.job(job_id).get("learners", 1) > 1 and learner is None
        last = None
        for line in loom.all_logs(job_id, since=since, learner=learner, tail=tail):
            _print_line(line, several, wanted)
            last = line
        if follow:  # after --since: on from the last line printed (or the last there is)
            mark = last["id"] if last else _last_id(loom, job_id)
            follow_job(loom, job_id, learner, grep=wanted, after=mark)


def _print_line(line: dict[str, Any], several: bool, wanted: re.Pattern[str] | None) -> None:
    if wanted is not None and wanted.search(line["line"]) is None:
        return
    prefix = f"[{line['learner']}] " if several else ""
    sys.stdout.write(prefix + line["line"] + "\n")
    sys.stdout.flush()


def halt(job_id: JobRef) -> None:
    """Stop a job's learners; its checkpoints are kept."""
    with client() as loom:
        job_id = loom.find_job(job_id)["id"]
        job = loom.halt(job_id)
    console.print(f"{job_id}: halt requested ({job['state']})")


def resume(job_id: JobRef) -> None:
    """Queue a halted job again; it continues from its checkpoints."""
    with client() as loom:
        job_id = loom.find_job(job_id)["id"]
        job = loom.resume(job_id)
    console.print(f"{job_id}: resumed ({job['state']})")


def capacity() -> None:
    """What the platform can run and what is in use."""
    with client() as loom:
        found = loom.capacity()
    total, used = found["capacity"], found["in_use"]
    gib = 2**30
    console.print(
        f"CPUs {used['cpus']:g}/{total['cpus']:g}  "
        f"memory {used['memory'] / gib:.1f}/{total['memory'] / gib:.1f} GiB  "
        f"GPUs {used['gpus']}/{total['gpus']}  queued jobs {found['queued_jobs']}"
    )
    if found.get("nodes"):  # a cluster launcher: each node's resources and what is free
        table = Table("NODE", "ID", "ALIVE", "CPUS FREE", "GPUS FREE", "MEMORY FREE GiB")
        for node in found["nodes"]:  # Kubernetes says what a node has, not what is free
            free = {k: node.get(f"free_{k}") for k in ("cpus", "gpus", "memory")}
            memory = None if free["memory"] is None else f"{free['memory'] / gib:.1f}"
            table.add_row(
                node["node"],
                node.get("id", ""),
                "yes" if node["alive"] else "no",
                f"{_or_unknown(free['cpus'], 'g')}/{node['cpus']:g}",
                f"{_or_unknown(free['gpus'], '')}/{node['gpus']}",
                f"{memory or '?'}/{node['memory'] / gib:.1f}",
            )
        console.print(table)


def _or_unknown(value: float | None, spec: str) -> str:
    return "?" if value is None else format(value, spec)


def delete(
    refs: Annotated[list[str] | None, typer.Argument(help="JOB_ID, or KIND NAME")] = None,
    filename: Annotated[
        Path | None,
        typer.Option("--filename", "-f", help="delete the objects a YAML or JSON file names"),
    ] = None,
) -> None:
    """Delete a job, its logs and its files (halting it first if it runs); or, like kubectl,
    the objects of a file (`-f FILE`) or one object (`KIND NAME`)."""
    from loom.cli.objects import delete_objects

    if delete_objects(filename, refs or []):
        return
    if len(refs or []) != 1:
        err.print("[red]error:[/red] say a JOB_ID, KIND NAME, or -f FILE")
        raise typer.Exit(2)
    job_id = (refs or [""])[0]
    with client() as loom:
        job_id = loom.find_job(job_id)["id"]
        loom.delete(job_id)
    console.print(f"{job_id}: deleted")


def download(
    job_id: JobRef,
    definition: Annotated[bool, typer.Option("--definition", help="the submitted code")] = False,
    results: Annotated[
        bool, typer.Option("--results", "--trainedmodel", help="the job's RESULT_DIR")
    ] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", "--filename")] = None,
) -> None:
    """Download a job's code or results as a zip (FfDL's --trainedmodel and --filename too)."""
    if definition == results:
        err.print("[red]error:[/red] say --definition or --results (--trainedmodel)")
        raise typer.Exit(2)
    what = "definition" if definition else "results"
    with client() as loom:
        job_id = loom.find_job(job_id)["id"]
        target = output or Path(f"{job_id}-{what}.zip")
        from loom.cli.progress import transfer

        with transfer(f"downloading {target.name}") as told:
            loom.download(job_id, what, target, progress=told)
    console.print(f"saved {target}")
