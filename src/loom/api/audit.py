"""Recording what a caller did: the `AuditDep` dependency, bound to the caller and their
address. An action is recorded once it has succeeded; what it records is names, ids and
small settings, never a token or a secret."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from loom.api.auth import PlatformDep, UserDep, client_address
from loom.store import audit as audit_rows
from loom.store.db import Database
from loom.store.tables import Job, User


@dataclass(frozen=True)
class Audit:
    db: Database
    actor: User
    client: str

    def __call__(self, action: str, target_id: str, **detail: Any) -> None:
        """Record `action` (`job.halt`) on a target; its kind is the action's first word."""
        with self.db.session() as session:
            audit_rows.add_event(
                session,
                actor=self.actor.name,
                action=action,
                target=(action.split(".", 1)[0], target_id),
                detail=detail,
                client=self.client,
            )

    def job(self, action: str, job: Job, **detail: Any) -> None:
        """Record an action on a job, naming its owner when that is not the actor."""
        if job.owner_id != self.actor.id:
            with self.db.session() as session:
                owner = session.get(User, job.owner_id)
            detail["owner"] = owner.name if owner else job.owner_id
        self(action, job.id, name=job.name, **detail)


def audit(request: Request, loom: PlatformDep, user: UserDep) -> Audit:
    return Audit(loom.db, user, client_address(request))


AuditDep = Annotated[Audit, Depends(audit)]
