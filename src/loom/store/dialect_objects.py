"""Objects kept for foreign APIs (KFP's pipelines, versions and experiments; Argo's
WorkflowTemplates), as rows."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.store.tables import DialectObject


def named(
    session: Session, owner_id: str, dialect: str, kind: str, name: str
) -> DialectObject | None:
    """The owner's object of that kind with that name (the newest, if several)."""
    query = select(DialectObject).where(
        DialectObject.owner_id == owner_id,
        DialectObject.dialect == dialect,
        DialectObject.kind == kind,
        DialectObject.name == name,
    )
    return session.scalars(query.order_by(DialectObject.created_at.desc()).limit(1)).first()


def of_kind(
    session: Session, owner_id: str, dialect: str, kind: str, parent_id: str | None = None
) -> list[DialectObject]:
    """The owner's objects of a kind (under one parent, if given), oldest first."""
    query = select(DialectObject).where(
        DialectObject.owner_id == owner_id,
        DialectObject.dialect == dialect,
        DialectObject.kind == kind,
    )
    if parent_id is not None:
        query = query.where(DialectObject.parent_id == parent_id)
    return list(session.scalars(query.order_by(DialectObject.created_at, DialectObject.id)))


def get(session: Session, object_id: str) -> DialectObject | None:
    return session.get(DialectObject, object_id)
