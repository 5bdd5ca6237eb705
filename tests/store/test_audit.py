"""The audit log's store: filters, and keyset pages that neither skip nor repeat."""

from __future__ import annotations

from loom.store import audit as audit_rows
from loom.store.db import Database


def _add(db: Database, actor: str, action: str, n: int) -> None:
    with db.session() as session:
        for i in range(n):
            audit_rows.add_event(
                session, actor=actor, action=action, target=("job", f"j{i}"), detail={"i": i}
            )


def test_pages_walk_newest_first_without_gaps(db: Database) -> None:
    """Following `before_id` visits every event once, newest first, even as new ones land."""
    _add(db, "ada", "job.submit", 7)
    seen: list[int] = []
    before = None
    while True:
        with db.session() as session:
            page = audit_rows.events(session, audit_rows.AuditQuery(before_id=before, limit=3))
        if not page:
            break
        seen += [e.id for e in page]
        before = page[-1].id
        _add(db, "bo", "job.halt", 1)  # newer events do not shift the pages
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 7


def test_filters_by_actor_action_and_prefix(db: Database) -> None:
    """`actor` and `action` filter exactly; an action ending in `*` is a prefix."""
    _add(db, "ada", "token.create", 2)
    _add(db, "bo", "token.revoke", 1)
    _add(db, "bo", "job.halt", 1)
    with db.session() as session:
        by_bo = audit_rows.events(session, audit_rows.AuditQuery(actor="bo"))
        tokens = audit_rows.events(session, audit_rows.AuditQuery(action="token.*"))
        halts = audit_rows.events(session, audit_rows.AuditQuery(action="job.halt"))
    assert {e.action for e in by_bo} == {"token.revoke", "job.halt"}
    assert len(tokens) == 3 and len(halts) == 1
