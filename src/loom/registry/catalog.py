"""MLflow's registry verbs on Loom's registry: a registered model made empty and filled later,
with a description and tags; versions made from files already in the artifact store (a run's
or a logged model's), with a stage, a description and tags; renames; searches. A version made
so is a Loom model version like any (`loom deploy` serves it), and every Loom version is seen
through these verbs too."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from loom.domain.catalog import ARCHIVABLE, ModelRecord, VersionRecord, latest_by_stage
from loom.domain.errors import AlreadyExists, InvalidInput, NotFound
from loom.store.db import Database
from loom.store.tables import Model, ModelAlias, ModelTag, ModelVersion, User

MAX_NAME = 200


def check_model_name(name: object, where: str = "name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"{where}: a registered model needs a name", field=where)
    if len(name) > MAX_NAME or any(c in name for c in "\x00/\\"):
        raise InvalidInput(
            f"{where}: at most {MAX_NAME} characters, without / or \\, got {name!r:.60}",
            field=where,
        )
    return name


class Catalog:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- registered models -----------------------------------------------------------------
    def create_model(
        self, owner: str, name: str, description: str = "", tags: dict[str, str] | None = None
    ) -> ModelRecord:
        check_model_name(name)
        with self.db.session() as session:
            if self._find(session, owner, name) is not None:
                raise AlreadyExists(f"registered model {name!r} exists already")
            now = time.time()
            model = Model(
                id=uuid.uuid4().hex,
                owner_id=owner,
                name=name,
                created_at=now,
                description=description,
                updated_at=now,
            )
            session.add(model)
            session.flush()
            for key, value in (tags or {}).items():
                session.add(ModelTag(model_id=model.id, version=0, key=key, value=value))
            session.flush()
            return self._record(session, model)

    def model(self, owner: str, name: str) -> ModelRecord:
        with self.db.session() as session:
            return self._record(session, self._model(session, owner, name))

    def models(self, owner: str) -> list[ModelRecord]:
        with self.db.session() as session:
            found = session.scalars(select(Model).where(Model.owner_id == owner))
            return [self._record(session, model) for model in found]

    def describe(self, owner: str, name: str, description: str) -> ModelRecord:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            model.description, model.updated_at = description, time.time()
            return self._record(session, model)

    def rename(self, owner: str, name: str, new_name: str) -> ModelRecord:
        check_model_name(new_name, "new_name")
        with self.db.session() as session:
            model = self._model(session, owner, name)
            if self._find(session, owner, new_name) is not None:
                raise AlreadyExists(f"registered model {new_name!r} exists already")
            model.name, model.updated_at = new_name, time.time()
            return self._record(session, model)

    def set_tag(self, owner: str, name: str, key: str, value: str, version: int = 0) -> None:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            if version:
                self._version(session, model, version)
            session.merge(ModelTag(model_id=model.id, version=version, key=key, value=value))

    def delete_tag(self, owner: str, name: str, key: str, version: int = 0) -> None:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            if version:
                self._version(session, model, version)
            session.execute(
                delete(ModelTag).where(
                    ModelTag.model_id == model.id, ModelTag.version == version, ModelTag.key == key
                )
            )

    # -- versions ----------------------------------------------------------------------------
    def create_version(
        self,
        owner: str,
        name: str,
        *,
        files: list[dict[str, Any]],
        source: str,
        run_id: str = "",
        job_id: str = "",
        framework: str = "",
        metrics: dict[str, float] | None = None,
        run_info: dict[str, Any] | None = None,
        description: str = "",
        tags: dict[str, str] | None = None,
    ) -> VersionRecord:
        """A new version of a registered model from files already stored (by digest)."""
        with self.db.session() as session:
            model = self._model(session, owner, name)
            latest = session.scalar(
                select(func.max(ModelVersion.version)).where(ModelVersion.model_id == model.id)
            )
            now = time.time()
            version = ModelVersion(
                model_id=model.id,
                version=(latest or 0) + 1,
                job_id=job_id,
                code_digest="",
                framework=framework,
                manifest={},
                data_stores=[],
                metrics=metrics or {},
                files=files,
                created_at=now,
                run_info=run_info or {},
                lineage=None,
                source=source,
                run_id=run_id,
                description=description,
                stage="None",
                updated_at=now,
            )
            session.add(version)
            session.flush()
            for key, value in (tags or {}).items():
                session.add(
                    ModelTag(model_id=model.id, version=version.version, key=key, value=value)
                )
            model.updated_at = now
            session.flush()
            return self._version_record(session, model, version)

    def version(self, owner: str, name: str, number: int) -> VersionRecord:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            return self._version_record(session, model, self._version(session, model, number))

    def by_alias(self, owner: str, name: str, alias: str) -> VersionRecord:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            found = session.get(ModelAlias, (model.id, alias))
            if found is None:
                raise InvalidInput(f"registered model {name!r} has no alias {alias!r}")
            version = self._version(session, model, found.version)
            return self._version_record(session, model, version)

    def describe_version(
        self, owner: str, name: str, number: int, description: str
    ) -> VersionRecord:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            version = self._version(session, model, number)
            version.description, version.updated_at = description, time.time()
            return self._version_record(session, model, version)

    def transition(
        self, owner: str, name: str, number: int, stage: str, archive_others: bool
    ) -> VersionRecord:
        """Move a version to a stage; `archive_others` archives the versions already there."""
        with self.db.session() as session:
            model = self._model(session, owner, name)
            version = self._version(session, model, number)
            now = time.time()
            if archive_others and stage in ARCHIVABLE:
                query = select(ModelVersion).where(
                    ModelVersion.model_id == model.id,
                    ModelVersion.stage == stage,
                    ModelVersion.version != number,
                )
                for other in session.scalars(query):
                    other.stage, other.updated_at = "Archived", now
            version.stage, version.updated_at = stage, now
            return self._version_record(session, model, version)

    def versions(self, owner: str, name: str | None = None) -> list[VersionRecord]:
        """Every version of the owner's models (of one, if named)."""
        with self.db.session() as session:
            query = select(Model).where(Model.owner_id == owner)
            if name is not None:
                query = query.where(Model.name == name)
            found = []
            for model in session.scalars(query):
                rows = session.scalars(
                    select(ModelVersion).where(ModelVersion.model_id == model.id)
                )
                found += [self._version_record(session, model, row) for row in rows]
            return found

    # -- reading ------------------------------------------------------------------------------
    def _find(self, session: Session, owner: str, name: str) -> Model | None:
        query = select(Model).where(Model.owner_id == owner, Model.name == name)
        return session.scalars(query).first()

    def _model(self, session: Session, owner: str, name: str) -> Model:
        model = self._find(session, owner, name)
        if model is None:
            raise NotFound(f"no registered model {name!r}")
        return model

    def _version(self, session: Session, model: Model, number: int) -> ModelVersion:
        query = select(ModelVersion).where(
            ModelVersion.model_id == model.id, ModelVersion.version == number
        )
        found = session.scalars(query).first()
        if found is None:
            raise NotFound(f"registered model {model.name!r} has no version {number}")
        return found

    def _tags(self, session: Session, model: Model) -> dict[int, dict[str, str]]:
        found: dict[int, dict[str, str]] = {}
        query = select(ModelTag).where(ModelTag.model_id == model.id).order_by(ModelTag.key)
        for tag in session.scalars(query):
            found.setdefault(tag.version, {})[tag.key] = tag.value
        return found

    def _aliases(self, session: Session, model: Model) -> dict[str, int]:
        query = select(ModelAlias).where(ModelAlias.model_id == model.id)
        return {a.alias: a.version for a in session.scalars(query.order_by(ModelAlias.alias))}

    def _record(self, session: Session, model: Model) -> ModelRecord:
        tags, aliases = self._tags(session, model), self._aliases(session, model)
        rows = session.scalars(select(ModelVersion).where(ModelVersion.model_id == model.id))
        owner = session.get(User, model.owner_id)
        versions = [self._shown(model, r, tags, aliases, owner) for r in rows]
        return ModelRecord(
            name=model.name,
            created_at=model.created_at,
            updated_at=model.updated_at or model.created_at,
            description=model.description,
            tags=tags.get(0, {}),
            aliases=aliases,
            latest=latest_by_stage(versions),
        )

    def _version_record(self, session: Session, model: Model, row: ModelVersion) -> VersionRecord:
        owner = session.get(User, model.owner_id)
        return self._shown(
            model, row, self._tags(session, model), self._aliases(session, model), owner
        )

    @staticmethod
    def _shown(
        model: Model,
        row: ModelVersion,
        tags: dict[int, dict[str, str]],
        aliases: dict[str, int],
        owner: User | None,
    ) -> VersionRecord:
        return VersionRecord(
            model=model.name,
            version=row.version,
            created_at=row.created_at,
            updated_at=row.updated_at or row.created_at,
            stage=row.stage,
            description=row.description,
            source=row.source or f"jobs:/{row.job_id}",
            run_id=row.run_id or (row.job_id if not row.source else ""),
            job_id=row.job_id,
            tags=tags.get(row.version, {}),
            aliases=sorted(a for a, v in aliases.items() if v == row.version),
            owner_name=owner.name if owner is not None else "",
        )


def files_below(rows: Sequence[Any], folder: str) -> list[dict[str, Any]]:
    """Tracked files below a folder as a version's files: paths from the folder."""
    prefix = folder.strip("/") + "/" if folder.strip("/") else ""
    return [
        {"path": row.path[len(prefix) :], "digest": row.digest, "size": row.size}
        for row in rows
        if row.path.startswith(prefix)
    ]
