"""A run's parameters and tags: a parameter keeps its first value (as MLflow's do), a tag its
newest; resending either is a no-op. A job's are under its run, whose id is the job's."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from loom.store.logs import insert_ignoring_duplicates
from loom.store.tables import Run, RunInfo

Entry = tuple[str, str, str, float]  # (kind: param | tag, key, value, set at)
COLUMNS = ("run_id", "kind", "key", "value", "set_at")


def record(session: Session, run_id: str, entries: Sequence[Entry]) -> int:
    """Store the entries; how many rows were written (a resent parameter writes none).
    Parameters go in one statement (kept if already there); each tag is an upsert that keeps
    the newest value."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    params = [(run_id, kind, key, value, at) for kind, key, value, at in entries if kind == "param"]
    written = insert_ignoring_duplicates(session, RunInfo.__tablename__, COLUMNS, params)
    for kind, key, value, at in entries:
        if kind == "param":
            continue
        row = {"run_id": run_id, "kind": kind, "key": key, "value": value, "set_at": at}
        statement: Any = dialect.insert(RunInfo).values(**row)
        unique = [RunInfo.run_id, RunInfo.kind, RunInfo.key]
        newer = statement.excluded.set_at >= RunInfo.set_at
        statement = statement.on_conflict_do_update(
            index_elements=unique,
            set_={"value": statement.excluded.value, "set_at": statement.excluded.set_at},
            where=newer,
        )
        written += max(int(getattr(session.execute(statement), "rowcount", 1) or 0), 0)
    return written


def existing(
    session: Session, run_id: str, keys: Sequence[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Which of these (kind, key) the run has already."""
    if not keys:
        return set()
    names = sorted({key for _kind, key in keys})
    query = select(RunInfo.kind, RunInfo.key).where(
        RunInfo.run_id == run_id, RunInfo.key.in_(names)
    )
    return {(kind, key) for kind, key in session.execute(query)} & set(keys)


def usage(session: Session, job_id: str) -> tuple[int, int]:
    """A job's parameters and tags, of its own run and of every run its code started, and the
    characters of their keys and values (what the job's budget counts)."""
    size = func.length(RunInfo.key) + func.length(RunInfo.value)
    started = select(Run.id).where(Run.job_id == job_id)
    query = select(func.count(), func.coalesce(func.sum(size), 0)).where(
        or_(RunInfo.run_id == job_id, RunInfo.run_id.in_(started))
    )
    rows, total = session.execute(query).one()
    return int(rows), int(total)


def read(session: Session, run_id: str) -> dict[str, dict[str, str]]:
    """`{"params": {key: value}, "tags": {key: value}}`, keys sorted."""
    found: dict[str, dict[str, str]] = {"params": {}, "tags": {}}
    query = select(RunInfo).where(RunInfo.run_id == run_id).order_by(RunInfo.key)
    for row in session.scalars(query):
        found["params" if row.kind == "param" else "tags"][row.key] = row.value
    return found


def params_of(session: Session, run_id: str, keys: Collection[str]) -> dict[str, str]:
    """The run's stored values of these params."""
    if not keys:
        return {}
    query = select(RunInfo.key, RunInfo.value).where(
        RunInfo.run_id == run_id, RunInfo.kind == "param", RunInfo.key.in_(list(keys))
    )
    return {key: value for key, value in session.execute(query)}


def delete_tag(session: Session, run_id: str, key: str) -> bool:
    """Remove a tag; False if the run had none by that key."""
    query = delete(RunInfo).where(
        RunInfo.run_id == run_id, RunInfo.kind == "tag", RunInfo.key == key
    )
    return bool(session.execute(query).rowcount)  # type: ignore[attr-defined]
