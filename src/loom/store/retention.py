"""The jobs whose training data has outlived its retention, and deleting it in short steps."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from loom.store.tables import Job, LogLine, MetricPoint


def ended_before(
    session: Session, cutoff: float, ended: Collection[str], limit: int = 1000
) -> list[str]:
    """Jobs in an `ended` state, since before `cutoff` (epoch seconds), that still hold
    lines or points. (A resumed job keeps its old `finished_at`, hence the state.)"""
    has_data = exists().where(LogLine.job_id == Job.id) | exists().where(
        MetricPoint.job_id == Job.id
    )
    query = (
        select(Job.id).where(Job.state.in_(ended), Job.finished_at < cutoff, has_data).limit(limit)
    )
    return list(session.scalars(query))
