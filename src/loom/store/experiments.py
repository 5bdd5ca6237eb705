"""Experiments and their trials, as rows."""

from __future__ import annotations

import secrets
import string

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.orm import Session

from loom.store.tables import Experiment, Trial

_ID_CHARS = string.ascii_lowercase + string.digits
ACTIVE = ("CREATED", "RUNNING", "HALTED")
ACTIVE_TRIALS = ("CREATED", "RUNNING")


def new_experiment_id() -> str:
    return "experiment-" + "".join(secrets.choice(_ID_CHARS) for _ in range(10))


def get(session: Session, experiment_id: str) -> Experiment | None:
    return session.get(Experiment, experiment_id)


def by_name(session: Session, owner_id: str, name: str) -> Experiment | None:
    query = select(Experiment).where(Experiment.owner_id == owner_id, Experiment.name == name)
    return session.scalars(query).first()


def listing(session: Session, owner_id: str | None) -> list[Experiment]:
    query = select(Experiment).order_by(Experiment.created_at.desc(), Experiment.id)
    if owner_id is not None:
        query = query.where(Experiment.owner_id == owner_id)
    return list(session.scalars(query))


def to_drive(session: Session) -> list[str]:
    """Experiments with work left: not ended, or with trials still running (being stopped)."""
    running = exists().where(Trial.experiment_id == Experiment.id, Trial.state.in_(ACTIVE_TRIALS))
    query = select(Experiment.id).where(or_(Experiment.state.in_(ACTIVE), running))
    return list(session.scalars(query.order_by(Experiment.created_at)))


def trials_of(session: Session, experiment_id: str) -> list[Trial]:
    query = select(Trial).where(Trial.experiment_id == experiment_id).order_by(Trial.number)
    return list(session.scalars(query))


def trial_of_job(session: Session, job_id: str) -> Trial | None:
    return session.scalars(select(Trial).where(Trial.job_id == job_id)).first()


def remove(session: Session, experiment_id: str) -> None:
    session.execute(delete(Trial).where(Trial.experiment_id == experiment_id))
    session.execute(delete(Experiment).where(Experiment.id == experiment_id))
