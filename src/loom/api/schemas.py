"""Request and response shapes."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from loom.domain.manifest import manifest_from_dict
from loom.domain.states import JobState
from loom.store.tables import Job, JobEvent, Learner


def iso(at: float | None) -> str | None:
    return datetime.fromtimestamp(at, UTC).isoformat() if at is not None else None


USER_NAME = r"^[A-Za-z0-9_.@-]+$"  # what a user may be named, and what a listing may ask for
# Free-text names (a token's, a key's): anything printable. No control characters, NUL among
# them, which PostgreSQL's text cannot hold.
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"


def _whole(value: Any) -> Any:
    """A query's count in digits only: `0.0` or `1e3` would pass as an int, loosely."""
    if isinstance(value, str) and not re.fullmatch(r"-?[0-9]{1,19}", value):
        raise ValueError("expected a whole number in digits")
    return value


WHOLE = BeforeValidator(_whole)  # in a query parameter's Annotated, before Query(...)


class Created(BaseModel):
    id: str
    location: str
    # Fields of the submission that change nothing here, each with why (never dropped silently).
    warnings: list[str] = []


class JobAction(BaseModel):
    """`{"action": "halt"}` or `{"action": "resume"}`; FfDL's `{"status": "halt"}` too."""

    model_config = ConfigDict(extra="forbid", strict=True)
    action: Literal["halt", "resume"] | None = None
    status: Literal["halt"] | None = None


class QuotaIn(BaseModel):
    """A user's limits on their running jobs; null is the platform's default."""

    model_config = ConfigDict(extra="forbid", strict=True)
    cpus: float | None = Field(default=None, gt=0, le=1e6, allow_inf_nan=False)
    gpus: int | None = Field(default=None, ge=0, le=100_000)
    jobs: int | None = Field(default=None, ge=0, le=1_000_000)
    max_priority: int | None = Field(default=None, ge=-1_000_000, le=1_000_000)


class UserChange(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    quota: QuotaIn


class UserCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(min_length=1, max_length=100, pattern=USER_NAME)
    admin: bool = False


class TokenCreate(BaseModel):
    """A new token of one's own: a name to know it by, and a lifetime up to the platform's."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(default="", max_length=100, pattern=PRINTABLE)
    ttl_days: float | None = Field(default=None, gt=0, le=36_500, allow_inf_nan=False)


class LearnerStatusIn(BaseModel):
    attempt: int
    learner: int
    state: JobState
    time: float | None = None
    exit_code: int | None = None
    error_code: str | None = None
    message: str | None = None
    last_seq: int | None = None
    last_mseq: int | None = None


class Received(BaseModel):
    """A learner's upload of checkpoints or results, unpacked into the job's folder."""

    files: int = Field(description="files written (each replaced one of its name, if any)")
    bytes: int = Field(description="their size")
    deleted: int = Field(description="files removed, as the upload's `.loom-deleted.json` said")


class LogLineIn(BaseModel):
    seq: int = Field(ge=1, le=2**53)  # an integer JSON carries exactly
    time: float
    stream: str = "stdout"
    text: str


class LogBatchIn(BaseModel):
    attempt: int
    learner: int
    lines: list[LogLineIn] = Field(default_factory=list, max_length=10_000)
    metrics: list[dict[str, Any]] = Field(default_factory=list, max_length=10_000)


def job_summary(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.name,
        "framework": _framework(job.manifest),
        "state": job.state,
        "error_code": job.error_code,
        "status_message": job.status_message,
        "queue_reason": job.queue_reason if job.state == JobState.QUEUED.value else None,
        "learners": job.learners,
        "attempt": job.attempt,
        "priority": job.priority,
        "submitted_at": iso(job.submitted_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "lineage": job.lineage,  # what made it, when not its owner directly (an experiment)
    }


def _framework(manifest: str) -> str | None:
    """The framework's name in a stored manifest (JSON), for a listing's column."""
    try:
        framework = json.loads(manifest).get("framework")
    except (ValueError, AttributeError):
        return None
    name = framework.get("name") if isinstance(framework, dict) else None
    return name if isinstance(name, str) else None


def job_detail(
    job: Job,
    owner: str,
    history: list[JobEvent],
    learners: list[Learner],
    info: dict[str, dict[str, str]] | None = None,
) -> Any:
    original = json.loads(job.manifest)
    manifest = manifest_from_dict(original)
    return {
        **job_summary(job),
        "owner": owner,
        "resources": {
            "cpus": job.cpus,
            "memory": job.memory,
            "gpus": job.gpus,
            "learners": job.learners,
        },
        "halt_requested": job.halt_requested,
        "history": [{"state": e.state, "at": iso(e.at), "message": e.message} for e in history],
        "learner_status": [
            {
                "learner": lr.learner_id,
                "attempt": lr.attempt,
                "state": lr.state,
                "exit_code": lr.exit_code,
                "error_code": lr.error_code,
                "message": lr.message,
                "started_at": iso(lr.started_at),
                "finished_at": iso(lr.finished_at),
                "last_heartbeat": iso(lr.heartbeat_at),
            }
            for lr in learners
        ],
        "manifest": manifest.redacted(original),
        "code_digest": job.code_digest,
        "params": (info or {}).get("params", {}),
        "tags": (info or {}).get("tags", {}),
        "lineage": job.lineage,  # what made it, when not its owner directly (an experiment)
    }
