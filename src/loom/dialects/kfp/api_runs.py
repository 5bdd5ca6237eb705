"""KFP's API v2beta1 for runs and recurring runs, on Loom's pipeline runs and schedules.

A KFP run is a Loom run (one run is one run, whichever API started it: `loom pipelines list`
shows it, and this API lists Loom's own runs too); what KFP says beside it (display name,
experiment, storage state) is kept apart. A recurring run is a Loom schedule.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request

from loom.api.auth import PlatformDep, UserDep
from loom.api.routers.pipelines import run_json, steps_json
from loom.dialects.kfp import listing, shapes
from loom.dialects.kfp.api_catalog import default_experiment, pipeline_documents
from loom.dialects.kfp.api_common import PREFIX, KfpRoute, documents_of, json_body, objects
from loom.dialects.kfp.objects import KfpObjects
from loom.domain.errors import InvalidInput, NotFound
from loom.store.tables import DialectObject, PipelineRun, PipelineSchedule, User

# KFP's API, not Loom's: its clients read KFP's definitions, so it stays out of Loom's OpenAPI.
router = APIRouter(prefix=PREFIX, tags=["kfp"], route_class=KfpRoute, include_in_schema=False)
Text = Annotated[str | None, Query(max_length=10_000)]
PageSize = Annotated[int | None, Query(ge=0, le=listing.MAX_PAGE)]
RUN_KEYS = (
    *("run_id", "display_name", "created_at", "finished_at", "state", "storage_state"),
    *("experiment_id", "description", "recurring_run_id"),
)


# -- what a run or a recurring run runs --------------------------------------------------------
_OBJECTS = ("runtime_config", "pipeline_version_reference", "trigger")


def _shape(body: dict[str, Any]) -> dict[str, Any]:
    """The body, its nested objects checked to be objects (refused by field otherwise)."""
    for key in _OBJECTS:
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise InvalidInput(f"{key}: a JSON object, got {body[key]!r}"[:300], field=key)
    return body


def _pipeline(kept: KfpObjects, body: dict[str, Any]) -> list[dict[str, Any]]:
    if body.get("pipeline_spec"):
        return documents_of(body["pipeline_spec"])
    reference = body.get("pipeline_version_reference") or {}
    if reference.get("pipeline_id") or reference.get("pipeline_version_id"):
        return pipeline_documents(kept, reference)
    if body.get("pipeline_version_id"):
        return pipeline_documents(kept, {"pipeline_version_id": body["pipeline_version_id"]})
    raise InvalidInput(
        "pipeline_spec: a run needs pipeline_spec or pipeline_version_reference",
        field="pipeline_spec",
    )


def _parameters(body: dict[str, Any]) -> dict[str, Any] | None:
    config = body.get("runtime_config") or {}
    given = config.get("parameters")
    if given is not None and not isinstance(given, dict):
        raise InvalidInput(
            "runtime_config.parameters: an object of names to values",
            field="runtime_config.parameters",
        )
    return dict(given) if given else None


def _experiment_id(kept: KfpObjects, body: dict[str, Any]) -> str:
    given = body.get("experiment_id")
    if given:
        return kept.get("experiment", str(given)).id
    return default_experiment(kept).id


# -- runs --------------------------------------------------------------------------------------
@router.post("/runs")
async def create_run(request: Request, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """A run of a compiled pipeline (`pipeline_spec`) or of a pipeline version; its translation's
    warnings are in `warnings`."""
    body = _shape(json_body(await request.body(), "run"))
    kept = objects(platform, user)
    documents = _pipeline(kept, body)
    checked = await anyio.to_thread.run_sync(
        platform.pipelines.check_documents, documents, _parameters(body), user.id
    )
    experiment = _experiment_id(kept, body)
    run = await anyio.to_thread.run_sync(platform.pipelines.start_checked, user, checked, None)
    fields = {
        "display_name": str(body.get("display_name") or run.pipeline),
        "description": str(body.get("description") or ""),
        "experiment_id": experiment,
        "runtime_config": body.get("runtime_config") or {},
        "service_account": str(body.get("service_account") or ""),
        "storage_state": "AVAILABLE",
        "warnings": list(checked.warnings),
    }
    if body.get("pipeline_version_reference"):
        fields["pipeline_version_reference"] = body["pipeline_version_reference"]
    kept.add("run", str(fields["display_name"]), fields, parent_id=experiment, object_id=run.id)
    answer = shapes.run(_loom_run(platform, run), fields, None)
    return {**answer, "warnings": list(checked.warnings)}


def _loom_run(platform: Any, run: PipelineRun) -> dict[str, Any]:
    return run_json(run, platform.pipelines.tasks(run.id))


def _find(platform: Any, user: User, run_id: str) -> PipelineRun:
    run: PipelineRun = platform.pipelines.find(user.id, run_id)
    if run.parent_id is not None:  # a sub-pipeline's run is a task of its parent's
        raise NotFound(f"no run {run_id!r}")
    return run


def _kept(kept: KfpObjects, run: PipelineRun) -> dict[str, Any]:
    """What KFP knows of a run beside Loom: its own fields, or those of the recurring run that
    started it."""
    found = kept.find("run", run.id)
    if found is not None:
        return dict(found.body)
    if run.schedule:
        for recurring in kept.all("recurring_run"):
            if recurring.body.get("schedule_name") == run.schedule:
                return {
                    "experiment_id": recurring.body.get("experiment_id"),
                    "recurring_run_id": recurring.id,
                    "runtime_config": recurring.body.get("runtime_config") or {},
                }
    return {}


@router.get("/runs/{run_id}")
def get_run(run_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """The run with its task details: every step, of its sub-runs too."""
    run = _find(platform, user, run_id)
    kept = objects(platform, user)
    steps = steps_json(run, platform.pipelines.spec_of(run), platform.pipelines.tasks(run.id))
    details = shapes.task_details(run.id, steps, _sub_steps(platform, user, steps))
    found = _kept(kept, run)
    answer = shapes.run(_loom_run(platform, run), found, details)
    return {**answer, "warnings": found.get("warnings") or []}


def _sub_steps(
    platform: Any, user: User, steps: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """The steps of every sub-run under these steps, by the sub-run's id."""
    found: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        for task in step.get("tasks") or []:
            if not task.get("run_id"):
                continue
            sub = platform.pipelines.find(user.id, task["run_id"])
            inner = steps_json(
                sub, platform.pipelines.spec_of(sub), platform.pipelines.tasks(sub.id)
            )
            found[sub.id] = inner
            found |= _sub_steps(platform, user, inner)
    return found


@router.get("/runs")
def list_runs(
    platform: PlatformDep,
    user: UserDep,
    experiment_id: Text = None,
    filter: Text = None,
    sort_by: Text = None,
    page_token: Text = None,
    page_size: PageSize = None,
    namespace: Text = None,
) -> dict[str, Any]:
    """Your runs (those started through Loom's own API too), without their task details."""
    kept = objects(platform, user)
    found = []
    for run in reversed(platform.pipelines.listing(user.id)):  # oldest first, as listing takes them
        shape = shapes.run(_loom_run(platform, run), _kept(kept, run), None)
        if experiment_id and shape["experiment_id"] != experiment_id:
            continue
        found.append(shape)
    chosen, total, token = listing.page(
        found,
        filter_json=filter,
        sort_by=sort_by,
        page_token=page_token,
        page_size=page_size,
        keys=RUN_KEYS,
    )
    return {"runs": chosen, "total_size": total, "next_page_token": token}


@router.post("/runs/{run_id}:terminate")
def terminate_run(run_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """Halted: its running tasks' jobs are halted, nothing new starts (CANCELED)."""
    platform.pipelines.halt(_find(platform, user, run_id))
    return {}


@router.post("/runs/{run_id}:retry")
def retry_run(run_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """Its failed, canceled and skipped tasks run again; those that succeeded are kept."""
    platform.pipelines.retry(_find(platform, user, run_id))
    return {}


@router.delete("/runs/{run_id}")
def delete_run(run_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    run = _find(platform, user, run_id)
    platform.pipelines.delete(run)
    kept = objects(platform, user)
    found = kept.find("run", run.id)
    if found is not None:
        kept.remove(found)
    return {}


@router.post("/runs/{run_id}:archive")
def archive_run(run_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    return _storage(run_id, platform, user, "ARCHIVED")


@router.post("/runs/{run_id}:unarchive")
def unarchive_run(run_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    return _storage(run_id, platform, user, "AVAILABLE")


def _storage(run_id: str, platform: Any, user: User, state: str) -> dict[str, Any]:
    run = _find(platform, user, run_id)
    kept = objects(platform, user)
    found = kept.find("run", run.id)
    if found is None:
        fields = {**_kept(kept, run), "storage_state": state}
        experiment = fields.get("experiment_id") or default_experiment(kept).id
        fields["experiment_id"] = experiment
        kept.add("run", run.pipeline, fields, parent_id=experiment, object_id=run.id)
    else:
        kept.change(found, storage_state=state)
    return {}


# -- recurring runs ----------------------------------------------------------------------------
_SCHEDULE_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def cron_of(trigger: dict[str, Any], warnings: list[str]) -> str:
    """A KFP trigger as Loom's five-field cron (UTC): a cron of KFP's six fields loses its
    seconds (only 0 is taken); an interval becomes the cron that repeats it, where one does."""
    cron = trigger.get("cron_schedule") or {}
    periodic = trigger.get("periodic_schedule") or {}
    for key, given in (("cron_schedule", cron), ("periodic_schedule", periodic)):
        if not isinstance(given, dict):
            raise InvalidInput(f"trigger.{key}: a JSON object", field=f"trigger.{key}")
    for where, given in (("cron_schedule", cron), ("periodic_schedule", periodic)):
        for key in ("start_time", "end_time"):
            if given.get(key):
                raise InvalidInput(
                    f"trigger.{where}.{key}: Loom's schedules start when made and run until "
                    "paused or deleted; leave it out",
                    field=f"trigger.{where}.{key}",
                )
    if cron.get("cron"):
        fields = str(cron["cron"]).split()
        if len(fields) == 6:
            if fields[0] != "0":
                raise InvalidInput(
                    f"trigger.cron_schedule.cron: {cron['cron']!r}: Loom runs at whole minutes; "
                    "the seconds field must be 0",
                    field="trigger.cron_schedule.cron",
                )
            return " ".join(fields[1:])
        return str(cron["cron"])
    if periodic.get("interval_second"):
        return _every(int(periodic["interval_second"]), warnings)
    raise InvalidInput("trigger: a cron_schedule or a periodic_schedule", field="trigger")


def _every(seconds: int, warnings: list[str]) -> str:
    minutes, rest = divmod(seconds, 60)
    where = "trigger.periodic_schedule.interval_second"
    if rest == 0 and 0 < minutes < 60 and 60 % minutes == 0:
        cron = f"*/{minutes} * * * *"
    elif rest == 0 and minutes % 60 == 0 and 0 < minutes // 60 <= 24 and 24 % (minutes // 60) == 0:
        hours = minutes // 60
        cron = "0 0 * * *" if hours == 24 else f"0 */{hours} * * *"
    else:
        raise InvalidInput(
            f"{where}: every {seconds} s is not a cron; Loom schedules by cron (an interval of "
            "whole minutes dividing an hour, or whole hours dividing a day, is taken)",
            field=where,
        )
    warnings.append(
        f"{where}: every {seconds} s runs at the clock's times ({cron!r} UTC), not "
        "counted from when it was made"
    )
    return cron


def recurring_json(row: DialectObject, schedule: PipelineSchedule | None) -> dict[str, Any]:
    body = row.body
    enabled = bool(schedule and schedule.enabled)
    found = {
        "recurring_run_id": row.id,
        "display_name": body.get("display_name") or row.name,
        "description": body.get("description") or "",
        "runtime_config": body.get("runtime_config") or {},
        "service_account": body.get("service_account") or "",
        "max_concurrency": body.get("max_concurrency") or "10",
        "trigger": body.get("trigger") or {},
        "mode": "ENABLE" if enabled else "DISABLE",
        "status": "ENABLED" if enabled else "DISABLED",
        "created_at": shapes.timestamp(row.created_at),
        "updated_at": shapes.timestamp(row.created_at),
        "no_catchup": bool(body.get("no_catchup")),
        "namespace": "",
        "experiment_id": body.get("experiment_id") or "",
        "warnings": body.get("warnings") or [],
    }
    if body.get("pipeline_version_reference"):
        found["pipeline_version_reference"] = body["pipeline_version_reference"]
    if schedule is None:
        found["error"] = {"code": 5, "message": "its Loom schedule was deleted"}
    return found


def _schedule(platform: Any, user: User, row: DialectObject) -> PipelineSchedule | None:
    try:
        found: PipelineSchedule = platform.pipelines.schedules.find(
            user.id, row.body["schedule_id"]
        )
    except NotFound:
        return None
    return found


@router.post("/recurringruns")
async def create_recurring_run(
    request: Request, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    """A Loom schedule of the pipeline, at the trigger's times."""
    body = _shape(json_body(await request.body(), "recurring_run"))
    kept = objects(platform, user)
    warnings: list[str] = []
    cron = cron_of(body.get("trigger") or {}, warnings)
    documents = _pipeline(kept, body)
    checked = await anyio.to_thread.run_sync(
        platform.pipelines.check_documents, documents, _parameters(body), user.id
    )
    warnings += checked.warnings
    if not body.get("no_catchup"):
        warnings.append(
            "no_catchup: false is approximated: after downtime Loom starts one run, "
            "not one per missed time"
        )
    if body.get("max_concurrency") not in (None, "", "10", 10):
        warnings.append("max_concurrency: not enforced; a run starts at each time")
    experiment = _experiment_id(kept, body)
    display = str(body.get("display_name") or checked.spec.name)
    name = f"{_SCHEDULE_NAME.sub('-', display).strip('-')[:40] or 'kfp'}-{uuid.uuid4().hex[:8]}"
    if not name[0].isalpha():
        name = f"r-{name}"
    enabled = str(body.get("mode") or "ENABLE") != "DISABLE"
    made = await anyio.to_thread.run_sync(
        lambda: platform.pipelines.schedules.create(user, name, cron, checked, None, enabled)
    )
    fields = {
        key: body.get(key)
        for key in (
            "description",
            "runtime_config",
            "service_account",
            "max_concurrency",
            "trigger",
            "no_catchup",
            "pipeline_version_reference",
        )
        if body.get(key) is not None
    }
    fields |= {
        "display_name": display,
        "experiment_id": experiment,
        "schedule_id": made.id,
        "schedule_name": made.name,
        "warnings": warnings,
    }
    row = kept.add("recurring_run", display, fields, parent_id=experiment)
    return recurring_json(row, made)


@router.get("/recurringruns")
def list_recurring_runs(
    platform: PlatformDep,
    user: UserDep,
    experiment_id: Text = None,
    filter: Text = None,
    sort_by: Text = None,
    page_token: Text = None,
    page_size: PageSize = None,
    namespace: Text = None,
) -> dict[str, Any]:
    kept = objects(platform, user)
    found = [
        recurring_json(row, _schedule(platform, user, row))
        for row in kept.all("recurring_run")
        if not experiment_id or row.parent_id == experiment_id
    ]
    chosen, total, token = listing.page(
        found,
        filter_json=filter,
        sort_by=sort_by,
        page_token=page_token,
        page_size=page_size,
        keys=("recurring_run_id", "display_name", "created_at", "status", "experiment_id"),
    )
    return {
        "recurringRuns": chosen,
        "recurring_runs": chosen,
        "total_size": total,
        "next_page_token": token,
    }


@router.get("/recurringruns/{recurring_run_id}")
def get_recurring_run(
    recurring_run_id: str, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    row = objects(platform, user).get("recurring_run", recurring_run_id)
    return recurring_json(row, _schedule(platform, user, row))


@router.post("/recurringruns/{recurring_run_id}:enable")
def enable_recurring_run(
    recurring_run_id: str, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    return _enable(recurring_run_id, platform, user, True)


@router.post("/recurringruns/{recurring_run_id}:disable")
def disable_recurring_run(
    recurring_run_id: str, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    return _enable(recurring_run_id, platform, user, False)


def _enable(recurring_run_id: str, platform: Any, user: User, enabled: bool) -> dict[str, Any]:
    row = objects(platform, user).get("recurring_run", recurring_run_id)
    schedule = _schedule(platform, user, row)
    if schedule is None:
        raise NotFound(f"recurring run {recurring_run_id}: its Loom schedule was deleted")
    platform.pipelines.schedules.enable(schedule, enabled)
    return {}


@router.delete("/recurringruns/{recurring_run_id}")
def delete_recurring_run(
    recurring_run_id: str, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    """The recurring run and its Loom schedule; the runs it started stay."""
    kept = objects(platform, user)
    row = kept.get("recurring_run", recurring_run_id)
    schedule = _schedule(platform, user, row)
    if schedule is not None:
        platform.pipelines.schedules.delete(schedule)
    kept.remove(row)
    return {}
