"""Runs' and logged models' artifact folders, as MLflow's artifact proxy addresses them:

    <project>/<run id>/artifacts/<path>             a run's files
    <project>/models/<model id>/artifacts/<path>    a logged model's files
    registry/<model>/<version>/<path>               a registered version's files (read-only)

Each file's content goes to the artifact store by digest (the same content is kept once, on any
fsspec store), its path to the database; who may read or write a folder is who may read or
write its run or logged model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.domain.errors import Forbidden, InvalidInput, NotFound
from loom.domain.runs import Actor, Listed
from loom.storage.artifacts import ArtifactStore
from loom.store import tracked_files
from loom.store.db import Database
from loom.store.tables import LoggedModel, Model, ModelVersion, Run, TrackedFile

ARTIFACTS = "artifacts"
REGISTRY = "registry"


@dataclass(frozen=True)
class Place:
    """Where a path points: a container (a run or a logged model), and a path inside its
    artifact folder ("" for the folder itself)."""

    root: str  # the container's own prefix, `<project>/<run>/artifacts`
    container: str
    path: str
    owner_id: str
    job_id: str | None
    version: tuple[str, int] | None = None  # a registered version's (model, number)


def safe(path: str) -> str:
    """A relative path with no way out of where it is joined (no `..`, no root, no `\\`)."""
    path = path.strip("/")
    if "\\" in path or "\x00" in path:
        raise InvalidInput(f"path: no backslashes or NUL, got {path!r:.80}", field="path")
    parts = path.split("/") if path else []
    if any(part in ("", ".", "..") for part in parts):
        raise InvalidInput(f"path: no empty, `.` or `..` parts, got {path!r:.80}", field="path")
    return path


class RunFiles:
    def __init__(self, db: Database, artifacts: ArtifactStore) -> None:
        self.db = db
        self.artifacts = artifacts

    def place(self, session: Session, actor: Actor, path: str) -> Place:
        parts = safe(path).split("/")
        if len(parts) >= 3 and parts[0] == REGISTRY:
            return self._registered(session, actor, parts)
        if len(parts) >= 4 and parts[1] == "models" and parts[3] == ARTIFACTS:
            model = session.get(LoggedModel, parts[2])
            if model is None or str(model.project_id) != parts[0]:
                raise NotFound(f"no logged model {parts[2]!r}")
            found = Place(
                "/".join(parts[:4]), model.id, "/".join(parts[4:]), model.owner_id, model.job_id
            )
        elif len(parts) >= 3 and parts[2] == ARTIFACTS:
            run = session.get(Run, parts[1])
            if run is None or str(run.project_id) != parts[0]:
                raise NotFound(f"no run {parts[1]!r}")
            found = Place(
                "/".join(parts[:3]), run.id, "/".join(parts[3:]), run.owner_id, run.job_id
            )
        else:
            raise InvalidInput(
                f"path: <experiment>/<run>/artifacts/… or <experiment>/models/<model>/artifacts/…,"
                f" got {path!r:.80}",
                field="path",
            )
        if not actor.may_read(found.owner_id):
            raise NotFound(f"no artifact folder {found.root!r}")
        return found

    def _registered(self, session: Session, actor: Actor, parts: list[str]) -> Place:
        """`registry/<model>/<version>/<path>`: a registered version's files, read-only."""
        model = session.get(Model, parts[1])
        if model is None or not actor.may_read(model.owner_id) or not parts[2].isdigit():
            raise NotFound(f"no registered version {'/'.join(parts[:3])!r}")
        return Place(
            "/".join(parts[:3]),
            REGISTRY,
            "/".join(parts[3:]),
            model.owner_id,
            None,
            version=(model.id, int(parts[2])),
        )

    def _version_files(self, session: Session, place: Place) -> list[TrackedFile]:
        assert place.version is not None
        model_id, number = place.version
        query = select(ModelVersion).where(
            ModelVersion.model_id == model_id, ModelVersion.version == number
        )
        found = session.scalars(query).first()
        if found is None:
            raise NotFound(f"no registered version {place.root!r}")
        return [
            TrackedFile(
                container=REGISTRY,
                path=f["path"],
                digest=f["digest"],
                size=f["size"],
                created_at=found.created_at,
            )
            for f in found.files
        ]

    def where(self, actor: Actor, path: str) -> Place:
        """Where a path points, if the actor may read it."""
        with self.db.session() as session:
            return self.place(session, actor, path)

    def put(self, actor: Actor, path: str, data: BinaryIO) -> None:
        with self.db.session() as session:
            place = self._writable(session, actor, path)
        if not place.path:
            raise InvalidInput("path: a file inside the artifact folder", field="path")
        digest, size = self.artifacts.put_stream(data)
        with self.db.session() as session:
            tracked_files.put(session, place.container, place.path, digest, size)

    def open(self, actor: Actor, path: str) -> Path:
        with self.db.session() as session:
            place = self.place(session, actor, path)
            if place.version is not None:
                files = self._version_files(session, place)
                found = next((f for f in files if f.path == place.path), None)
            else:
                found = tracked_files.get(session, place.container, place.path)
        if found is None:
            raise NotFound(f"no artifact {path!r}")
        return self.artifacts.path(found.digest)

    def listing(self, actor: Actor, path: str) -> tuple[Place, list[Listed]]:
        """What is right inside a folder (nothing for a file or a missing folder)."""
        with self.db.session() as session:
            place = self.place(session, actor, path)
            if place.version is not None:
                files = self._version_files(session, place)
                return place, tracked_files.folder_of(files, place.path)
            return place, tracked_files.listing(session, place.container, place.path)

    def delete(self, actor: Actor, path: str) -> None:
        with self.db.session() as session:
            place = self._writable(session, actor, path)
            tracked_files.remove(session, place.container, place.path)

    def _writable(self, session: Session, actor: Actor, path: str) -> Place:
        place = self.place(session, actor, path)
        if place.version is not None:
            raise Forbidden("a registered version's files do not change; register a new one")
        actor.check_write(place.owner_id, place.job_id, f"the artifacts of {place.container}")
        return place

    def files(self, container: str, folder: str) -> list[TrackedFile]:
        """Every file below a folder of a container (the caller checked who asks)."""
        with self.db.session() as session:
            return tracked_files.under(session, container, safe(folder))
