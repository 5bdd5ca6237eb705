"""Job commands: train, list, show, logs, halt, delete, download."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from loom.cli.common import client, console, err
from loom.client import LoomClient
from loom.client.archive import zip_folder
from loom.domain.states import TERMINAL_STATES

STATE_STYLE = {"COMPLETED": "green", "FAILED": "red", "HALTED": "yellow", "QUEUED": "cyan"}


def _zip_code(path: Path) -> bytes:
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
    loom: LoomClient, job_id: str, learner: int | None = None, *, metrics: bool = False
) -> str:
    """Print the job's lines (and metric points) as they arrive; returns its final state."""
    learners = loom.job(job_id).get("learners", 1)
    for kind, data in loom.follow(job_id, learner=learner, metrics=metrics):
        prefix = f"[{data.get('learner')}] " if learners > 1 and learner is None else ""
        if kind == "line":
            sys.stdout.write(prefix + data["line"] + "\n")
            sys.stdout.flush()
        elif kind == "metric":
            values = " ".join(f"{k}={_short(v)}" for k, v in data["values"].items())
            step = f" step {data['step']}" if data["step"] is not None else ""
            console.print(f"{prefix}[dim]▸ {data['group']}{step}: {values}[/dim]", highlight=False)
        elif kind == "end":
            return str(data.get("state"))
    return str(loom.job(job_id)["state"])


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
) -> None:
    """Submit a training job."""
    with client() as loom:
        job_id = loom.submit(manifest.read_bytes(), _zip_code(code))
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
) -> None:
    """List your jobs, newest first."""
    with client() as loom:
        page = loom.jobs(state=state, limit=limit, owner=owner, everyone=everyone)
    table = Table("ID", "NAME", "OWNER", "STATE", "SUBMITTED", "WHY QUEUED / STATUS")
    for job in page["jobs"]:
        note = job.get("queue_reason") or job.get("status_message") or ""
        row = (job["id"], job["name"], job.get("owner") or "", _styled(job["state"]))
        table.add_row(*row, job["submitted_at"], note[:60])
    console.print(table)
    if page["total"] > len(page["jobs"]):
        more = "" if page.get("total_exact", True) else "+"
        console.print(f"{len(page['jobs'])} of {page['total']:,}{more} jobs shown")


def show(
    job_id: str, as_json: Annotated[bool, typer.Option("--json", help="raw JSON")] = False
) -> None:
    """Show a job: state, history, learners, manifest."""
    with client() as loom:
        job = loom.job(job_id)
    if as_json:
        console.print_json(json.dumps(job))
        return
    console.print(f"[bold]{job['id']}[/bold] {job['name']} — {_styled(job['state'])}")
    if job.get("error_code"):
        console.print(f"error {job['error_code']}: {job['status_message']}")
    elif job.get("queue_reason"):
        console.print(f"queued: {job['queue_reason']}")
    table = Table("STATE", "AT", "MESSAGE", title="history")
    for event in job["history"]:
        table.add_row(event["state"], event["at"], event["message"][:80])
    console.print(table)
    learners = Table("LEARNER", "ATTEMPT", "STATE", "EXIT", "MESSAGE", title="learners")
    for lr in job["learner_status"]:
        exit_code = "" if lr["exit_code"] is None else str(lr["exit_code"])
        learners.add_row(
            str(lr["learner"]), str(lr["attempt"]), lr["state"], exit_code, lr["message"][:60]
        )
    console.print(learners)


def logs(
    job_id: str,
    follow: Annotated[bool, typer.Option("--follow", "-f")] = False,
    learner: Annotated[int | None, typer.Option("--learner", "-l")] = None,
    pos: int = 0,
    pagesize: int = 10_000,
) -> None:
    """Print a job's log lines; `-f` follows them live until the job ends."""
    with client() as loom:
        if follow:
            follow_job(loom, job_id, learner)
            return
        learners = loom.job(job_id).get("learners", 1)
        for line in loom.logs(job_id, pos=pos, pagesize=pagesize, learner=learner):
            prefix = f"[{line['learner']}] " if learners > 1 and learner is None else ""
            sys.stdout.write(prefix + line["line"] + "\n")


def halt(job_id: str) -> None:
    """Stop a job's learners; its checkpoints are kept."""
    with client() as loom:
        job = loom.halt(job_id)
    console.print(f"{job_id}: halt requested ({job['state']})")


def resume(job_id: str) -> None:
    """Queue a halted job again; it continues from its checkpoints."""
    with client() as loom:
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


def delete(job_id: str) -> None:
    """Delete a job, its logs and its files (halting it first if it runs)."""
    with client() as loom:
        loom.delete(job_id)
    console.print(f"{job_id}: deleted")


def download(
    job_id: str,
    definition: Annotated[bool, typer.Option("--definition", help="the submitted code")] = False,
    results: Annotated[bool, typer.Option("--results", help="the job's RESULT_DIR")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o")] = None,
) -> None:
    """Download a job's code or results as a zip."""
    if definition == results:
        err.print("[red]error:[/red] say --definition or --results")
        raise typer.Exit(2)
    what = "definition" if definition else "results"
    target = output or Path(f"{job_id}-{what}.zip")
    with client() as loom:
        loom.download(job_id, what, target)
    console.print(f"saved {target}")


def register(app: typer.Typer) -> None:
    app.command()(train)
    app.command("list")(list_jobs)
    app.command()(show)
    app.command()(logs)
    app.command()(halt)
    app.command()(resume)
    app.command()(capacity)
    app.command()(delete)
    app.command()(download)
