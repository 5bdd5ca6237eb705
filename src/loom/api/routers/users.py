"""`/v1/users` (admins) and `/v1/me`."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query

from loom.api.accounts import remove_user
from loom.api.audit import AuditDep
from loom.api.auth import AdminDep, PlatformDep, UserDep
from loom.api.schemas import UserChange, UserCreate, iso
from loom.domain.accounts import token_expiry
from loom.domain.errors import Conflict, NotFound
from loom.lifecycle.admission import max_priority
from loom.store import users as user_rows
from loom.store.tables import User

router = APIRouter(tags=["users"])


@router.post("/v1/users", status_code=201)
def add_user(
    body: UserCreate, loom: PlatformDep, _admin: AdminDep, audit: AuditDep
) -> dict[str, Any]:
    """Create a user; the answer holds its token, shown this once (only a hash is kept)."""
    loom.isolation.check_new_user()
    token = user_rows.new_token()
    expires = token_expiry(time.time(), loom.settings.token_ttl_days, None)
    with loom.db.session() as session:
        if user_rows.user_by_name(session, body.name) is not None:
            raise Conflict(f"a user named {body.name!r} exists already")
        user = user_rows.add_user(session, body.name, is_admin=body.admin)
        row = user_rows.add_token(session, user, token, name="first", expires_at=expires)
    audit("user.add", user.name, admin=user.is_admin)
    audit("token.create", row.id, user=user.name, name=row.name)
    return {
        "id": user.id,
        "name": user.name,
        "admin": user.is_admin,
        "token": token,
        "token_id": row.id,
        "expires_at": iso(expires),
    }


@router.get("/v1/users")
def list_users(loom: PlatformDep, _admin: AdminDep) -> dict[str, Any]:
    with loom.db.session() as session:
        users = user_rows.list_users(session)
    return {"users": [_user_json(u) for u in users]}


@router.patch("/v1/users/{name}")
def change_user(
    name: str, body: UserChange, loom: PlatformDep, _admin: AdminDep, audit: AuditDep
) -> dict[str, Any]:
    """Set a user's quota on their running jobs (CPUs, GPUs, jobs) and the highest priority
    their jobs may ask for; null is the platform's default."""
    quota = body.quota
    with loom.db.session() as session:
        user = user_rows.user_by_name(session, name)
        if user is None:
            raise NotFound(f"no user {name!r}")
        user.quota_cpus, user.quota_gpus, user.quota_jobs = quota.cpus, quota.gpus, quota.jobs
        user.max_priority = quota.max_priority
        shown = _user_json(user)
    audit("user.change", name, quota=shown["quota"])
    loom.lifecycle.wake()
    return shown


@router.delete("/v1/users/{name}")
def delete_user(
    name: str,
    loom: PlatformDep,
    admin: AdminDep,
    audit: AuditDep,
    force: Annotated[bool, Query(description="stop their jobs and deployments first")] = False,
) -> dict[str, Any]:
    """Delete a user with their jobs, models and deployments; their tokens stop working at
    once. Refused (409) while they have jobs or deployments running, unless `force`."""
    removed = remove_user(loom, admin, name, force=force)
    counts = {"jobs": removed.jobs, "deployments": removed.deployments, "models": removed.models}
    audit("user.delete", name, force=force, **counts)
    return {"deleted": name, **counts}


def _user_json(user: User) -> dict[str, Any]:
    return {
        "id": user.id,
        "name": user.name,
        "admin": user.is_admin,
        "created_at": iso(user.created_at),
        "quota": {
            "cpus": user.quota_cpus,
            "gpus": user.quota_gpus,
            "jobs": user.quota_jobs,
            "max_priority": user.max_priority,
        },
    }


@router.get("/v1/capacity")
def capacity(loom: PlatformDep, _user: UserDep) -> dict[str, Any]:
    """What the platform can run, what is in use, and how many jobs wait."""
    return {**loom.lifecycle.capacity(), "isolation": loom.isolation.as_json()}


@router.get("/v1/me")
def me(user: UserDep, loom: PlatformDep) -> dict[str, Any]:
    limit = max_priority(user, loom.settings)
    return {"id": user.id, "name": user.name, "admin": user.is_admin, "max_priority": limit}
