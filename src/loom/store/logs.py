"""Log lines: idempotent batched inserts and paged reads in arrival order."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import CursorResult, Delete, delete, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from loom.store.tables import Base, LogLine

Row = tuple[Any, ...]

LINE_COLUMNS = ("job_id", "attempt", "learner_id", "seq", "time", "stream", "text")


def insert_ignoring_duplicates(
    session: Session,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Row],
    json_columns: frozenset[str] = frozenset(),
) -> int:
    """Insert rows (tuples in `columns` order, JSON columns already serialised); a row whose
    unique key is already stored is skipped, so resends are no-ops. Returns how many were
    inserted (all of them where the driver does not say).

    This is the ingestion hot path (100,000s of rows a second): it goes straight to the
    driver, not through the ORM's bulk insert and per-row type processing, which cost 3-4x
    more per row; on SQLite as an `executemany`, on PostgreSQL as one statement per batch.
    """
    if not rows:
        return 0
    names = ", ".join(f'"{c}"' for c in columns)
    if session.get_bind().dialect.name == "postgresql":
        # One statement for the whole batch: each column goes as one array and `unnest` turns
        # them back into rows, instead of a statement per row.
        sql = _unnest_insert(table, tuple(columns), json_columns)
        arrays = [list(column) for column in zip(*rows, strict=True)]
        inserted = session.connection().exec_driver_sql(sql, tuple(arrays)).rowcount
    else:
        marks = ", ".join("?" for _ in columns)
        sql = f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING"
        inserted = session.connection().exec_driver_sql(sql, list(rows)).rowcount
    return inserted if inserted >= 0 else len(rows)


@functools.cache
def _unnest_insert(table: str, columns: tuple[str, ...], json_columns: frozenset[str]) -> str:
    """`INSERT … SELECT … FROM unnest(%s::type[], …)` for PostgreSQL; JSON goes as text."""
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    found = Base.metadata.tables[table].c
    types = ["text" if c in json_columns else found[c].type.compile(dialect) for c in columns]
    arrays = ", ".join(f"%s::{sql_type}[]" for sql_type in types)
    names = ", ".join(f'"{c}"' for c in columns)
    picked = ", ".join(f'"{c}"::json' if c in json_columns else f'"{c}"' for c in columns)
    return (
        f"INSERT INTO {table} ({names}) SELECT {picked} FROM unnest({arrays}) AS u({names}) "
        "ON CONFLICT DO NOTHING"
    )


# The first key of the advisory locks that order a job's ingestion (the second is the job's hash).
_STREAM_LOCK = 7301


def lock_job_stream(session: Session, job_id: str) -> None:
    """Until this transaction ends, no other one stores lines or points of this job.

    So a job's row ids are handed out and committed in order, and a follower that reads "after
    id N" can never miss a row that takes a smaller id but commits later. SQLite has one writer
    at a time already; PostgreSQL's sequences would otherwise commit out of order."""
    if session.get_bind().dialect.name == "postgresql":
        statement = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
        session.connection().exec_driver_sql(statement, (_STREAM_LOCK, job_id))


def insert_lines(session: Session, rows: Sequence[Row]) -> int:
    """Insert lines (tuples in `LINE_COLUMNS` order); lines already stored are skipped."""
    return insert_ignoring_duplicates(session, LogLine.__tablename__, LINE_COLUMNS, rows)


def count_lines(session: Session, job_id: str) -> int:
    query = select(func.count()).select_from(LogLine).where(LogLine.job_id == job_id)
    return int(session.scalar(query) or 0)


def usage_lines(session: Session, job_id: str) -> tuple[int, int]:
    """A job's lines and the characters of their text."""
    query = select(func.count(), func.coalesce(func.sum(func.length(LogLine.text)), 0)).where(
        LogLine.job_id == job_id
    )
    rows, size = session.execute(query).one()
    return int(rows), int(size)


def delete_lines(session: Session, job_id: str, limit: int) -> int:
    """Delete up to `limit` of a job's lines (a short transaction); returns how many."""
    some = select(LogLine.id).where(LogLine.job_id == job_id).limit(limit)
    return delete_rows(session, delete(LogLine).where(LogLine.id.in_(some)))


def delete_rows(session: Session, statement: Delete) -> int:
    result: CursorResult[Any] = session.execute(statement)  # type: ignore[assignment]
    return int(result.rowcount)


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
