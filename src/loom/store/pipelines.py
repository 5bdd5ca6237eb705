"""Pipeline runs and their tasks, as rows."""

from __future__ import annotations

import secrets
import string

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.orm import Session

from loom.store.tables import PipelineRun, PipelineSchedule, PipelineTask

_ID_CHARS = string.ascii_lowercase + string.digits
ACTIVE = ("PENDING", "RUNNING")
DONE_TASKS = ("SUCCEEDED", "CACHED")


def new_schedule_id() -> str:
    return "schedule-" + "".join(secrets.choice(_ID_CHARS) for _ in range(10))


def new_run_id() -> str:
    return "run-" + "".join(secrets.choice(_ID_CHARS) for _ in range(10))


def get(session: Session, run_id: str) -> PipelineRun | None:
    return session.get(PipelineRun, run_id)


def listing(session: Session, owner_id: str | None, pipeline: str | None) -> list[PipelineRun]:
    """Runs of their own, newest first: a sub-pipeline's runs are shown with their parent's."""
    query = select(PipelineRun).order_by(PipelineRun.created_at.desc(), PipelineRun.id)
    query = query.where(PipelineRun.parent_id.is_(None))
    if owner_id is not None:
        query = query.where(PipelineRun.owner_id == owner_id)
    if pipeline is not None:
        query = query.where(PipelineRun.pipeline == pipeline)
    return list(session.scalars(query))


def to_drive(session: Session) -> list[str]:
    """Runs with work left: not ended, or with tasks still running (being halted)."""
    running = exists().where(PipelineTask.run_id == PipelineRun.id, PipelineTask.state == "RUNNING")
    query = select(PipelineRun.id).where(or_(PipelineRun.state.in_(ACTIVE), running))
    return list(session.scalars(query.order_by(PipelineRun.created_at)))


def children(session: Session, run_id: str) -> list[PipelineRun]:
    """The runs a run's `pipeline` steps started."""
    query = select(PipelineRun).where(PipelineRun.parent_id == run_id)
    return list(session.scalars(query.order_by(PipelineRun.created_at, PipelineRun.id)))


def tasks_of(session: Session, run_id: str) -> list[PipelineTask]:
    query = select(PipelineTask).where(PipelineTask.run_id == run_id)
    return list(session.scalars(query.order_by(PipelineTask.step, PipelineTask.index)))


def cached(session: Session, owner_id: str, key: str, since: float | None) -> PipelineTask | None:
    """The newest task of the owner's runs that succeeded with these inputs (after `since`)."""
    query = (
        select(PipelineTask)
        .join(PipelineRun, PipelineRun.id == PipelineTask.run_id)
        .where(
            PipelineRun.owner_id == owner_id,
            PipelineTask.cache_key == key,
            PipelineTask.state.in_(DONE_TASKS),
        )
        .order_by(PipelineTask.finished_at.desc())
    )
    if since is not None:
        query = query.where(PipelineTask.finished_at >= since)
    return session.scalars(query.limit(1)).first()


def remove(session: Session, run_id: str) -> None:
    session.execute(delete(PipelineTask).where(PipelineTask.run_id == run_id))
    session.execute(delete(PipelineRun).where(PipelineRun.id == run_id))


def schedules(session: Session, owner_id: str | None) -> list[PipelineSchedule]:
    query = select(PipelineSchedule).order_by(PipelineSchedule.name)
    if owner_id is not None:
        query = query.where(PipelineSchedule.owner_id == owner_id)
    return list(session.scalars(query))


def schedule(session: Session, owner_id: str, ref: str) -> PipelineSchedule | None:
    """One of the owner's schedules, by name or id."""
    query = select(PipelineSchedule).where(
        PipelineSchedule.owner_id == owner_id,
        or_(PipelineSchedule.name == ref, PipelineSchedule.id == ref),
    )
    return session.scalars(query).first()


def due(session: Session, now: float) -> list[PipelineSchedule]:
    """Enabled schedules whose time has come, locked (on PostgreSQL) until the caller commits."""
    query = select(PipelineSchedule).where(
        PipelineSchedule.enabled.is_(True), PipelineSchedule.next_at <= now
    )
    return list(session.scalars(query.with_for_update(skip_locked=True)))
