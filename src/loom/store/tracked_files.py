"""The files of runs' and logged models' artifact folders: a path per file, the content in the
artifact store by digest."""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.domain.runs import Listed
from loom.store.tables import TrackedFile


def put(session: Session, container: str, path: str, digest: str, size: int) -> None:
    session.merge(
        TrackedFile(
            container=container, path=path, digest=digest, size=size, created_at=time.time()
        )
    )


def get(session: Session, container: str, path: str) -> TrackedFile | None:
    return session.get(TrackedFile, (container, path))


def under(session: Session, container: str, folder: str) -> list[TrackedFile]:
    """Every file below `folder` ("" for all), by path."""
    query = select(TrackedFile).where(TrackedFile.container == container)
    if folder:
        prefix = folder.rstrip("/") + "/"
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(TrackedFile.path.like(escaped + "%", escape="\\"))
    return list(session.scalars(query.order_by(TrackedFile.path)))


def listing(session: Session, container: str, folder: str) -> list[Listed]:
    """The files and folders right inside `folder`, by name; paths relative to the container."""
    return folder_of(under(session, container, folder), folder)


def folder_of(rows: Sequence[TrackedFile], folder: str) -> list[Listed]:
    """What of these files is right inside `folder` (files, and folders holding others)."""
    prefix = folder.rstrip("/") + "/" if folder else ""
    found: dict[str, Listed] = {}
    for row in rows:
        if not row.path.startswith(prefix):
            continue
        rest = row.path[len(prefix) :]
        head, slash, _ = rest.partition("/")
        if slash:
            found.setdefault(head, Listed(prefix + head, True))
        else:
            found[head] = Listed(row.path, False, row.size)
    return [found[name] for name in sorted(found)]


def remove(session: Session, container: str, path: str) -> int:
    """Delete a file, or a folder with everything below it; how many files went."""
    rows = under(session, container, path)
    single = get(session, container, path)
    for row in [*rows, *([single] if single is not None else [])]:
        session.delete(row)
    return len(rows) + (single is not None)
