"""`/v1/audit` (admins): the audit log, newest first, a page at a time. The next page is asked
for with `before_id` set to the answer's `next_before_id` (a keyset: no page is skipped or
repeated while new events arrive)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from loom.api.auth import AdminDep, PlatformDep
from loom.api.routers.logs import parse_since
from loom.api.schemas import WHOLE, iso
from loom.store import audit as audit_rows
from loom.store.tables import AuditEvent

router = APIRouter(tags=["audit"])


def event_json(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "at": iso(event.at),
        "actor": event.actor,
        "action": event.action,
        "target": {"kind": event.target_kind, "id": event.target_id},
        "detail": event.detail,
        "client": event.client,
    }


@router.get("/v1/audit")
def audit_log(
    loom: PlatformDep,
    _admin: AdminDep,
    actor: Annotated[str | None, Query(max_length=100)] = None,
    action: Annotated[str | None, Query(max_length=50, description="`token.*`: a prefix")] = None,
    since: Annotated[str | None, Query(description="epoch ms or ISO-8601")] = None,
    before_id: Annotated[int | None, WHOLE, Query(ge=1, le=2**62)] = None,
    limit: Annotated[int, WHOLE, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """Events matching every filter given, newest first."""
    query = audit_rows.AuditQuery(actor, action, parse_since(since), before_id, limit)
    with loom.db.session() as session:
        events = audit_rows.events(session, query)
    more = len(events) == limit
    return {
        "events": [event_json(e) for e in events],
        "next_before_id": events[-1].id if events and more else None,
    }
