"""`/v1/users` (admins) and `/v1/me`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from loom.api.auth import AdminDep, PlatformDep, UserDep
from loom.api.schemas import UserCreate, iso
from loom.domain.errors import Conflict
from loom.store import users as user_rows

router = APIRouter(tags=["users"])


@router.post("/v1/users", status_code=201)
def add_user(body: UserCreate, loom: PlatformDep, _admin: AdminDep) -> dict[str, Any]:
    """Create a user; the answer holds its token, shown this once (only a hash is kept)."""
    token = user_rows.new_token()
    with loom.db.session() as session:
        if user_rows.user_by_name(session, body.name) is not None:
            raise Conflict(f"a user named {body.name!r} exists already")
        user = user_rows.add_user(session, body.name, is_admin=body.admin)
        user_rows.add_token(session, user, token)
    return {"id": user.id, "name": user.name, "admin": user.is_admin, "token": token}


@router.get("/v1/users")
def list_users(loom: PlatformDep, _admin: AdminDep) -> dict[str, Any]:
    with loom.db.session() as session:
        users = user_rows.list_users(session)
    return {
        "users": [
            {"id": u.id, "name": u.name, "admin": u.is_admin, "created_at": iso(u.created_at)}
            for u in users
        ]
    }


@router.get("/v1/me")
def me(user: UserDep) -> dict[str, Any]:
    return {"id": user.id, "name": user.name, "admin": user.is_admin}
