"""`/v1/runs` and `/v1/projects`: tracked runs (every job is one; so is a run logged with
MLflow's client from anywhere), searched with MLflow's filter grammar, and compared.

A project is what MLflow calls an experiment (Loom's experiments are hyperparameter searches).
The same runs are served in MLflow's own shapes under `/api/2.0/mlflow/`."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query

from loom.api.auth import PlatformDep, UserDep
from loom.api.schemas import iso
from loom.domain.errors import InvalidInput
from loom.domain.runs import PARENT_TAG, Actor, Metric, ProjectRecord, RunRecord, View
from loom.store.tables import User

router = APIRouter(tags=["runs"])
MAX_COMPARED = 10


def actor_of(user: User) -> Actor:
    return Actor(user.id, user.name, user.is_admin)


def _number(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _when(ms: int | None) -> str | None:
    return iso(ms / 1000) if ms is not None else None


def run_json(run: RunRecord, projects: dict[int, str] | None = None) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name,
        "project_id": str(run.project_id),
        "project": (projects or {}).get(run.project_id),
        "status": run.status,
        "stage": run.stage,
        "job_id": run.job_id,
        "is_job": run.is_job,
        "parent_id": run.tags.get(PARENT_TAG),
        "user": run.user_id,
        "start_time": _when(run.start_time),
        "end_time": _when(run.end_time),
        "params": run.params,
        "tags": run.tags,
        "metrics": {m.key: _number(m.value) for m in run.metrics},
    }


def project_json(project: ProjectRecord) -> dict[str, Any]:
    return {
        "id": str(project.id),
        "name": project.name,
        "stage": project.stage,
        "tags": project.tags,
        "created_at": _when(project.created_at),
    }


def history_json(metrics: list[Metric]) -> dict[str, list[Any]]:
    """A metric's history as chart series: steps, values (null for NaN), times."""
    return {
        "steps": [m.step for m in metrics],
        "values": [_number(m.value) for m in metrics],
        "times": [_when(m.timestamp) for m in metrics],
    }


@router.get("/v1/projects")
def list_projects(loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """The projects you see: yours and the Default one (an admin: everyone's)."""
    found = loom.runs.visible_projects(actor_of(user))
    return {"projects": [project_json(p) for p in found]}


@router.get("/v1/runs")
def search_runs(
    loom: PlatformDep,
    user: UserDep,
    project: Annotated[
        list[str] | None, Query(description="ids or names; all when omitted")
    ] = None,
    filter: Annotated[str | None, Query(max_length=4000)] = None,
    order_by: Annotated[list[str] | None, Query()] = None,
    view: View = View.ACTIVE_ONLY,
    max_results: Annotated[int, Query(ge=1, le=10_000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> dict[str, Any]:
    """Runs that match an MLflow filter (`metrics.loss < 0.5 and params.lr = '0.1'`), newest
    first unless `order_by` says (`metrics.accuracy DESC`)."""
    who = actor_of(user)
    projects = loom.runs.visible_projects(who)
    names = {p.id: p.name for p in projects}
    ids = _project_ids(project, projects)
    page = loom.runs.search_runs(
        who,
        ids,
        filter=filter,
        view=view,
        order_by=order_by,
        max_results=max_results,
        offset=offset,
    )
    return {
        "runs": [run_json(r, names) for r in page.items],
        "next_offset": page.next_offset,
    }


def _project_ids(wanted: list[str] | None, projects: list[ProjectRecord]) -> list[int]:
    if not wanted:
        return [p.id for p in projects]
    by_name = {p.name: p.id for p in projects}
    by_id = {str(p.id): p.id for p in projects}
    found = []
    for item in wanted:
        if item not in by_id and item not in by_name:
            raise InvalidInput(f"project: no project {item!r}", field="project")
        found.append(by_id.get(item, by_name.get(item, 0)))
    return found


@router.get("/v1/runs/compare")
def compare_runs(
    loom: PlatformDep,
    user: UserDep,
    ids: Annotated[list[str], Query(description="2 to 10 run (or job) ids")],
) -> dict[str, Any]:
    """Runs side by side: each run, every param with its value in each run (and whether they
    differ), and every metric's history in each run, for charts overlaid."""
    ids = [i for item in ids for i in item.split(",") if i]
    if not 2 <= len(ids) <= MAX_COMPARED or len(set(ids)) != len(ids):
        raise InvalidInput(f"ids: 2 to {MAX_COMPARED} different runs, got {len(ids)}", field="ids")
    who = actor_of(user)
    runs = [loom.runs.run(who, run_id) for run_id in ids]
    names = {p.id: p.name for p in loom.runs.visible_projects(who)}
    params = sorted({key for run in runs for key in run.params})
    keys = sorted({m.key for run in runs for m in run.metrics})
    return {
        "runs": [run_json(r, names) for r in runs],
        "params": [
            {
                "key": key,
                "values": [r.params.get(key) for r in runs],
                "differ": len({r.params.get(key) for r in runs}) > 1,
            }
            for key in params
        ],
        "metrics": {
            key: [history_json(loom.runs.history(who, r.id, key)) for r in runs] for key in keys
        },
    }


@router.get("/v1/runs/{run_id}")
def show_run(run_id: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    who = actor_of(user)
    run = loom.runs.run(who, run_id)
    projects = loom.runs.visible_projects(who)
    names = {p.id: p.name for p in projects}
    children = loom.runs.search_runs(  # a child may be in another project
        who, list(names), filter=f"tags.`{PARENT_TAG}` = '{run.id}'", max_results=1000
    )
    return {**run_json(run, names), "children": [run_json(c, names) for c in children.items]}


@router.get("/v1/runs/{run_id}/metrics/{key:path}")
def metric_history(run_id: str, key: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """Every value logged of one metric of a run: steps, values, times."""
    return {"key": key, **history_json(loom.runs.history(actor_of(user), run_id, key))}
