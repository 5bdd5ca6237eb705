"""Account work that spans services: whose jobs a listing shows, and removing a user with
everything they own (deployments, jobs, models), which no single service can do alone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fastapi import Request
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from loom.api.auth import refuse_non_admin
from loom.api.platform import Platform
from loom.domain.errors import Conflict, NotFound
from loom.domain.states import UNFINISHED_STATES
from loom.store import jobs as job_rows
from loom.store import users as user_rows
from loom.store.tables import Experiment, Job, PipelineRun, PipelineSchedule, User

ALL = 10**9


def listing_owner(
    loom: Platform, request: Request, user: User, owner: str | None, everyone: bool
) -> str | None:
    """The owner id a job listing is limited to (None: everyone's); only admins may ask for
    someone else's jobs or everyone's."""
    if not everyone and owner in (None, user.name):
        return user.id
    refuse_non_admin(loom, request, user, "list other users' jobs")
    if owner is None:
        return None
    with loom.db.session() as session:
        found = user_rows.user_by_name(session, owner)
    if found is None:
        raise NotFound(f"owner: no user {owner!r}")
    return found.id


def owner_names(
    session: Session, owned: Iterable[Job | Experiment | PipelineRun | PipelineSchedule]
) -> dict[str, str]:
    ids = {item.owner_id for item in owned}
    return {i: user.name for i in ids if (user := session.get(User, i)) is not None}


@dataclass(frozen=True)
class Removed:
    name: str
    jobs: int
    deployments: int
    models: int


def _busy(loom: Platform, user: User) -> list[str]:
    """What the user still has running: unfinished jobs and deployments."""
    with loom.db.session() as session:
        unfinished = [s.value for s in UNFINISHED_STATES]
        jobs = job_rows.list_jobs(session, owner_id=user.id, states=unfinished, limit=ALL).jobs
    served = [d["name"] for d in loom.deployments.all(user.id)]
    found = []
    if jobs:
        found.append("queued or running jobs " + ", ".join(sorted(j.id for j in jobs)))
    if served:
        found.append("deployments " + ", ".join(served))
    return found


def _check_removable(loom: Platform, actor: User, name: str) -> User:
    with loom.db.session() as session:
        user = user_rows.user_by_name(session, name)
        if user is None:
            raise NotFound(f"no user {name!r}")
        if user.id == actor.id:
            raise Conflict(f"you cannot delete yourself ({name!r}); ask another admin")
        if user.is_admin and user_rows.admin_count(session) <= 1:
            raise Conflict(f"{name!r} is the last admin; make another admin first")
    return user


def remove_user(loom: Platform, actor: User, name: str, *, force: bool) -> Removed:
    """Delete a user: refused while they have something running, unless `force`, which stops
    it. Their tokens die first, so nothing of theirs can start while the rest goes."""
    user = _check_removable(loom, actor, name)
    busy = _busy(loom, user)
    if busy and not force:
        raise Conflict(
            f"user {name!r} still has {' and '.join(busy)}; "
            "halt or delete them, or delete the user with ?force=true to stop them"
        )
    with loom.db.session() as session:
        user_rows.delete_tokens_of(session, user.id)
    served = [d["name"] for d in loom.deployments.all(user.id)]
    for deployment in served:
        loom.deployments.delete(user.id, deployment)
    with loom.db.session() as session:
        jobs = job_rows.list_jobs(session, owner_id=user.id, limit=ALL).jobs
    for job in jobs:
        loom.lifecycle.delete(job.id)
    models = [m.model.name for m in loom.registry.models(user.id)]
    for model in models:
        loom.registry.delete(user.id, model)
    _delete_row(loom, user)
    return Removed(name, len(jobs), len(served), len(models))


def _delete_row(loom: Platform, user: User) -> None:
    try:
        with loom.db.session() as session:
            found = session.get(User, user.id)
            if found is not None:
                user_rows.delete_user(session, found)
    except IntegrityError as exc:
        raise Conflict(
            f"user {user.name!r} got something new while being deleted; delete them again"
        ) from exc
