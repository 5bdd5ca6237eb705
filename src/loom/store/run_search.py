"""MLflow's search grammar (parsed in `domain.run_search`) as SQL over runs and projects.

Each comparison on a param, tag or metric is an EXISTS on that run's rows (a run without the
key never matches, `!=` included, as in MLflow); ordering by one outer-joins it, with runs that
lack it last whichever the direction. LIKE is case-sensitive on SQLite too (as MLflow documents
it), through GLOB.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    exists,
    false,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import KeyedColumnElement

from loom.domain.errors import InvalidInput
from loom.domain.run_search import Clause, OrderKey
from loom.store.tables import Project, ProjectTag, Run, RunInfo, RunLatestMetric

RUN_ATTRIBUTES: dict[str, Any] = {
    "run_id": Run.id,
    "run_name": Run.name,
    "status": Run.status,
    "user_id": Run.user_id,
    "artifact_uri": Run.artifact_uri,
    "start_time": Run.start_time,
    "end_time": Run.end_time,
}
PROJECT_ATTRIBUTES: dict[str, Any] = {
    "name": Project.name,
    "experiment_id": Project.id,
    "creation_time": Project.created_at,
    "last_update_time": Project.updated_at,
}


def search_runs(
    session: Session,
    *,
    project_ids: Sequence[int],
    owner_id: str | None,
    stages: Sequence[str],
    clauses: Sequence[Clause],
    order: Sequence[OrderKey],
    offset: int,
    limit: int,
) -> list[Any]:
    """Up to `limit` runs (rows of the runs table) of these projects (of `owner_id`, or
    anyone's if None), from `offset` in the asked order; then newest first, then by id."""
    query: Select[Any] = select(Run).where(
        Run.project_id.in_(list(project_ids)), Run.stage.in_(list(stages))
    )
    if owner_id is not None:
        query = query.where(Run.owner_id == owner_id)
    for clause in clauses:
        query = query.where(_run_condition(session, clause))
    query = _ordered(query, order).offset(offset).limit(limit)
    # Plain rows, not ORM objects: a page may be 1,000 runs, only read (`runs.records`).
    return list(session.execute(query.with_only_columns(*Run.__table__.columns)))


def _run_condition(session: Session, clause: Clause) -> ColumnElement[bool]:
    if clause.kind == "attribute":
        return compare(session, RUN_ATTRIBUTES[clause.key], clause.op, clause.value)
    if clause.kind == "metric":
        metric = RunLatestMetric
        found = compare(session, metric.value, clause.op, clause.value)
        found = (
            or_(found, metric.is_nan == true())
            if clause.op == "!="
            else and_(found, metric.is_nan == false())
        )
        return exists().where(metric.run_id == Run.id, metric.key == clause.key, found)
    kind = "param" if clause.kind == "param" else "tag"
    keyed = and_(RunInfo.run_id == Run.id, RunInfo.kind == kind, RunInfo.key == clause.key)
    if clause.op == "IS NULL":
        return not_(exists().where(keyed))
    if clause.op == "IS NOT NULL":
        return exists().where(keyed)
    return exists().where(keyed, compare(session, RunInfo.value, clause.op, clause.value))


def compare(session: Session, column: Any, op: str, value: Any) -> ColumnElement[bool]:
    """`column op value`, with LIKE case-sensitive on every database."""
    if op == "LIKE":
        if session.get_bind().dialect.name == "sqlite":
            return column.op("GLOB")(_glob(str(value)))  # type: ignore[no-any-return]
        return column.like(value)  # type: ignore[no-any-return]
    if op == "ILIKE":
        return column.ilike(value)  # type: ignore[no-any-return]
    if op == "IN":
        return column.in_(list(value))  # type: ignore[no-any-return]
    if op == "NOT IN":
        return not_(column.in_(list(value)))  # type: ignore[no-any-return]
    operators = {
        "=": column.__eq__,
        "!=": column.__ne__,
        "<": column.__lt__,
        "<=": column.__le__,
        ">": column.__gt__,
        ">=": column.__ge__,
    }
    if op not in operators:
        raise InvalidInput(f"filter: cannot compare with {op!r}", field="filter")
    return operators[op](value)  # type: ignore[no-any-return]


def _glob(pattern: str) -> str:
    """A LIKE pattern as a GLOB one: `%` → `*`, `_` → `?`, GLOB's own specials made literal."""
    special = {"%": "*", "_": "?", "*": "[*]", "?": "[?]", "[": "[[]"}
    return "".join(special.get(c, c) for c in pattern)


def _ordered(query: Select[Any], order: Sequence[OrderKey]) -> Select[Any]:
    terms: list[Any] = []
    for number, key in enumerate(order):
        value, missing, query = _order_value(query, key, number)
        terms += [missing, value if key.ascending else value.desc()]
    if not any(k.kind == "attribute" and k.key == "start_time" for k in order):
        terms.append(Run.start_time.desc())
    terms.append(Run.id)
    return query.order_by(*terms)


def _order_value(
    query: Select[Any], key: OrderKey, number: int
) -> tuple[Any, ColumnElement[int], Select[Any]]:
    """What to order by, a rank that puts runs without it (and NaN metrics) last, and the
    query with what it needs joined."""
    if key.kind == "attribute":
        column = RUN_ATTRIBUTES[key.key]
        return column, case((column.is_(None), 1), else_=0), query
    if key.kind == "metric":
        metric = (
            select(RunLatestMetric)
            .where(RunLatestMetric.key == key.key)
            .subquery(f"order_{number}")
        )
        query = query.outerjoin(metric, metric.c.run_id == Run.id)
        rank = case((metric.c.is_nan == true(), 1), (metric.c.value.is_(None), 2), else_=0)
        return metric.c.value, rank, query
    kind = "param" if key.kind == "param" else "tag"
    info = (
        select(RunInfo.run_id, RunInfo.value)
        .where(RunInfo.kind == kind, RunInfo.key == key.key)
        .subquery(f"order_{number}")
    )
    query = query.outerjoin(info, info.c.run_id == Run.id)
    return info.c.value, case((info.c.value.is_(None), 1), else_=0), query


def search_projects(
    session: Session,
    *,
    owner_id: str | None,
    with_default: bool,
    stages: Sequence[str],
    clauses: Sequence[Clause],
    order: Sequence[OrderKey],
    offset: int,
    limit: int,
) -> list[Project]:
    """Projects of `owner_id` (anyone's if None), and the Default one if `with_default`."""
    query: Select[Any] = select(Project).where(Project.stage.in_(list(stages)))
    if owner_id is not None:
        mine = Project.owner_id == owner_id
        query = query.where(or_(mine, Project.owner_id.is_(None)) if with_default else mine)
    for clause in clauses:
        query = query.where(_project_condition(session, clause))
    terms: list[Any] = []
    for key in order or [OrderKey("attribute", "creation_time", False)]:
        column: KeyedColumnElement[Any] = PROJECT_ATTRIBUTES[key.key]
        terms.append(column if key.ascending else column.desc())
    terms.append(Project.id)
    return list(session.scalars(query.order_by(*terms).offset(offset).limit(limit)))


def _project_condition(session: Session, clause: Clause) -> ColumnElement[bool]:
    if clause.kind == "attribute":
        value = clause.value
        if clause.key == "experiment_id":
            value = _project_ids(value)
        elif clause.key in ("creation_time", "last_update_time") and not isinstance(value, int):
            raise InvalidInput(f"filter: {clause.key} compares with an integer", field="filter")
        return compare(session, PROJECT_ATTRIBUTES[clause.key], clause.op, value)
    keyed = and_(ProjectTag.project_id == Project.id, ProjectTag.key == clause.key)
    if clause.op == "IS NULL":
        return not_(exists().where(keyed))
    if clause.op == "IS NOT NULL":
        return exists().where(keyed)
    return exists().where(keyed, compare(session, ProjectTag.value, clause.op, clause.value))


def _project_ids(value: Any) -> Any:
    try:
        if isinstance(value, tuple):
            return tuple(int(v) for v in value)
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"filter: experiment ids are integers, got {value!r}", field="filter"
        ) from None
