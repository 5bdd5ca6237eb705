"""`/v1/me/tokens`: a user's own tokens, listed, made, revoked and rotated; and
`/v1/users/{name}/tokens` for admins. A token is shown once, when made; afterwards only its
public id, name and times are."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Response
from sqlalchemy.orm import Session

from loom.api.audit import AuditDep
from loom.api.auth import AdminDep, CallerDep, PlatformDep, UserDep
from loom.api.platform import Platform
from loom.api.schemas import TokenCreate, iso
from loom.domain.accounts import DAY_S, token_expiry
from loom.domain.errors import NotFound
from loom.store import users as user_rows
from loom.store.tables import Token, User

router = APIRouter(tags=["tokens"])


def token_json(row: Token, now: float, current: str = "") -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "created_at": iso(row.created_at),
        "expires_at": iso(row.expires_at),
        "last_used_at": iso(row.last_used_at),
        "expired": row.expires_at is not None and row.expires_at <= now,
        "current": row.id == current,
    }


def _issue(loom: Platform, user: User, name: str, expires: float | None) -> dict[str, Any]:
    token = user_rows.new_token()
    with loom.db.session() as session:
        row = user_rows.add_token(session, user, token, name=name, expires_at=expires)
    return {**token_json(row, time.time()), "token": token}


def _listed(loom: Platform, user: User, current: str = "") -> dict[str, Any]:
    now = time.time()
    with loom.db.session() as session:
        rows = user_rows.user_tokens(session, user.id)
    return {"tokens": [token_json(row, now, current) for row in rows]}


def _own(session: Session, user: User, token_id: str) -> Token:
    row = user_rows.user_token(session, user.id, token_id)
    if row is None:
        raise NotFound(f"{user.name!r} has no token {token_id!r} (or it is revoked already)")
    return row


def _revoke(loom: Platform, user: User, token_id: str) -> None:
    with loom.db.session() as session:
        user_rows.revoke(_own(session, user, token_id), time.time())


def _rotate(loom: Platform, user: User, token_id: str) -> dict[str, Any]:
    """Revoke a token and make its successor, in one transaction: both or neither."""
    now, token = time.time(), user_rows.new_token()
    with loom.db.session() as session:
        old = _own(session, user, token_id)
        user_rows.revoke(old, now)
        expires = _rotated_expiry(old, now, loom.settings.token_ttl_days)
        row = user_rows.add_token(session, user, token, name=old.name, expires_at=expires)
        shown = token_json(row, now)
    return {**shown, "token": token}


def _rotated_expiry(old: Token, now: float, default_days: float | None) -> float | None:
    """The new token lives as long as the old one was made to, within today's limit."""
    if old.expires_at is None:
        return token_expiry(now, default_days, None)
    days = (old.expires_at - old.created_at) / DAY_S
    return token_expiry(now, default_days, min(days, default_days or days))


@router.get("/v1/me/tokens")
def my_tokens(loom: PlatformDep, user: UserDep, who: CallerDep) -> dict[str, Any]:
    """Your tokens that are not revoked (expired ones included); learners' are not listed."""
    return _listed(loom, user, who.token_id)


@router.post("/v1/me/tokens", status_code=201)
def make_token(
    body: TokenCreate, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    """A new token, shown this once; `ttl_days` may shorten the platform's lifetime."""
    expires = token_expiry(time.time(), loom.settings.token_ttl_days, body.ttl_days)
    made = _issue(loom, user, body.name, expires)
    audit("token.create", made["id"], user=user.name, name=body.name)
    return made


@router.delete("/v1/me/tokens/{token_id}", status_code=204)
def revoke_token(token_id: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> Response:
    _revoke(loom, user, token_id)
    audit("token.revoke", token_id, user=user.name)
    return Response(status_code=204)


@router.post("/v1/me/tokens/{token_id}/rotate", status_code=201)
def rotate_token(
    token_id: str, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    """A new token in place of this one, with its name; the old one stops working now."""
    made = _rotate(loom, user, token_id)
    audit("token.rotate", token_id, user=user.name, new=made["id"])
    return made


def _user(loom: Platform, name: str) -> User:
    with loom.db.session() as session:
        found = user_rows.user_by_name(session, name)
    if found is None:
        raise NotFound(f"no user {name!r}")
    return found


@router.get("/v1/users/{name}/tokens")
def user_tokens(name: str, loom: PlatformDep, _admin: AdminDep) -> dict[str, Any]:
    return _listed(loom, _user(loom, name))


@router.delete("/v1/users/{name}/tokens/{token_id}", status_code=204)
def revoke_user_token(
    name: str, token_id: str, loom: PlatformDep, _admin: AdminDep, audit: AuditDep
) -> Response:
    _revoke(loom, _user(loom, name), token_id)
    audit("token.revoke", token_id, user=name)
    return Response(status_code=204)
