"""`/v1/pipelines/runs`: DAGs of jobs, experiments, registry queries and deployments, run as
one by the platform; only the owner sees or changes a run."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loom.api.accounts import listing_owner, owner_names
from loom.api.audit import AuditDep
from loom.api.auth import PlatformDep, UserDep
from loom.api.schemas import USER_NAME, iso
from loom.api.uploads import multipart_body, spec_code_and
from loom.domain.errors import InvalidInput
from loom.domain.pipeline import PipelineSpec, order
from loom.storage.archive import check_zip
from loom.store.tables import PipelineRun, PipelineSchedule, PipelineTask

router = APIRouter(prefix="/v1/pipelines", tags=["pipelines"])

_RUN_BODY = multipart_body(
    "pipeline",
    "a pipeline spec, YAML (docs/pipelines.md); optional part `parameters`: a JSON object",
    "a zip of the code folder its steps run (optional)",
)


class RunAction(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    action: Literal["halt", "retry"]


def _duration(started: float | None, ended: float | None) -> float | None:
    if started is None:
        return None
    return round((ended or 0) - started, 3) if ended is not None else None


def task_json(task: PipelineTask, kind: str = "job") -> dict[str, Any]:
    """A task; a `pipeline` step's names its sub-run (`run_id`) where others name a job."""
    runs = kind == "pipeline"
    return {
        "index": task.index,
        "item": task.item,
        "state": task.state,
        "job_id": None if runs else task.ref or None,
        "run_id": task.ref or None if runs else None,
        "attempt": task.attempt,
        "cached": task.state == "CACHED",
        "message": task.message,
        "started_at": iso(task.started_at),
        "finished_at": iso(task.finished_at),
        "duration_s": _duration(task.started_at, task.finished_at),
        "outputs": task.outputs,
    }


def run_json(run: PipelineRun, tasks: list[PipelineTask]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for entry in run.steps.values():
        counts[entry["state"]] = counts.get(entry["state"], 0) + 1
    started = min((t.started_at for t in tasks if t.started_at), default=None)
    return {
        "id": run.id,
        "name": run.pipeline,
        "state": run.state,
        "message": run.message,
        "parameters": run.parameters,
        "created_at": iso(run.created_at),
        "started_at": iso(started),
        "finished_at": iso(run.finished_at),
        "duration_s": _duration(run.created_at, run.finished_at),
        "steps_total": len(run.steps),
        "steps_by_state": counts,
        "schedule": run.schedule or None,
        "cached": sum(t.state == "CACHED" for t in tasks),
        "parent_id": run.parent_id,
        "outputs": run.outputs,
    }


def steps_json(
    run: PipelineRun, spec: PipelineSpec, tasks: list[PipelineTask]
) -> list[dict[str, Any]]:
    depth = order(spec)
    out = []
    for step in spec.steps:
        entry = run.steps.get(step.name) or {}
        own = sorted((t for t in tasks if t.step == step.name), key=lambda t: t.index)
        out.append(
            {
                "name": step.name,
                "kind": step.kind,
                "after": list(step.needs),
                "depth": depth[step.name],
                "state": entry.get("state"),
                "message": entry.get("message", ""),
                "cached": bool(own) and all(t.state == "CACHED" for t in own),
                "exit_handler": step.exit_handler,
                "trigger": step.trigger,
                "fan_out": step.for_each is not None,
                "started_at": iso(entry.get("started_at")),
                "finished_at": iso(entry.get("finished_at")),
                "duration_s": _duration(entry.get("started_at"), entry.get("finished_at")),
                "tasks": [task_json(t, step.kind) for t in own],
            }
        )
    return out


def _object(raw: bytes | None, part: str) -> dict[str, Any] | None:
    """A part that holds a JSON object."""
    if raw is None:
        return None
    try:
        found = json.loads(raw)
    except ValueError as exc:
        raise InvalidInput(f"{part}: not JSON: {exc}", field=part) from None
    if not isinstance(found, dict):
        raise InvalidInput(f"{part}: a JSON object of names to values", field=part)
    return found


async def _check_code(loom: Any, code: bytes | None) -> None:
    if code is not None:
        max_unpacked = loom.settings.max_unpacked_mb * 2**20
        await anyio.to_thread.run_sync(lambda: check_zip(code, max_unpacked=max_unpacked))


@router.post("/runs", status_code=201, openapi_extra=_RUN_BODY)
async def start(
    request: Request, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> JSONResponse:
    """Multipart: `pipeline` (the YAML), `model_definition` (a zip, optional) and `parameters`
    (a JSON object, optional)."""
    text, code, more = await spec_code_and(request, loom.settings, "pipeline", ("parameters",))
    parameters = _object(more["parameters"], "parameters")
    checked = await anyio.to_thread.run_sync(loom.pipelines.check, text, parameters, user.id)
    await _check_code(loom, code)
    run = await anyio.to_thread.run_sync(loom.pipelines.start_checked, user, checked, code)
    audit("pipeline.run", run.id, name=run.pipeline)
    location = f"/v1/pipelines/runs/{run.id}"
    warnings = list(checked.warnings)
    body = {"id": run.id, "name": run.pipeline, "location": location, "warnings": warnings}
    return JSONResponse(body, 201, {"Location": location})


@router.get("/runs")
def list_runs(
    request: Request,
    loom: PlatformDep,
    user: UserDep,
    pipeline: Annotated[str | None, Query(max_length=100, description="one pipeline's")] = None,
    owner: Annotated[
        str | None, Query(max_length=100, pattern=USER_NAME, description="admins: whose")
    ] = None,
    all_users: Annotated[bool, Query(alias="all", description="admins: everyone's")] = False,
) -> dict[str, Any]:
    """Your runs, newest first; admins may ask for a user's or everyone's."""
    found = loom.pipelines.listing(listing_owner(loom, request, user, owner, all_users), pipeline)
    with loom.db.session() as session:
        names = owner_names(session, found)
    return {
        "runs": [
            {**run_json(r, loom.pipelines.tasks(r.id)), "owner": names.get(r.owner_id)}
            for r in found
        ]
    }


@router.get("/runs/{run_id}")
def show(
    run_id: str,
    loom: PlatformDep,
    user: UserDep,
    with_spec: Annotated[
        bool, Query(alias="spec", description="false: without the spec (what a poll needs)")
    ] = True,
) -> dict[str, Any]:
    """A run with its steps (in the spec's order, each with its depth in the DAG) and tasks,
    and the spec as stored (a KFP pipeline's is tens of KiB: a poll leaves it out)."""
    run = loom.pipelines.find(user.id, run_id)
    tasks = loom.pipelines.tasks(run.id)
    spec = loom.pipelines.spec_of(run)
    found = {**run_json(run, tasks), "owner": user.name, "steps": steps_json(run, spec, tasks)}
    if with_spec:
        found["spec"] = run.spec
    return found


@router.patch("/runs/{run_id}", status_code=202)
def change(
    run_id: str, body: RunAction, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    run = loom.pipelines.find(user.id, run_id)
    act = loom.pipelines.halt if body.action == "halt" else loom.pipelines.retry
    run = act(run)
    audit(f"pipeline.{body.action}", run.id, name=run.pipeline)
    return run_json(run, loom.pipelines.tasks(run.id))


@router.delete("/runs/{run_id}", status_code=204)
def delete(run_id: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    """The run, its jobs and its experiments; registered models and deployments stay."""
    run = loom.pipelines.find(user.id, run_id)
    loom.pipelines.delete(run)
    audit("pipeline.delete", run.id, name=run.pipeline)


# -- schedules ---------------------------------------------------------------------------------
_SCHEDULE_BODY = multipart_body(
    "pipeline",
    "a pipeline spec, YAML; part `schedule`: a JSON object {name, cron, enabled}; optional part "
    "`parameters`: a JSON object",
    "a zip of the code folder its steps run (optional)",
)


class ScheduleChange(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    enabled: bool


class ScheduleFields(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: Annotated[str, Field(min_length=1, max_length=63)]
    cron: Annotated[str, Field(max_length=200)] = ""
    enabled: bool = True
    trigger: dict[str, Any] | None = Field(
        default=None,
        description="{drift: {deployment, cooldown_s}} or {new_data: {url, connection, poll_s}}",
    )


def schedule_json(schedule: PipelineSchedule) -> dict[str, Any]:
    return {
        "id": schedule.id,
        "name": schedule.name,
        "pipeline": schedule.pipeline,
        "cron": schedule.cron,
        "enabled": schedule.enabled,
        "parameters": schedule.parameters,
        "next_run_at": iso(schedule.next_at),
        "last_run_id": schedule.last_run_id or None,
        "last_run_at": iso(schedule.last_run_at),
        "runs": schedule.runs,
        "created_at": iso(schedule.created_at),
        "trigger": schedule.trigger,
        "triggered_by": (schedule.trigger_state or {}).get("reason"),
        # A data trigger's last listing of its prefix: when "nothing new" was last true.
        "trigger_checked_at": iso((schedule.trigger_state or {}).get("polled_at")),
    }


@router.post("/schedules", status_code=201, openapi_extra=_SCHEDULE_BODY)
async def schedule(
    request: Request, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> JSONResponse:
    """Multipart: `pipeline`, `schedule` ({name, cron, enabled}), and optionally
    `model_definition` and `parameters`."""
    parts = ("parameters", "schedule")
    text, code, more = await spec_code_and(request, loom.settings, "pipeline", parts)
    fields = _object(more["schedule"], "schedule")
    if fields is None:
        raise InvalidInput(
            "schedule: the part {name, cron} (or {name, trigger}) is required", field="schedule"
        )
    try:
        wanted = ScheduleFields.model_validate(fields)
    except ValidationError as exc:
        where = ".".join(str(p) for p in exc.errors()[0]["loc"])
        raise InvalidInput(
            f"schedule.{where}: {exc.errors()[0]['msg']}", field=f"schedule.{where}"
        ) from None
    checked = await anyio.to_thread.run_sync(
        loom.pipelines.check, text, _object(more["parameters"], "parameters"), user.id
    )
    await _check_code(loom, code)
    made = await anyio.to_thread.run_sync(
        lambda: loom.pipelines.schedules.create(
            user, wanted.name, wanted.cron, checked, code, wanted.enabled, wanted.trigger
        )
    )
    audit("pipeline.schedule", made.id, name=made.name)
    location = f"/v1/pipelines/schedules/{made.id}"
    body = {
        "id": made.id,
        "name": made.name,
        "cron": made.cron,
        "next_run_at": iso(made.next_at),
        "location": location,
        "warnings": list(checked.warnings),
    }
    return JSONResponse(body, 201, {"Location": location})


@router.get("/schedules")
def list_schedules(
    request: Request,
    loom: PlatformDep,
    user: UserDep,
    owner: Annotated[
        str | None, Query(max_length=100, pattern=USER_NAME, description="admins: whose")
    ] = None,
    all_users: Annotated[bool, Query(alias="all", description="admins: everyone's")] = False,
) -> dict[str, Any]:
    found = loom.pipelines.schedules.listing(listing_owner(loom, request, user, owner, all_users))
    with loom.db.session() as session:
        names = owner_names(session, found)
    return {"schedules": [{**schedule_json(s), "owner": names.get(s.owner_id)} for s in found]}


@router.get("/schedules/{ref}")
def show_schedule(ref: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    return {**schedule_json(loom.pipelines.schedules.find(user.id, ref)), "owner": user.name}


@router.patch("/schedules/{ref}")
def change_schedule(
    ref: str, body: ScheduleChange, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    found = loom.pipelines.schedules.find(user.id, ref)
    changed = loom.pipelines.schedules.enable(found, body.enabled)
    audit("pipeline.schedule." + ("enable" if body.enabled else "disable"), found.id)
    return {**schedule_json(changed), "owner": user.name}


@router.delete("/schedules/{ref}", status_code=204)
def delete_schedule(ref: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    """The schedule; the runs it started stay."""
    found = loom.pipelines.schedules.find(user.id, ref)
    loom.pipelines.schedules.delete(found)
    audit("pipeline.unschedule", found.id, name=found.name)
