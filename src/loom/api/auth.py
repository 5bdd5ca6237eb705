"""Who is calling: `Authorization: Bearer <token>` resolved to a user, or to a job's learners.

A token is refused (401) when unknown, revoked or expired; a user's token may be used for
everything that user may do, a learner's only for its own job."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from loom.api import ratelimit
from loom.api.platform import Platform
from loom.api.schemas import iso
from loom.domain.errors import Forbidden, NotFound, Unauthorized
from loom.store import audit as audit_rows
from loom.store import jobs as job_rows
from loom.store import users as user_rows
from loom.store.tables import Job, Token, User


def platform(request: Request) -> Platform:
    found: Platform = request.app.state.platform
    return found


PlatformDep = Annotated[Platform, Depends(platform)]


@dataclass(frozen=True)
class Caller:
    user: User
    job_scope: str | None
    token_id: str = ""


SESSION_COOKIE = "loom_session"
# Sent by the web UI with every call: a page of another site cannot add it (it would need a
# CORS preflight, which the platform never grants), so the session cookie alone does nothing.
UI_HEADER = "x-loom-ui"


def _bearer(request: Request) -> str:
    """The caller's token: the Authorization header, else the web UI's session cookie (an
    HttpOnly cookie the page's scripts cannot read), taken only with the UI's own header."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    session = request.cookies.get(SESSION_COOKIE, "")
    if session and request.headers.get(UI_HEADER) == "1" and not header:
        return session
    raise Unauthorized("missing bearer token: send `Authorization: Bearer <token>`")


def forwarded_authorization(request: Request) -> str:
    """The caller's credential as an Authorization header, for a call the platform makes on
    their behalf (to a deployment's endpoint): the web UI's session cookie is the token too."""
    return f"Bearer {_bearer(request)}"


def _usable(row: Token, now: float) -> None:
    if row.revoked_at is not None:
        raise Unauthorized(f"token {row.id} was revoked at {iso(row.revoked_at)}")
    if row.expires_at is not None and row.expires_at <= now:
        raise Unauthorized(
            f"token expired at {iso(row.expires_at)}; make a new one with another token "
            "(`loom tokens create`) or ask an admin"
        )


def caller(request: Request, loom: PlatformDep) -> Caller:
    try:
        token = _bearer(request)
    except Unauthorized as refusal:
        raise ratelimit.refuse_credentials(request, refusal) from None
    return caller_with(request, loom, token)


def caller_with(request: Request, loom: Platform, token: str) -> Caller:
    """Who holds `token` (however the request carried it: a dialect's own auth form), with
    the same refusals, rate limits and last-use bookkeeping as a bearer token."""
    now = time.time()
    try:
        with loom.db.session() as session:
            found = user_rows.resolve_token(session, token)
            if found is None:
                raise Unauthorized("invalid token")
            user, row = found
            _usable(row, now)
            user_rows.touch(row, now)
    except Unauthorized as refusal:
        raise ratelimit.refuse_credentials(request, refusal) from None
    ratelimit.charge(request, user.id, user.name, row.job_id)
    return Caller(user, row.job_id, row.id)


def current_user(who: Annotated[Caller, Depends(caller)]) -> User:
    if who.job_scope is not None:
        raise Forbidden("a learner's token cannot be used for this")
    return who.user


def client_address(request: Request) -> str:
    return request.client.host if request.client else ""


def refuse_non_admin(loom: Platform, request: Request, user: User, what: str = "") -> None:
    """Forbidden unless `user` is an admin; the refusal goes into the audit log."""
    if user.is_admin:
        return
    with loom.db.session() as session:
        audit_rows.add_event(
            session,
            actor=user.name,
            action="admin.denied",
            target=("route", f"{request.method} {request.url.path}"),
            detail={"asked": what} if what else {},
            client=client_address(request),
        )
    raise Forbidden(f"only an admin can {what or 'do this'}")


def admin_user(
    request: Request, loom: PlatformDep, user: Annotated[User, Depends(current_user)]
) -> User:
    refuse_non_admin(loom, request, user)
    return user


UserDep = Annotated[User, Depends(current_user)]
AdminDep = Annotated[User, Depends(admin_user)]
CallerDep = Annotated[Caller, Depends(caller)]


def owned_job(loom: Platform, user: User, job_id: str, *, admins: bool = True) -> Job:
    """The job if the caller owns it, or is an admin (unless `admins` is False); another
    user's job is as absent as a missing one."""
    with loom.db.session() as session:
        job = job_rows.get_job(session, job_id)
    if job is None or (job.owner_id != user.id and not (admins and user.is_admin)):
        raise NotFound(f"no job {job_id!r}")
    return job
