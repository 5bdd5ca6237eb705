"""MLflow 3's logged models: a model's files in an artifact folder of their own, made by a run
(`mlflow.<flavour>.log_model`, autolog), found by search, registered as a version later."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Sequence
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.domain.errors import InvalidInput, NotFound
from loom.domain.run_search import LOGGED_MODELS, compare, parse_filter
from loom.domain.runs import (
    DEFAULT_PROJECT,
    LOGGED_MODEL_STATUSES,
    MAX_PARAM_VALUE,
    MAX_TAG_VALUE,
    Actor,
    Entry,
    LoggedModelRecord,
    Page,
    Stage,
    check_name,
    check_value,
)
from loom.store import projects as project_rows
from loom.store import runs as run_rows
from loom.store.db import Database
from loom.store.tables import LoggedModel, Project
from loom.tds.runs import checked_page, now_ms, project_id

ATTRIBUTES = {
    "name": "name",
    "model_id": "id",
    "model_type": "model_type",
    "status": "status",
    "source_run_id": "source_run_id",
    "creation_timestamp": "created_at",
    "last_updated_timestamp": "updated_at",
}


def record(row: LoggedModel) -> LoggedModelRecord:
    return LoggedModelRecord(
        id=row.id,
        project_id=row.project_id,
        owner_id=row.owner_id,
        name=row.name,
        source_run_id=row.source_run_id,
        model_type=row.model_type,
        status=row.status,
        status_message=row.status_message,
        stage=row.stage,
        artifact_location=row.artifact_location,
        params=dict(row.params or {}),
        tags=dict(row.tags or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class LoggedModels:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self,
        actor: Actor,
        key: object,
        *,
        name: str | None = None,
        source_run_id: str | None = None,
        model_type: str | None = None,
        params: Sequence[Entry] = (),
        tags: Sequence[Entry] = (),
    ) -> LoggedModelRecord:
        self._check(params, tags)
        with self.db.session() as session:
            project = self._project(session, actor, key)
            if source_run_id:
                run = run_rows.get_run(session, source_run_id)
                if run is None or not actor.may_read(run.owner_id):
                    raise NotFound(f"no run with id {source_run_id}")
            model_id = f"m-{uuid.uuid4().hex}"
            now = now_ms()
            row = LoggedModel(
                id=model_id,
                project_id=project.id,
                owner_id=actor.user_id,
                name=name or f"model-{secrets.token_hex(3)}",
                source_run_id=source_run_id or None,
                job_id=actor.job_id,
                model_type=model_type or "",
                status="LOGGED_MODEL_PENDING",
                status_message="",
                stage=Stage.ACTIVE.value,
                artifact_location=f"mlflow-artifacts:/{project.id}/models/{model_id}/artifacts",
                params={p.key: p.value for p in params},
                tags={t.key: t.value for t in tags},
                created_at=now,
                updated_at=now,
            )
            session.add(row)
            session.flush()
            return record(row)

    def get(self, actor: Actor, model_id: str) -> LoggedModelRecord:
        with self.db.session() as session:
            return record(self._model(session, actor, model_id))

    def finalize(self, actor: Actor, model_id: str, status: str) -> LoggedModelRecord:
        if status not in LOGGED_MODEL_STATUSES[1:]:
            raise InvalidInput(
                f"status: LOGGED_MODEL_READY or LOGGED_MODEL_UPLOAD_FAILED, got {status!r}",
                field="status",
            )
        with self.db.session() as session:
            row = self._writable(session, actor, model_id)
            row.status, row.updated_at = status, now_ms()
            return record(row)

    def delete(self, actor: Actor, model_id: str) -> None:
        with self.db.session() as session:
            row = self._writable(session, actor, model_id)
            row.stage, row.updated_at = Stage.DELETED.value, now_ms()

    def set_tags(self, actor: Actor, model_id: str, tags: Sequence[Entry]) -> None:
        self._check((), tags)
        with self.db.session() as session:
            row = self._writable(session, actor, model_id)
            row.tags = {**(row.tags or {}), **{t.key: t.value for t in tags}}
            row.updated_at = now_ms()

    def delete_tag(self, actor: Actor, model_id: str, key: str) -> None:
        with self.db.session() as session:
            row = self._writable(session, actor, model_id)
            if key not in (row.tags or {}):
                raise NotFound(f"logged model {model_id} has no tag {key!r}")
            row.tags = {k: v for k, v in row.tags.items() if k != key}

    def log_params(self, actor: Actor, model_id: str, params: Sequence[Entry]) -> None:
        self._check(params, ())
        with self.db.session() as session:
            row = self._writable(session, actor, model_id)
            row.params = {**(row.params or {}), **{p.key: p.value for p in params}}

    def search(
        self,
        actor: Actor,
        project_ids: Sequence[object],
        *,
        filter: str | None = None,
        order_by: Sequence[tuple[str, bool]] = (),
        max_results: int = 100,
        offset: int = 0,
    ) -> Page[LoggedModelRecord]:
        """Active logged models of these projects that match, in order (newest first by
        default); held in memory, as a project holds few models."""
        limit = checked_page(max_results)
        clauses = parse_filter(filter, LOGGED_MODELS)
        ids = [project_id(key, "experiment_ids") for key in project_ids]
        with self.db.session() as session:
            query = select(LoggedModel).where(
                LoggedModel.project_id.in_(ids), LoggedModel.stage == Stage.ACTIVE.value
            )
            if not actor.is_admin:
                query = query.where(LoggedModel.owner_id == actor.user_id)
            found = [record(row) for row in session.scalars(query)]
        found = [
            m for m in found if all(_matches(m, c.kind, c.key, c.op, c.value) for c in clauses)
        ]
        found.sort(key=lambda m: (-m.created_at, m.id))
        for field, ascending in reversed(list(order_by)):
            found.sort(key=partial(_sort_value, field=field), reverse=not ascending)
        page = found[offset : offset + limit]
        more = offset + limit < len(found)
        return Page(page, offset + limit if more else None)

    @staticmethod
    def _check(params: Sequence[Entry], tags: Sequence[Entry]) -> None:
        for param in params:
            check_name("param", param.key)
            check_value("param", param.value, MAX_PARAM_VALUE)
        for tag in tags:
            check_name("tag", tag.key)
            check_value("tag", tag.value, MAX_TAG_VALUE)

    def _project(self, session: Session, actor: Actor, key: object) -> Project:
        project = project_rows.get(session, project_id(key))
        if project is None or not (project.owner_id is None or actor.may_read(project.owner_id)):
            raise NotFound(f"no experiment (project) with id {key}")
        if actor.job_id is not None and project.id == DEFAULT_PROJECT:
            job_run = run_rows.get_run(session, actor.job_id)
            if job_run is not None:
                project = session.get(Project, job_run.project_id) or project
        if project.owner_id is not None:
            actor.check_write(project.owner_id, actor.job_id, f"experiment {project.id}")
        if project.stage != Stage.ACTIVE.value:
            raise InvalidInput(f"experiment {project.id} is deleted; restore it first")
        return project

    def _model(self, session: Session, actor: Actor, model_id: str) -> LoggedModel:
        row = session.get(LoggedModel, model_id)
        if row is None or not actor.may_read(row.owner_id):
            raise NotFound(f"no logged model with id {model_id}")
        return row

    def _writable(self, session: Session, actor: Actor, model_id: str) -> LoggedModel:
        row = self._model(session, actor, model_id)
        actor.check_write(row.owner_id, row.job_id, f"logged model {model_id}")
        return row


def _value(model: LoggedModelRecord, kind: str, key: str) -> Any:
    if kind == "param":
        return model.params.get(key)
    if kind == "tag":
        return model.tags.get(key)
    if kind == "attribute":
        return getattr(model, ATTRIBUTES.get(key, key), None)
    return None  # metrics are the runs' in Loom: a logged model has none of its own


def _matches(model: LoggedModelRecord, kind: str, key: str, op: str, value: Any) -> bool:
    return compare(_value(model, kind, key), op, value)


def _sort_value(model: LoggedModelRecord, *, field: str) -> tuple[bool, Any]:
    kind, _, key = field.partition(".")
    if not key:
        kind, key = "attribute", field
    kind = {"params": "param", "tags": "tag", "metrics": "metric"}.get(kind, kind)
    found = _value(model, kind, key)
    return (found is None, found if found is not None else "")
