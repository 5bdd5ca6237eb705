"""Users and their tokens. Tokens are shown once; only their SHA-256 is stored, with a short
public id to list and revoke them by. A revoked token's row stays, so that its use is refused
with a reason rather than as an unknown token."""

from __future__ import annotations

import secrets
import time
import uuid

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from loom.domain.accounts import hash_token
from loom.store.tables import Token, User

TOUCH_EVERY_S = 60.0  # `last_used_at` is written at most this often: reads stay reads


def new_token(prefix: str = "loom") -> str:
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def new_token_id() -> str:
    return secrets.token_hex(6)


def add_user(session: Session, name: str, *, is_admin: bool = False) -> User:
    user = User(id=uuid.uuid4().hex, name=name, is_admin=is_admin, created_at=time.time())
    session.add(user)
    session.flush()
    return user


def add_token(
    session: Session,
    user: User,
    token: str,
    *,
    job_id: str | None = None,
    name: str = "",
    expires_at: float | None = None,
) -> Token:
    """Keep a token's hash for `user`; adding a token that is already kept changes nothing."""
    digest = hash_token(token)
    found = session.get(Token, digest)
    if found is None:
        found = Token(
            token_hash=digest,
            id=new_token_id(),
            user_id=user.id,
            job_id=job_id,
            name=name,
            created_at=time.time(),
            expires_at=expires_at,
        )
        session.add(found)
        session.flush()
    return found


def user_by_name(session: Session, name: str) -> User | None:
    return session.scalars(select(User).where(User.name == name)).first()


def list_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.created_at)))


def admin_count(session: Session) -> int:
    return session.scalar(select(func.count()).where(User.is_admin.is_(True))) or 0


def resolve_token(session: Session, token: str) -> tuple[User, Token] | None:
    """The user a token belongs to and its row (revoked and expired ones included)."""
    row = session.get(Token, hash_token(token))
    if row is None:
        return None
    user = session.get(User, row.user_id)
    return (user, row) if user is not None else None


def touch(row: Token, now: float) -> None:
    """Note that the token was used, unless that was noted less than a minute ago."""
    if row.last_used_at is None or now - row.last_used_at >= TOUCH_EVERY_S:
        row.last_used_at = now


def user_tokens(session: Session, user_id: str) -> list[Token]:
    """A user's own tokens that are not revoked, oldest first; learners' tokens are not theirs."""
    query = select(Token).where(
        Token.user_id == user_id, Token.job_id.is_(None), Token.revoked_at.is_(None)
    )
    return list(session.scalars(query.order_by(Token.created_at, Token.id)))


def user_token(session: Session, user_id: str, token_id: str) -> Token | None:
    """One of a user's own tokens that is not revoked, by its public id."""
    query = select(Token).where(
        Token.id == token_id,
        Token.user_id == user_id,
        Token.job_id.is_(None),
        Token.revoked_at.is_(None),
    )
    return session.scalars(query).first()


def revoke(row: Token, now: float) -> None:
    row.revoked_at = now


def revoke_job_tokens(session: Session, job_id: str) -> None:
    session.execute(delete(Token).where(Token.job_id == job_id))


def delete_tokens_of(session: Session, user_id: str) -> None:
    """Every token of a user, learners' tokens included, stops working at once."""
    session.execute(delete(Token).where(Token.user_id == user_id))


def delete_user(session: Session, user: User) -> None:
    """Remove a user and their tokens; their jobs, models and deployments must be gone."""
    delete_tokens_of(session, user.id)
    session.delete(user)
