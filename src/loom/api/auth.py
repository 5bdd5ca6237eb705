"""Who is calling: `Authorization: Bearer <token>` resolved to a user, or to a job's learners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from loom.api import ratelimit
from loom.api.platform import Platform
from loom.domain.errors import Forbidden, NotFound, Unauthorized
from loom.store import jobs as job_rows
from loom.store import users as user_rows
from loom.store.tables import Job, User


def platform(request: Request) -> Platform:
    found: Platform = request.app.state.platform
    return found


PlatformDep = Annotated[Platform, Depends(platform)]


@dataclass(frozen=True)
class Caller:
    user: User
    job_scope: str | None


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token: send `Authorization: Bearer <token>`")
    return token.strip()


def caller(request: Request, loom: PlatformDep) -> Caller:
    token = _bearer(request)
    with loom.db.session() as session:
        found = user_rows.resolve_token(session, token)
    if found is None:
        raise Unauthorized("invalid token")
    who = Caller(*found)
    ratelimit.charge(request, who.user.id, who.user.name, who.job_scope)
    return who


def current_user(who: Annotated[Caller, Depends(caller)]) -> User:
    if who.job_scope is not None:
        raise Forbidden("a learner's token cannot be used for this")
    return who.user


def admin_user(user: Annotated[User, Depends(current_user)]) -> User:
    if not user.is_admin:
        raise Forbidden("only an admin can do this")
    return user


UserDep = Annotated[User, Depends(current_user)]
AdminDep = Annotated[User, Depends(admin_user)]
CallerDep = Annotated[Caller, Depends(caller)]


def owned_job(loom: Platform, user: User, job_id: str) -> Job:
    """The job if the caller owns it; another user's job is as absent as a missing one."""
    with loom.db.session() as session:
        job = job_rows.get_job(session, job_id)
    if job is None or job.owner_id != user.id:
        raise NotFound(f"no job {job_id!r}")
    return job
