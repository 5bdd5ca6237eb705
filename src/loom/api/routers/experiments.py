"""`/v1/experiments`: hyperparameter searches in Katib's v1beta1 form, whose trials are jobs of
their owner; only the owner sees or changes an experiment."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from loom.api.accounts import listing_owner, owner_names
from loom.api.audit import AuditDep
from loom.api.auth import PlatformDep, UserDep
from loom.api.schemas import USER_NAME, iso
from loom.api.uploads import multipart_body, spec_and_code
from loom.domain.errors import ArchiveError, InvalidInput
from loom.domain.experiments import TrialPhase
from loom.storage.archive import check_zip
from loom.store import jobs as job_rows
from loom.store.tables import Experiment, Trial

router = APIRouter(prefix="/v1/experiments", tags=["experiments"])

_CREATE_BODY = multipart_body(
    "experiment",
    "a Katib v1beta1 Experiment, YAML; its trialSpec is a Loom manifest",
    "a zip of the code every trial runs",
)


class ExperimentAction(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    action: Literal["halt", "resume"]
    max_trial_count: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        default=None, description="resume: the new trial budget of an ended experiment"
    )


def trial_json(trial: Trial, started: float | None, ended: float | None) -> dict[str, Any]:
    duration = (ended or 0) - started if started is not None and ended is not None else None
    return {
        "number": trial.number,
        "state": trial.state,
        "job_id": trial.job_id,
        "parameters": trial.parameters,
        "objective": trial.objective,
        "metrics": trial.metrics,
        "reports": len(trial.intermediate or []),
        "message": trial.message or trial.stop_reason,
        "created_at": iso(trial.created_at),
        "started_at": iso(started),
        "finished_at": iso(trial.finished_at),
        "duration_s": round(duration, 3) if duration is not None else None,
    }


def experiment_json(experiment: Experiment, trials: list[Trial]) -> dict[str, Any]:
    counts = {phase.value: 0 for phase in TrialPhase}
    for trial in trials:
        counts[trial.state] = counts.get(trial.state, 0) + 1
    best = next((t for t in trials if t.number == experiment.best_trial), None)
    spec = experiment.spec.get("spec", experiment.spec)
    return {
        "id": experiment.id,
        "name": experiment.name,
        "state": experiment.state,
        "reason": experiment.reason,
        "message": experiment.message,
        "objective": spec.get("objective"),
        "algorithm": (spec.get("algorithm") or {}).get("algorithmName"),
        "max_trial_count": experiment.max_trial_count,
        "trials": len(trials),
        "trials_by_state": {k: v for k, v in counts.items() if v},
        "best_trial": (
            {"number": best.number, "objective": best.objective, "parameters": best.parameters}
            if best
            else None
        ),
        "best_model": experiment.best_model or None,
        "created_at": iso(experiment.created_at),
        "finished_at": iso(experiment.finished_at),
    }


@router.post("", status_code=201, openapi_extra=_CREATE_BODY)
async def create(
    request: Request, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> JSONResponse:
    """Multipart: `experiment` (Katib's YAML) and `model_definition` (a zip of the code)."""
    text, code = await spec_and_code(request, loom.settings, "experiment")
    _, spec = await anyio.to_thread.run_sync(loom.experiments.check, text)
    if code is None:
        raise ArchiveError("the request has no `model_definition` part (a zip of the code)")
    max_unpacked = loom.settings.max_unpacked_mb * 2**20
    await anyio.to_thread.run_sync(lambda: check_zip(code, max_unpacked=max_unpacked))
    experiment = await anyio.to_thread.run_sync(loom.experiments.create, user, text, code)
    audit("experiment.create", experiment.id, name=experiment.name)
    location = f"/v1/experiments/{experiment.id}"
    body = {
        "id": experiment.id,
        "name": experiment.name,
        "location": location,
        "warnings": list(spec.warnings),
    }
    return JSONResponse(body, 201, {"Location": location})


@router.get("")
def list_experiments(
    request: Request,
    loom: PlatformDep,
    user: UserDep,
    owner: Annotated[
        str | None, Query(max_length=100, pattern=USER_NAME, description="admins: whose")
    ] = None,
    all_users: Annotated[bool, Query(alias="all", description="admins: everyone's")] = False,
) -> dict[str, Any]:
    """Your experiments, newest first; admins may ask for a user's or everyone's."""
    found = loom.experiments.listing(listing_owner(loom, request, user, owner, all_users))
    with loom.db.session() as session:
        names = owner_names(session, found)
    return {
        "experiments": [
            {**experiment_json(e, loom.experiments.trials(e.id)), "owner": names.get(e.owner_id)}
            for e in found
        ],
    }


@router.get("/{ref}")
def show(ref: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """An experiment by name or id, with its trials in the order they were proposed."""
    experiment = loom.experiments.find(user.id, ref)
    trials = loom.experiments.trials(experiment.id)
    return {
        **experiment_json(experiment, trials),
        "spec": experiment.spec,
        "trial_list": _trials(loom, trials),
    }


@router.get("/{ref}/trials")
def trials(ref: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    experiment = loom.experiments.find(user.id, ref)
    return {"trials": _trials(loom, loom.experiments.trials(experiment.id))}


def _trials(loom: Any, trials: list[Trial]) -> list[dict[str, Any]]:
    out = []
    with loom.db.session() as session:
        for trial in trials:
            job = job_rows.get_job(session, trial.job_id)
            started = job.started_at if job else None
            ended = trial.finished_at or (job.finished_at if job else None)
            out.append(trial_json(trial, started, ended))
    return out


@router.patch("/{ref}", status_code=202)
def change(
    ref: str, body: ExperimentAction, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    experiment = loom.experiments.find(user.id, ref)
    if body.action == "halt":
        if body.max_trial_count is not None:
            raise InvalidInput("max_trial_count: only with resume")
        experiment = loom.experiments.halt(experiment)
    else:
        experiment = loom.experiments.resume(experiment, body.max_trial_count)
    audit(f"experiment.{body.action}", experiment.id, name=experiment.name)
    return experiment_json(experiment, loom.experiments.trials(experiment.id))


@router.delete("/{ref}", status_code=204)
def delete(ref: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    """The experiment, its trials and their jobs; registered models stay."""
    experiment = loom.experiments.find(user.id, ref)
    loom.experiments.delete(experiment)
    audit("experiment.delete", experiment.id, name=experiment.name)
