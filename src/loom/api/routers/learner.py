"""`/v1/learner/...`: what learners' wrappers send, with a token scoped to their job.

In the OpenAPI too: a wrapper is a client like any other, and these routes are fuzzed with the rest.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from loom.api.auth import CallerDep, PlatformDep
from loom.api.schemas import LearnerStatusIn, LogBatchIn
from loom.domain.errors import Forbidden, InvalidInput

router = APIRouter(prefix="/v1/learner/jobs", tags=["learner"])


def body_size(request: Request) -> int:
    """The request body's declared size (within `api.limits.BodyLimit`)."""
    declared = request.headers.get("content-length", "")
    return int(declared) if declared.isdecimal() else 0


def check_job_scope(who: CallerDep, job_id: str) -> None:
    """Only a token of the job's own learners may act for them."""
    if who.job_scope != job_id:
        raise Forbidden(f"this token is not for job {job_id!r}")


def _check_scope(who: CallerDep, job_id: str, learner_id: int, body_learner: int) -> None:
    check_job_scope(who, job_id)
    if body_learner != learner_id:
        raise InvalidInput(f"learner: the body says {body_learner}, the path {learner_id}")


@router.post("/{job_id}/learners/{learner_id}/logs")
def logs(
    job_id: str,
    learner_id: int,
    body: LogBatchIn,
    who: CallerDep,
    loom: PlatformDep,
    request: Request,
) -> dict[str, Any]:
    _check_scope(who, job_id, learner_id, body.learner)
    if not (body.lines or body.metrics):
        loom.lifecycle.heartbeat(job_id, body.attempt, learner_id)
        return {"accepted": 0}
    # Every byte counts to the owner's ingest budget: past it, 429 and the shipper resends.
    loom.tds.ingest_rate.charge(who.user.id, who.user.name, body_size(request))
    lines = [line.model_dump() for line in body.lines]
    loom.tds.ingest(job_id, body.attempt, learner_id, lines, body.metrics)
    return {"accepted": len(lines) + len(body.metrics)}


@router.post("/{job_id}/learners/{learner_id}/status")
def status(
    job_id: str, learner_id: int, body: LearnerStatusIn, who: CallerDep, loom: PlatformDep
) -> dict[str, Any]:
    _check_scope(who, job_id, learner_id, body.learner)
    loom.lifecycle.report(job_id, body.attempt, learner_id, body.model_dump(mode="json"))
    return {"ok": True}
