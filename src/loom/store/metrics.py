"""Metric points: idempotent inserts and filtered reads in arrival order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Select, Text, cast, delete, func, select, type_coerce
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
POINTS = MetricPoint.__table__


def insert_points(session: Session, rows: Sequence[Row]) -> int:
    """Insert points (tuples in `POINT_COLUMNS` order, `etimes` and `values` as JSON text)."""
    return insert_ignoring_duplicates(
        session, MetricPoint.__tablename__, POINT_COLUMNS, rows, JSON_COLUMNS
    )


def count_points(session: Session, job_id: str) -> int:
    query = select(func.count()).select_from(MetricPoint).where(MetricPoint.job_id == job_id)
    return int(session.scalar(query) or 0)


def usage_points(session: Session, job_id: str) -> tuple[int, int]:
    """A job's points and the characters of their values and x-axis values (as JSON)."""
    # As text: PostgreSQL has no length() of a json value (SQLite's JSON is text already).
    size = func.length(cast(MetricPoint.values, Text)) + func.coalesce(
        func.length(cast(MetricPoint.etimes, Text)), 0
    )
    query = select(func.count(), func.coalesce(func.sum(size), 0)).where(
        MetricPoint.job_id == job_id
    )
    rows, total = session.execute(query).one()
    return int(rows), int(total)


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


def _filtered(job_id: str, **filters: Any) -> Select[MetricPoint]:
    return select(MetricPoint).where(*_conditions(job_id, **filters))


def _conditions(
    job_id: str,
    *,
    after_id: int = 0,
    group: str | None = None,
    name: str | None = None,
    learner_id: int | None = None,
    since: float | None = None,
) -> list[ColumnElement[bool]]:
    """The filters, on the table's own columns (for ORM and Core queries alike)."""
    c = POINTS.c
    found = [c.job_id == job_id, c.id > after_id]
    if group is not None:
        found.append(c.group == group)
    if name is not None:
        found.append(c["values"][name].as_float().is_not(None))
    if learner_id is not None:
        found.append(c.learner_id == learner_id)
    if since is not None:
        found.append(c.time >= since)
    return found


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


def x_range(session: Session, job_id: str, **filters: Any) -> tuple[int, int] | None:
    """The lowest and highest x (the step, else the sequence number) of the filtered points."""
    x = func.coalesce(POINTS.c.step, POINTS.c.seq)
    query = select(func.min(x), func.max(x)).where(*_conditions(job_id, **filters))
    low, high = session.connection().execute(query).one()
    return None if low is None else (int(low), int(high))


def stream_points(
    session: Session, job_id: str, chunk: int = 5000, **filters: Any
) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """`(group, x, values)` of the filtered points in arrival order, read `chunk` rows at a
    time by keyset (never the whole job in memory, nor one long-held cursor)."""
    after = int(filters.pop("after_id", 0) or 0)
    # Core on the table's columns, the values as stored (JSON text on SQLite) decoded here by
    # orjson: the ORM's rows and the JSON type's decoding were most of the cost (~6x).
    c = POINTS.c
    columns = (c.id, c.group, c.step, c.seq, type_coerce(c["values"], Text))
    while True:
        query = (
            select(*columns)
            .where(*_conditions(job_id, after_id=after, **filters))
            .order_by(c.id)
            .limit(chunk)
        )
        rows = session.connection().execute(query).all()
        for row_id, group, step, seq, values in rows:
            found = values if isinstance(values, dict) else orjson.loads(values)
            yield group, step if step is not None else seq, found
            after = row_id
        if len(rows) < chunk:
            return


def run_points(
    session: Session, job_id: str, run_id: str | None, group: str, name: str
) -> list[MetricPoint]:
    """A job's points of one metric, of its own run (`run_id` None) or of a run it started."""
    query = _filtered(job_id, group=group, name=name)
    owned = MetricPoint.run_id.is_(None) if run_id is None else MetricPoint.run_id == run_id
    return list(session.scalars(query.where(owned).order_by(MetricPoint.id)))
