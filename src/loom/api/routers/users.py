"""`/v1/users` (admins) and `/v1/me`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from loom.api.auth import AdminDep, PlatformDep, UserDep
from loom.api.schemas import UserChange, UserCreate, iso
from loom.domain.errors import Conflict, NotFound
from loom.store import users as user_rows
from loom.store.tables import User

router = APIRouter(tags=["users"])


@router.post("/v1/users", status_code=201)
def add_user(body: UserCreate, loom: PlatformDep, _admin: AdminDep) -> dict[str, Any]:
    """Create a user; the answer holds its token, shown this once (only a hash is kept)."""
    loom.isolation.check_new_user()
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
    return {"users": [_user_json(u) for u in users]}


@router.patch("/v1/users/{name}")
def change_user(name: str, body: UserChange, loom: PlatformDep, _admin: AdminDep) -> dict[str, Any]:
    """Set a user's quota on their running jobs (CPUs, GPUs, jobs); null is the default."""
    with loom.db.session() as session:
        user = user_rows.user_by_name(session, name)
        if user is None:
            raise NotFound(f"no user {name!r}")
        user.quota_cpus, user.quota_gpus, user.quota_jobs = (
            body.quota.cpus,
            body.quota.gpus,
            body.quota.jobs,
        )
        shown = _user_json(user)
    loom.lifecycle.wake()
    return shown


def _user_json(user: User) -> dict[str, Any]:
    return {
        "id": user.id,
        "name": user.name,
        "admin": user.is_admin,
        "created_at": iso(user.created_at),
        "quota": {"cpus": user.quota_cpus, "gpus": user.quota_gpus, "jobs": user.quota_jobs},
    }


@router.get("/v1/capacity")
def capacity(loom: PlatformDep, _user: UserDep) -> dict[str, Any]:
    """What the platform can run, what is in use, and how many jobs wait."""
    return {**loom.lifecycle.capacity(), "isolation": loom.isolation.as_json()}


@router.get("/v1/me")
def me(user: UserDep) -> dict[str, Any]:
    return {"id": user.id, "name": user.name, "admin": user.is_admin}
