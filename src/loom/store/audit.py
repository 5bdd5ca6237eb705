"""The audit log: events are appended, never changed, and read newest first by keyset."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.store.tables import AuditEvent


@dataclass(frozen=True)
class AuditQuery:
    actor: str | None = None
    action: str | None = None
    since: float | None = None
    before_id: int | None = None
    limit: int = 100


def add_event(
    session: Session,
    *,
    actor: str,
    action: str,
    target: tuple[str, str],
    detail: dict[str, Any],
    client: str = "",
) -> AuditEvent:
    kind, target_id = target
    event = AuditEvent(
        at=time.time(),
        actor=actor[:100],
        action=action,
        target_kind=kind,
        target_id=target_id[:200],
        detail=detail,
        client=client[:100],
    )
    session.add(event)
    return event


def events(session: Session, query: AuditQuery) -> list[AuditEvent]:
    """A page of events, newest first; the next page starts before the last one's id."""
    found = select(AuditEvent)
    if query.actor is not None:
        found = found.where(AuditEvent.actor == query.actor)
    if query.action is not None and query.action.endswith("*"):
        found = found.where(AuditEvent.action.startswith(query.action[:-1], autoescape=True))
    elif query.action is not None:
        found = found.where(AuditEvent.action == query.action)
    if query.since is not None:
        found = found.where(AuditEvent.at >= query.since)
    if query.before_id is not None:
        found = found.where(AuditEvent.id < query.before_id)
    return list(session.scalars(found.order_by(AuditEvent.id.desc()).limit(query.limit)))
