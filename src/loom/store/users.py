"""Users and their tokens. Tokens are shown once; only their SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from loom.store.tables import Token, User


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(prefix: str = "loom") -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def add_user(session: Session, name: str, *, is_admin: bool = False) -> User:
    user = User(id=uuid.uuid4().hex, name=name, is_admin=is_admin, created_at=time.time())
    session.add(user)
    session.flush()
    return user


def add_token(session: Session, user: User, token: str, *, job_id: str | None = None) -> None:
    digest = hash_token(token)
    if session.get(Token, digest) is None:
        session.add(
            Token(token_hash=digest, user_id=user.id, job_id=job_id, created_at=time.time())
        )


def user_by_name(session: Session, name: str) -> User | None:
    return session.scalars(select(User).where(User.name == name)).first()


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.created_at)))


def resolve_token(session: Session, token: str) -> tuple[User, str | None] | None:
    """The user a token belongs to and the job it is scoped to (None for a user token)."""
    row = session.get(Token, hash_token(token))
    if row is None:
        return None
    user = session.get(User, row.user_id)
    return (user, row.job_id) if user is not None else None


def revoke_job_tokens(session: Session, job_id: str) -> None:
    session.execute(delete(Token).where(Token.job_id == job_id))
