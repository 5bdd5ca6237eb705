"""Loom's pipeline runs in the shapes of KFP's API v2beta1 (pure): a run with its state, its
runtime config and its task details; states and times as KFP writes them.

A run's task details list every step of the run and of its sub-runs (a KFP DAG task's children
are the steps of the sub-run it started), each with its job as the executor's "pod".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

# Loom's run and step states as KFP's V2beta1RuntimeState.
RUN_STATES = {
    "PENDING": "PENDING",
    "RUNNING": "RUNNING",
    "SUCCEEDED": "SUCCEEDED",
    "FAILED": "FAILED",
    "HALTED": "CANCELED",
}
STEP_STATES = {
    "WAITING": "PENDING",
    "RUNNING": "RUNNING",
    "SUCCEEDED": "SUCCEEDED",
    "CACHED": "SUCCEEDED",  # its outputs came from an earlier run: it succeeded, at no cost
    "FAILED": "FAILED",
    "SKIPPED": "SKIPPED",
    "HALTED": "CANCELED",
}
EPOCH = "1970-01-01T00:00:00Z"


def timestamp(at: str | float | None) -> str:
    """An RFC 3339 time in UTC, as KFP's API writes them (the epoch for "not yet")."""
    if at is None:
        return EPOCH
    moment = datetime.fromisoformat(at) if isinstance(at, str) else datetime.fromtimestamp(at, UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(
    loom: dict[str, Any], kept: dict[str, Any], details: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """A V2beta1Run: `loom` is the run as Loom's API shows it, `kept` what KFP's API was given
    for it (display name, experiment, runtime config…; `{}` for a run started otherwise)."""
    state = RUN_STATES.get(str(loom["state"]), "RUNTIME_STATE_UNSPECIFIED")
    found: dict[str, Any] = {
        "run_id": loom["id"],
        "display_name": kept.get("display_name") or loom["name"],
        "description": kept.get("description") or "",
        "experiment_id": kept.get("experiment_id") or "",
        "storage_state": kept.get("storage_state") or "AVAILABLE",
        "runtime_config": {
            "parameters": loom.get("parameters") or {},
            "pipeline_root": (kept.get("runtime_config") or {}).get("pipeline_root") or "",
        },
        "service_account": kept.get("service_account") or "",
        "created_at": timestamp(loom.get("created_at")),
        "scheduled_at": timestamp(loom.get("created_at")),
        "finished_at": timestamp(loom.get("finished_at")),
        "state": state,
        "state_history": _history(loom, state),
    }
    for key in ("pipeline_version_reference", "recurring_run_id"):
        if kept.get(key):
            found[key] = kept[key]
    if kept.get("pipeline_version_reference"):
        found["pipeline_version_id"] = kept["pipeline_version_reference"].get("pipeline_version_id")
    if state == "FAILED":
        found["error"] = {"code": 2, "message": loom.get("message") or "the run failed"}
    if details is not None:
        found["run_details"] = {"task_details": details}
    return found


def _history(loom: dict[str, Any], state: str) -> list[dict[str, Any]]:
    history = [{"update_time": timestamp(loom.get("created_at")), "state": "PENDING"}]
    if loom.get("started_at"):
        history.append({"update_time": timestamp(loom["started_at"]), "state": "RUNNING"})
    if loom.get("finished_at"):
        history.append({"update_time": timestamp(loom["finished_at"]), "state": state})
    return history


def task_details(
    run_id: str,
    steps: list[dict[str, Any]],
    sub_steps: dict[str, list[dict[str, Any]]],
    parent: str = "",
) -> list[dict[str, Any]]:
    """A run's steps as KFP task details; `sub_steps` holds the steps of each sub-run (by its
    id), whose tasks become the children of the step that started it."""
    found: list[dict[str, Any]] = []
    for step in steps:
        task_id = f"{parent or run_id}.{step['name']}"
        tasks = step.get("tasks") or []
        jobs = [t["job_id"] for t in tasks if t.get("job_id")]
        children: list[dict[str, Any]] = []
        for task in tasks:
            if task.get("run_id") in sub_steps:
                children += task_details(
                    run_id, sub_steps[task["run_id"]], sub_steps, f"{task_id}[{task['index']}]"
                )
        state = STEP_STATES.get(str(step.get("state")), "RUNTIME_STATE_UNSPECIFIED")
        detail: dict[str, Any] = {
            "run_id": run_id,
            "task_id": task_id,
            "display_name": step["name"],
            "create_time": timestamp(step.get("started_at")),
            "start_time": timestamp(step.get("started_at")),
            "end_time": timestamp(step.get("finished_at")),
            "state": state,
            "state_history": [{"update_time": timestamp(step.get("finished_at")), "state": state}],
            "child_tasks": [
                {"task_id": c["task_id"]} for c in children if c.get("parent_task_id") == task_id
            ],
        }
        if parent:
            detail["parent_task_id"] = parent.rsplit("[", 1)[0]
        if jobs:
            detail["pod_name"] = jobs[-1]
            detail["executor_detail"] = {"main_job": jobs[-1], "failed_main_jobs": jobs[:-1]}
        if step.get("message") and state in ("FAILED", "SKIPPED", "CANCELED"):
            detail["error"] = {"code": 2 if state == "FAILED" else 0, "message": step["message"]}
        found.append(detail)
        found += children
    return found


def experiment(
    kept_id: str, body: dict[str, Any], created: float, last_run: float | None
) -> dict[str, Any]:
    return {
        "experiment_id": kept_id,
        "display_name": body.get("display_name") or "",
        "description": body.get("description") or "",
        "created_at": timestamp(created),
        "namespace": body.get("namespace") or "",
        "storage_state": body.get("storage_state") or "AVAILABLE",
        "last_run_created_at": timestamp(last_run),
    }


def pipeline(kept_id: str, body: dict[str, Any], created: float) -> dict[str, Any]:
    return {
        "pipeline_id": kept_id,
        "display_name": body.get("display_name") or body.get("name") or "",
        "name": body.get("name") or body.get("display_name") or "",
        "description": body.get("description") or "",
        "created_at": timestamp(created),
        "namespace": body.get("namespace") or "",
    }


def pipeline_version(
    kept_id: str, pipeline_id: str, body: dict[str, Any], created: float, with_spec: bool
) -> dict[str, Any]:
    found = {
        "pipeline_id": pipeline_id,
        "pipeline_version_id": kept_id,
        "display_name": body.get("display_name") or body.get("name") or "",
        "name": body.get("name") or body.get("display_name") or "",
        "description": body.get("description") or "",
        "created_at": timestamp(created),
        "code_source_url": body.get("code_source_url") or "",
        "package_url": {"pipeline_url": body.get("package_url") or ""},
    }
    if with_spec:
        found["pipeline_spec"] = body.get("pipeline_spec") or {}
    return found
