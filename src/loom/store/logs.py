"""Log lines: idempotent batched inserts and paged reads in arrival order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from loom.store.tables import Base, LogLine


def insert_ignoring_duplicates(
    session: Session, table: type[Base], rows: Sequence[dict[str, Any]]
) -> None:
    """Insert rows; one whose unique key is already stored is skipped (resends are no-ops)."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    session.execute(insert(table).on_conflict_do_nothing(), list(rows))


def insert_lines(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert lines; a line already stored (same job, attempt, learner, seq) is skipped."""
    insert_ignoring_duplicates(session, LogLine, rows)


def last_seq(session: Session, job_id: str, attempt: int, learner_id: int) -> int:
    """The highest sequence number stored for one learner, 0 if none."""
    query = select(func.max(LogLine.seq)).where(
        LogLine.job_id == job_id, LogLine.attempt == attempt, LogLine.learner_id == learner_id
    )
    return int(session.scalar(query) or 0)


def last_id(session: Session, job_id: str) -> int:
    return int(session.scalar(select(func.max(LogLine.id)).where(LogLine.job_id == job_id)) or 0)


def read_lines(
    session: Session,
    job_id: str,
    *,
    after_id: int = 0,
    offset: int = 0,
    limit: int = 100,
    learner_id: int | None = None,
    since: float | None = None,
    from_end: bool = False,
) -> list[LogLine]:
    """Lines in arrival order (per learner that is sequence order)."""
    query = select(LogLine).where(LogLine.job_id == job_id, LogLine.id > after_id)
    if learner_id is not None:
        query = query.where(LogLine.learner_id == learner_id)
    if since is not None:
        query = query.where(LogLine.time >= since)
    if from_end:
        newest_first = query.order_by(LogLine.id.desc()).offset(offset).limit(limit)
        return list(session.scalars(newest_first))[::-1]
    return list(session.scalars(query.order_by(LogLine.id).offset(offset).limit(limit)))
