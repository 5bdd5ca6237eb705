"""Applied Kubernetes-style objects (`loom apply`), as rows."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.store.tables import KubeObject


def new_object_id() -> str:
    return uuid.uuid4().hex


def find(session: Session, owner_id: str, group: str, kind: str, name: str) -> KubeObject | None:
    query = select(KubeObject).where(
        KubeObject.owner_id == owner_id,
        KubeObject.api_group == group,
        KubeObject.kind == kind,
        KubeObject.name == name,
    )
    return session.scalars(query).first()


def of_kind(session: Session, owner_id: str, group: str, kind: str) -> list[KubeObject]:
    """The owner's objects of one kind, by name."""
    query = select(KubeObject).where(
        KubeObject.owner_id == owner_id, KubeObject.api_group == group, KubeObject.kind == kind
    )
    return list(session.scalars(query.order_by(KubeObject.name)))


def remove(session: Session, object_id: str) -> None:
    found = session.get(KubeObject, object_id)
    if found is not None:
        session.delete(found)
