"""`/v1/jobs`: submit, list, show, halt, delete, and download a job's code and results."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import StringConstraints
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.background import BackgroundTask

from loom.api.accounts import listing_owner, owner_names
from loom.api.audit import Audit, AuditDep
from loom.api.auth import PlatformDep, UserDep, owned_job
from loom.api.openapi import ZIP
from loom.api.paging import decode_cursor, encode_cursor
from loom.api.platform import Platform
from loom.api.schemas import (
    PRINTABLE,
    USER_NAME,
    WHOLE,
    Created,
    JobAction,
    job_detail,
    job_summary,
)
from loom.api.uploads import multipart_body, spec_and_code
from loom.domain.accounts import check_priority
from loom.domain.errors import ArchiveError, InvalidInput
from loom.domain.learner_images import ignored_fields
from loom.domain.manifest import Manifest, load_manifest
from loom.domain.runs import RunRecord
from loom.domain.states import JobState
from loom.lifecycle.admission import max_priority
from loom.lifecycle.workspace import Workspace
from loom.storage.archive import check_zip, zip_tree
from loom.store import jobs as job_rows
from loom.store import run_info
from loom.store import runs as run_rows
from loom.store.tables import Job, Model, ModelVersion, User

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

# The body is read by hand (size limits before parsing), so its shape is declared here.
_SUBMIT_BODY = multipart_body("manifest", "the manifest, YAML", "a zip of the model code")


@router.post("", status_code=201, response_model=Created, openapi_extra=_SUBMIT_BODY)
async def submit(
    request: Request, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> JSONResponse:
    """Multipart: `manifest` (YAML) and `model_definition` (a zip of the code)."""
    job, manifest = await accept_job(request, loom, user, audit)
    location = f"/v1/jobs/{job.id}"
    answer = {"id": job.id, "location": location, "warnings": ignored_fields(manifest)}
    return JSONResponse(answer, 201, {"Location": location})


async def accept_job(
    request: Request, loom: Platform, user: User, audit: Audit
) -> tuple[Job, Manifest]:
    """A multipart submission checked and queued: the one way in for every API that submits
    a job (Loom's own, and the dialects'), so that none checks less."""
    manifest_text, code = await spec_and_code(request, loom.settings, "manifest")
    # Parsing is CPU work: off the event loop, which serves every other request meanwhile.
    manifest, original = await anyio.to_thread.run_sync(load_manifest, manifest_text)
    check_priority(manifest.priority, max_priority(user, loom.settings))
    if code is None:
        raise ArchiveError("the request has no `model_definition` part (a zip of the code)")
    # CRC checks and writes take time: off the event loop, which serves every log stream.
    max_unpacked = loom.settings.max_unpacked_mb * 2**20
    await anyio.to_thread.run_sync(lambda: check_zip(code, max_unpacked=max_unpacked))
    job = await anyio.to_thread.run_sync(loom.lifecycle.submit, user, manifest, original, code)
    await anyio.to_thread.run_sync(lambda: audit.job("job.submit", job, priority=job.priority))
    return job, manifest


# One or more states a `state` value, comma-separated: never an empty one (`?state=` is a
# client's mistake, not "any state").
StateFilter = Annotated[str, StringConstraints(min_length=1, max_length=200)]


def _states(state: list[str] | None) -> list[str]:
    wanted: list[str] = []
    for item in state or []:
        named = [s.strip().upper() for s in item.split(",") if s.strip()]
        if not named:
            raise InvalidInput("state: empty; name one or more job states, comma-separated")
        wanted += named
    for s in wanted:
        if s not in JobState.__members__:
            allowed = ", ".join(JobState.__members__)
            raise InvalidInput(f"state: unknown job state {s!r}; use one of {allowed}")
    return wanted


@router.get("")
def list_jobs(
    request: Request,
    loom: PlatformDep,
    user: UserDep,
    state: Annotated[list[StateFilter] | None, Query()] = None,
    offset: Annotated[int, WHOLE, Query(ge=0, le=10**9)] = 0,
    limit: Annotated[int, WHOLE, Query(ge=1, le=500)] = 50,
    owner: Annotated[
        str | None, Query(max_length=100, pattern=USER_NAME, description="admins: whose")
    ] = None,
    all_users: Annotated[bool, Query(alias="all", description="admins: everyone's")] = False,
    cursor: Annotated[
        str | None, Query(max_length=300, description="a page's `next_cursor`: the next page")
    ] = None,
    name: Annotated[
        str | None,
        Query(max_length=200, pattern=PRINTABLE, description="jobs whose name holds this"),
    ] = None,
) -> dict[str, Any]:
    """Jobs, newest first. Page with `next_cursor` (as fast on the last page as on the first);
    `offset` still works but walks past every job before the page. `total` counts the matching
    jobs up to 10,000; beyond, it says 10,000 and `total_exact` is false."""
    owner_id = listing_owner(loom, request, user, owner, all_users)
    after = decode_cursor(cursor) if cursor else None
    with loom.db.session() as session:
        page = job_rows.list_jobs(
            session,
            owner_id=owner_id,
            states=_states(state),
            offset=offset,
            limit=limit,
            after=after,
            name=name,
        )
        names = owner_names(session, page.jobs)
    return {
        "jobs": [{**job_summary(j), "owner": names.get(j.owner_id)} for j in page.jobs],
        "total": page.total,
        "total_exact": page.total_exact,  # False: more than `total` (10,000) jobs match
        "offset": offset,
        "limit": limit,
        "next_cursor": encode_cursor(*page.after) if page.after else None,
    }


@router.get("/{job_id}")
def show(job_id: str, loom: PlatformDep, user: UserDep) -> Any:
    job = owned_job(loom, user, job_id)
    with loom.db.session() as session:
        history = job_rows.history(session, job_id)
        learners = job_rows.learners_of(session, job_id)
        owner = session.get(User, job.owner_id)
        info = run_info.read(session, job_id)
        model = _registered(session, job_id)
        started = run_rows.records(session, run_rows.started_by_job(session, job_id))
    return {
        **job_detail(job, owner.name if owner else "", history, learners, info),
        "model": model,
        "runs": [_run_summary(run) for run in started],  # those its code started (MLflow's)
    }


def _run_summary(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name,
        "status": run.status,
        "params": run.params,
        "tags": {k: v for k, v in run.tags.items() if not k.startswith("mlflow.")},
        "metrics": {m.key: m.value if math.isfinite(m.value) else None for m in run.metrics},
    }


def _registered(session: Session, job_id: str) -> dict[str, Any] | None:
    """The model version the job registered (`{name, version}`), if it did."""
    found = session.execute(
        select(Model.name, ModelVersion.version)
        .join(Model, Model.id == ModelVersion.model_id)
        .where(ModelVersion.job_id == job_id)
        .order_by(ModelVersion.id.desc())
        .limit(1)
    ).first()
    return {"name": found[0], "version": found[1]} if found else None


@router.patch("/{job_id}", status_code=202)
def change(job_id: str, body: JobAction, loom: PlatformDep, user: UserDep, audit: AuditDep) -> Any:
    owned_job(loom, user, job_id)
    action = body.action or body.status
    if action is None:
        raise InvalidInput('action: say what to do, {"action": "halt"} or {"action": "resume"}')
    job = loom.lifecycle.resume(job_id) if action == "resume" else loom.lifecycle.halt(job_id)
    audit.job(f"job.{action}", job)
    return job_summary(job)


@router.delete("/{job_id}", status_code=204)
def delete(job_id: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    job = owned_job(loom, user, job_id)
    loom.lifecycle.delete(job_id)
    audit.job("job.delete", job)


@router.get("/{job_id}/definition", response_class=FileResponse, responses=ZIP)
def definition(job_id: str, loom: PlatformDep, user: UserDep) -> FileResponse:
    job = owned_job(loom, user, job_id)
    path = loom.artifacts.path(job.code_digest)
    return FileResponse(path, media_type="application/zip", filename=f"{job_id}-model.zip")


@router.get("/{job_id}/results", response_class=FileResponse, responses=ZIP)
def results(job_id: str, loom: PlatformDep, user: UserDep) -> FileResponse:
    """A zip of the job's `RESULT_DIR` (its model, its learners' logs, what it wrote)."""
    owned_job(loom, user, job_id)
    folder = Workspace(loom.settings.jobs_dir, job_id).results
    fd, name = tempfile.mkstemp(suffix=".zip")
    os.close(fd)
    target = Path(name)
    zip_tree(folder, target)
    return FileResponse(
        target,
        media_type="application/zip",
        filename=f"{job_id}-results.zip",
        background=BackgroundTask(target.unlink, missing_ok=True),
    )
