"""Who may call a deployment, the platform's side: per-deployment keys (shown once, only their
SHA-256 kept), and the `access.json` each gateway reads (`loom.serving.access`), rendered from
the database whenever what it holds may have changed."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from loom.domain.accounts import hash_token
from loom.domain.errors import NotFound
from loom.serving.access import ACCESS, render
from loom.serving.spec import read_status
from loom.store.db import Database
from loom.store.private import write_private
from loom.store.tables import Deployment, DeploymentKey, Token
from loom.store.users import new_token

OWNER_TOKEN = "token"  # whose a hash is, for the owner's own API tokens


def accepted_hashes(session: Session, deployment: Deployment) -> dict[str, str]:
    """Every token hash the deployment's endpoint accepts, with whose it is: the owner's API
    tokens (not those scoped to a job's learners) and the deployment's keys (by key id). Only
    this function decides it. A revoked or expired token is left out; an expiry is checked
    again each time the supervisor renders the file (every few seconds)."""
    now = time.time()
    tokens = session.scalars(
        select(Token.token_hash).where(
            Token.user_id == deployment.owner_id,
            Token.job_id.is_(None),
            Token.revoked_at.is_(None),
            or_(Token.expires_at.is_(None), Token.expires_at > now),
        )
    )
    keys = session.execute(
        select(DeploymentKey.key_hash, DeploymentKey.id).where(
            DeploymentKey.deployment_id == deployment.id
        )
    )
    return {**dict.fromkeys(tokens, OWNER_TOKEN), **{h: key_id for h, key_id in keys}}


class DeploymentAccess:
    """Keys of deployments, and their gateways' access files kept in step with the database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._written: dict[str, bytes] = {}  # deployment id → what its file holds
        self._lock = threading.Lock()

    def create(self, deployment: Deployment, name: str) -> dict[str, Any]:
        """A new key for the deployment; the only time its value is shown."""
        key = new_token("lk")
        row = DeploymentKey(
            id=uuid.uuid4().hex[:12],
            deployment_id=deployment.id,
            name=name,
            key_hash=hash_token(key),
            created_at=time.time(),
        )
        with self.db.session() as session:
            session.add(row)
        return {**self.shown(row), "key": key}

    def list(self, deployment: Deployment, folder: Path) -> list[dict[str, Any]]:
        used = _used(folder)
        with self.db.session() as session:
            rows = session.scalars(
                select(DeploymentKey)
                .where(DeploymentKey.deployment_id == deployment.id)
                .order_by(DeploymentKey.created_at)
            )
            return [self.shown(row, used.get(row.id)) for row in rows]

    def revoke(self, deployment: Deployment, key_id: str) -> None:
        with self.db.session() as session:
            row = session.get(DeploymentKey, key_id)
            if row is None or row.deployment_id != deployment.id:
                raise NotFound(f"no key {key_id!r} for deployment {deployment.name!r}")
            session.delete(row)

    def forget(self, deployment: Deployment) -> None:
        """The deployment is deleted: its keys go with it."""
        with self.db.session() as session:
            for row in session.scalars(
                select(DeploymentKey).where(DeploymentKey.deployment_id == deployment.id)
            ):
                session.delete(row)
        self._written.pop(deployment.id, None)

    @staticmethod
    def shown(row: DeploymentKey, used: float | None = None) -> dict[str, Any]:
        last = max((t for t in (row.last_used_at, used) if t is not None), default=None)
        return {"id": row.id, "name": row.name, "created_at": row.created_at, "last_used_at": last}

    # -- the gateway's file ------------------------------------------------------------------
    def sync(self, deployment: Deployment, folder: Path) -> None:
        """Write the deployment's access file if the database says something else than it
        does (a key or a token added or revoked, the deployment made public or private), and
        keep the keys' last use that the gateway reports."""
        # One sync at a time, from reading the rules to writing them: a supervisor's pass that
        # read before a key was revoked must not write its older rules after the revocation's.
        with self._lock, self.db.session() as session:
            content = render(deployment.public, accepted_hashes(session, deployment))
            self._keep_last_use(session, deployment, _used(folder))
            path = folder / ACCESS
            if self._written.get(deployment.id) == content and path.exists():
                return
            if not folder.is_dir():
                return  # deleted meanwhile: nothing to guard
            write_private(path, content)
            self._written[deployment.id] = content

    @staticmethod
    def _keep_last_use(session: Session, deployment: Deployment, used: dict[str, float]) -> None:
        if not used:
            return
        rows = session.scalars(
            select(DeploymentKey).where(
                DeploymentKey.deployment_id == deployment.id, DeploymentKey.id.in_(used)
            )
        )
        for row in rows:
            if row.last_used_at is None or row.last_used_at < used[row.id]:
                row.last_used_at = used[row.id]


def _used(folder: Path) -> dict[str, float]:
    """When each key was last used, as the gateway's status says (coarse, to 10 s)."""
    found = (read_status(folder) or {}).get("keys_used")
    if not isinstance(found, dict):
        return {}
    return {str(k): float(v) for k, v in found.items() if isinstance(v, int | float)}
