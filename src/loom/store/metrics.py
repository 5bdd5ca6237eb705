"""Metric points: idempotent inserts and filtered reads in arrival order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, delete, func, select
from sqlalchemy.orm import Session

from loom.store.logs import Row, delete_rows, insert_ignoring_duplicates
from loom.store.tables import MetricPoint

POINT_COLUMNS = (
    "job_id",
    "attempt",
    "learner_id",
    "seq",
    "time",
    "group",
    "step",
    "etimes",
    "values",
    "run_id",
)
JSON_COLUMNS = frozenset({"etimes", "values"})


def insert_points(session: Session, rows: Sequence[Row]) -> int:
    """Insert points (tuples in `POINT_COLUMNS` order, `etimes` and `values` as JSON text)."""
    return insert_ignoring_duplicates(
        session, MetricPoint.__tablename__, POINT_COLUMNS, rows, JSON_COLUMNS
    )


def count_points(session: Session, job_id: str) -> int:
    query = select(func.count()).select_from(MetricPoint).where(MetricPoint.job_id == job_id)
    return int(session.scalar(query) or 0)


def delete_points(session: Session, job_id: str, limit: int) -> int:
    """Delete up to `limit` of a job's points (a short transaction); returns how many."""
    some = select(MetricPoint.id).where(MetricPoint.job_id == job_id).limit(limit)
    return delete_rows(session, delete(MetricPoint).where(MetricPoint.id.in_(some)))


def last_seq(session: Session, job_id: str, attempt: int, learner_id: int) -> int:
    query = select(func.max(MetricPoint.seq)).where(
        MetricPoint.job_id == job_id,
        MetricPoint.attempt == attempt,
        MetricPoint.learner_id == learner_id,
    )
    return int(session.scalar(query) or 0)


def last_id(session: Session, job_id: str) -> int:
    query = select(func.max(MetricPoint.id)).where(MetricPoint.job_id == job_id)
    return int(session.scalar(query) or 0)


def _filtered(
    job_id: str,
    *,
    after_id: int = 0,
    group: str | None = None,
    name: str | None = None,
    learner_id: int | None = None,
    since: float | None = None,
) -> Select[MetricPoint]:
    query = select(MetricPoint).where(MetricPoint.job_id == job_id, MetricPoint.id > after_id)
    if group is not None:
        query = query.where(MetricPoint.group == group)
    if name is not None:
        query = query.where(MetricPoint.values[name].as_float().is_not(None))
    if learner_id is not None:
        query = query.where(MetricPoint.learner_id == learner_id)
    if since is not None:
        query = query.where(MetricPoint.time >= since)
    return query


def read_points(
    session: Session,
    job_id: str,
    *,
    offset: int = 0,
    limit: int = 100,
    from_end: bool = False,
    **filters: Any,
) -> list[MetricPoint]:
    """Points in arrival order; `from_end` pages back from the newest."""
    query = _filtered(job_id, **filters)
    if from_end:
        newest_first = query.order_by(MetricPoint.id.desc()).offset(offset).limit(limit)
        return list(session.scalars(newest_first))[::-1]
    return list(session.scalars(query.order_by(MetricPoint.id).offset(offset).limit(limit)))


def all_points(session: Session, job_id: str, **filters: Any) -> list[MetricPoint]:
    return list(session.scalars(_filtered(job_id, **filters).order_by(MetricPoint.id)))


def run_points(
    session: Session, job_id: str, run_id: str | None, group: str, name: str
) -> list[MetricPoint]:
    """A job's points of one metric, of its own run (`run_id` None) or of a run it started."""
    query = _filtered(job_id, group=group, name=name)
    owned = MetricPoint.run_id.is_(None) if run_id is None else MetricPoint.run_id == run_id
    return list(session.scalars(query.where(owned).order_by(MetricPoint.id)))
