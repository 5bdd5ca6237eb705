"""Models and their versions: registered from completed jobs, found by number or alias, and
compared by their final metrics."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from loom.domain.errors import InvalidInput, NotFound, PayloadTooLarge
from loom.domain.manifest import manifest_from_dict
from loom.sandbox.files import UnsafePath, open_regular, regular_file_stats
from loom.storage.artifacts import ArtifactStore
from loom.store import run_info
from loom.store.db import Database
from loom.store.tables import Job, Model, ModelAlias, ModelTag, ModelVersion

PREFERRED_GROUPS = ("test", "eval", "validation", "val", "valid")


@dataclass(frozen=True)
class ModelSummary:
    model: Model
    versions: int
    latest: int | None
    aliases: dict[str, int]


class ModelRegistry:
    def __init__(self, db: Database, artifacts: ArtifactStore) -> None:
        self.db = db
        self.artifacts = artifacts

    # -- registration ------------------------------------------------------------------------
    def register(
        self,
        job: Job,
        original: dict[str, Any],
        results: Path,
        metrics: dict[str, float],
        max_bytes: int | None = None,
    ) -> ModelVersion | None:
        """A new version from a completed job's `RESULT_DIR/model/`; None if it wrote none.
        Refused (`PayloadTooLarge`) past `max_bytes`, its files counted by their apparent
        size: a sparse file takes its whole size once copied into the artifact store."""
        folder = results / "model"
        files = []
        found = regular_file_stats(folder)  # written by untrusted code: no link is followed
        size = sum(info.st_size for info in found.values())
        if max_bytes is not None and size > max_bytes:
            raise PayloadTooLarge(
                f"its model's files take {size / 2**20:,.0f} MiB (sparse files counted at their "
                f"full size), more than the {max_bytes / 2**20:,.0f} MiB a model may take "
                "(the manifest's `storage`, or LOOM_MAX_MODEL_MB)"
            )
        for relative in sorted(found):
            try:
                with open_regular(folder, relative) as data:
                    digest, size = self.artifacts.put_stream(data)
            except UnsafePath:
                continue
            files.append({"path": relative, "digest": digest, "size": size})
        if not files:
            return None
        manifest = manifest_from_dict(original)
        name = manifest.model_name or manifest.name
        with self.db.session() as session:
            model = self._model(session, job.owner_id, name, create=True)
            query = select(ModelVersion).where(ModelVersion.model_id == model.id)
            done = session.scalars(query.where(ModelVersion.job_id == job.id)).first()
            if done is not None:  # registered before a crash: once per job
                return done
            latest = session.scalar(
                select(func.max(ModelVersion.version)).where(ModelVersion.model_id == model.id)
            )
            version = ModelVersion(
                model_id=model.id,
                version=(latest or 0) + 1,
                job_id=job.id,
                code_digest=job.code_digest,
                framework=manifest.framework.name,
                manifest=manifest.redacted(original),
                data_stores=[store.id for store in manifest.data_stores],
                metrics=metrics,
                files=files,
                created_at=time.time(),
                run_info=run_info.read(session, job.id),  # kept though the job be deleted
                lineage=job.lineage,
            )
            session.add(version)
            session.flush()
            return version

    # -- queries -----------------------------------------------------------------------------
    def _model(self, session: Session, owner: str, name: str, create: bool = False) -> Model:
        query = select(Model).where(Model.owner_id == owner, Model.name == name)
        model = session.scalars(query).first()
        if model is None and create:
            model = Model(id=uuid.uuid4().hex, owner_id=owner, name=name, created_at=time.time())
            session.add(model)
            session.flush()
        if model is None:
            raise NotFound(f"no model {name!r}")
        return model

    def models(self, owner: str) -> list[ModelSummary]:
        with self.db.session() as session:
            found = session.scalars(
                select(Model).where(Model.owner_id == owner).order_by(Model.name)
            )
            return [self._summary(session, model) for model in found]

    def summary(self, owner: str, name: str) -> ModelSummary:
        with self.db.session() as session:
            return self._summary(session, self._model(session, owner, name))

    def _summary(self, session: Session, model: Model) -> ModelSummary:
        numbers = list(
            session.scalars(select(ModelVersion.version).where(ModelVersion.model_id == model.id))
        )
        aliases = session.scalars(select(ModelAlias).where(ModelAlias.model_id == model.id))
        return ModelSummary(
            model, len(numbers), max(numbers, default=None), {a.alias: a.version for a in aliases}
        )

    def versions(self, owner: str, name: str) -> list[ModelVersion]:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            query = select(ModelVersion).where(ModelVersion.model_id == model.id)
            return list(session.scalars(query.order_by(ModelVersion.version)))

    def version(self, owner: str, name: str, ref: str) -> ModelVersion:
        """A version by number, by alias (`production`), or `latest`."""
        with self.db.session() as session:
            model = self._model(session, owner, name)
            return self._version(session, model, ref)

    def _version(self, session: Session, model: Model, ref: str) -> ModelVersion:
        query = select(ModelVersion).where(ModelVersion.model_id == model.id)
        if ref == "latest":
            found = session.scalars(query.order_by(ModelVersion.version.desc())).first()
        elif ref.isdecimal() and len(ref) < 10:
            found = session.scalars(query.where(ModelVersion.version == int(ref))).first()
        else:
            alias = session.get(ModelAlias, (model.id, ref))
            found = (
                session.scalars(query.where(ModelVersion.version == alias.version)).first()
                if alias
                else None
            )
        if found is None:
            raise NotFound(f"model {model.name!r} has no version {ref!r}")
        return found

    def of_job(self, job_id: str) -> tuple[str, ModelVersion] | None:
        """The model name and version a job registered, if it did."""
        with self.db.session() as session:
            query = select(Model.name, ModelVersion).join(Model, Model.id == ModelVersion.model_id)
            row = session.execute(query.where(ModelVersion.job_id == job_id)).first()
            return (row[0], row[1]) if row else None

    def best(self, owner: str, name: str, metric: str, mode: str) -> ModelVersion:
        """The version with the best final value of `metric` (`max` or `min`)."""
        if mode not in ("max", "min"):
            raise InvalidInput(f"mode: use max or min, got {mode!r}")
        scored = []
        for version in self.versions(owner, name):
            value = metric_value(version.metrics, metric)
            if value is not None:
                scored.append((value, version.version, version))
        if not scored:
            raise NotFound(f"no version of model {name!r} has a final {metric!r} metric")
        pick = max if mode == "max" else min
        return pick(scored, key=lambda s: (s[0], s[1] if mode == "max" else -s[1]))[2]

    # -- changes -----------------------------------------------------------------------------
    def set_alias(self, owner: str, name: str, alias: str, ref: str) -> ModelVersion:
        if alias.isdecimal() or alias == "latest" or not alias.replace("-", "").isalnum():
            raise InvalidInput(f"alias: letters, digits and dashes, not a number, got {alias!r}")
        with self.db.session() as session:
            model = self._model(session, owner, name)
            version = self._version(session, model, ref)
            session.merge(ModelAlias(model_id=model.id, alias=alias, version=version.version))
            return version

    def delete_alias(self, owner: str, name: str, alias: str) -> None:
        with self.db.session() as session:
            model = self._model(session, owner, name)
            if session.get(ModelAlias, (model.id, alias)) is None:
                raise NotFound(f"model {name!r} has no alias {alias!r}")
            session.execute(
                delete(ModelAlias).where(ModelAlias.model_id == model.id, ModelAlias.alias == alias)
            )

    def delete(self, owner: str, name: str, ref: str | None = None) -> None:
        """Delete one version (and the aliases pointing at it), or the whole model."""
        with self.db.session() as session:
            model = self._model(session, owner, name)
            if ref is None:
                for table in (ModelAlias, ModelTag, ModelVersion):
                    session.execute(delete(table).where(table.model_id == model.id))
                session.delete(model)
                return
            version = self._version(session, model, ref)
            for table in (ModelAlias, ModelTag):
                session.execute(
                    delete(table).where(
                        table.model_id == model.id, table.version == version.version
                    )
                )
            session.delete(version)

    def file(self, version: ModelVersion, path: str) -> Path:
        for entry in version.files:
            if entry["path"] == path:
                return self.artifacts.path(entry["digest"])
        raise NotFound(f"version {version.version} has no file {path!r}")


def metric_value(metrics: dict[str, float], metric: str) -> float | None:
    """A final metric by `group/name`, or by name alone: a test-like group first."""
    if metric in metrics:
        return metrics[metric]
    named = {key.split("/", 1)[0]: v for key, v in metrics.items() if key.endswith("/" + metric)}
    for group in PREFERRED_GROUPS:
        if group in named:
            return named[group]
    return next(iter(named.values()), None)
