"""What KFP's API keeps beside Loom's runs: pipelines and their versions (each holding its
compiled IR), experiments, recurring runs (each on a Loom schedule), and a run's KFP fields
(display name, experiment, storage state). Rows of `dialect_objects`, owned by a user."""

from __future__ import annotations

import time
import uuid
from typing import Any

from loom.domain.errors import NotFound
from loom.store import dialect_objects as rows
from loom.store.db import Database
from loom.store.tables import DialectObject

DIALECT = "kfp"
WHAT = {
    "pipeline": "pipeline",
    "pipeline_version": "pipeline version",
    "experiment": "experiment",
    "run": "run",
    "recurring_run": "recurring run",
}


class KfpObjects:
    def __init__(self, db: Database, owner_id: str) -> None:
        self.db = db
        self.owner_id = owner_id

    def add(
        self,
        kind: str,
        name: str,
        body: dict[str, Any],
        parent_id: str | None = None,
        object_id: str | None = None,
    ) -> DialectObject:
        row = DialectObject(
            id=object_id or str(uuid.uuid4()),
            owner_id=self.owner_id,
            dialect=DIALECT,
            kind=kind,
            name=name[:255],
            parent_id=parent_id,
            body=body,
            created_at=time.time(),
        )
        with self.db.session() as session:
            session.add(row)
        return row

    def get(self, kind: str, object_id: str) -> DialectObject:
        """The owner's object, or NotFound (another user's is not found either)."""
        found = self.find(kind, object_id)
        if found is None:
            raise NotFound(f"no {WHAT[kind]} {object_id!r}")
        return found

    def find(self, kind: str, object_id: str) -> DialectObject | None:
        with self.db.session() as session:
            found = rows.get(session, object_id)
        if found is None or found.owner_id != self.owner_id or found.kind != kind:
            return None
        return found

    def named(self, kind: str, name: str) -> DialectObject | None:
        with self.db.session() as session:
            return rows.named(session, self.owner_id, DIALECT, kind, name)

    def all(self, kind: str, parent_id: str | None = None) -> list[DialectObject]:
        with self.db.session() as session:
            return rows.of_kind(session, self.owner_id, DIALECT, kind, parent_id)

    def change(self, row: DialectObject, **body: Any) -> DialectObject:
        """The object with `body`'s keys set (the JSON column given a new mapping)."""
        with self.db.session() as session:
            stored = session.get_one(DialectObject, row.id)
            stored.body = {**stored.body, **body}
            row.body = stored.body
        return row

    def remove(self, row: DialectObject) -> None:
        with self.db.session() as session:
            stored = session.get(DialectObject, row.id)
            if stored is not None:
                session.delete(stored)
