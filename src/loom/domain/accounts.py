"""Account rules that need no database: when a secret is too weak to guard the platform, when
a new token lapses, and how high a user's jobs may queue."""

from __future__ import annotations

import hashlib

from loom.domain.errors import InvalidInput, ManifestError

MIN_ADMIN_TOKEN = 32
MIN_DISTINCT = 8
DAY_S = 86_400.0
HOW_TO_MAKE_ONE = (
    "make one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'` "
    "or `openssl rand -base64 32`"
)


def _period(secret: str) -> int:
    """The length of the shortest pattern that `secret` repeats (its own length if none)."""
    for size in range(1, len(secret) // 2 + 1):
        if all(secret[i] == secret[i - size] for i in range(size, len(secret))):
            return size
    return len(secret)


def weak_secret(secret: str) -> str | None:
    """Why `secret` is too weak to be the admin's token, or None if it will do."""
    if len(secret) < MIN_ADMIN_TOKEN:
        return f"it has {len(secret)} characters and at least {MIN_ADMIN_TOKEN} are needed"
    if (period := _period(secret)) <= len(secret) // 2:
        return f"it only repeats a {period}-character pattern"
    if len(set(secret)) < MIN_DISTINCT:
        return f"it uses only {len(set(secret))} different characters"
    return None


def admin_token_problem(secret: str) -> str | None:
    """The sentence a server prints when it refuses to start with `secret` as admin token."""
    why = weak_secret(secret)
    if why is None:
        return None
    return (
        f"LOOM_ADMIN_TOKEN is too weak to guard the platform: {why}. "
        f"Use a random value of {MIN_ADMIN_TOKEN} characters or more; {HOW_TO_MAKE_ONE}."
    )


def token_expiry(now: float, default_days: float | None, asked_days: float | None) -> float | None:
    """When a new token lapses: after the days asked for, which may not exceed the platform's
    default lifetime, else after that default; None means never."""
    if asked_days is None:
        return None if default_days is None else now + default_days * DAY_S
    if default_days is not None and asked_days > default_days:
        raise InvalidInput(
            f"ttl_days: {asked_days:g} is longer than the platform's token lifetime of "
            f"{default_days:g} days (LOOM_TOKEN_TTL_DAYS); ask for {default_days:g} or less",
            field="ttl_days",
        )
    return now + asked_days * DAY_S


def check_priority(priority: int, maximum: int) -> None:
    """A job may not queue above its owner's maximum priority."""
    if priority > maximum:
        raise ManifestError(
            f"priority: {priority} is above your maximum priority of {maximum}; "
            "lower it, or ask an admin to raise your maximum",
            field="priority",
        )


def hash_token(token: str | bytes) -> str:
    """What is stored of a token (its SHA-256): the API and deployment gateways compare this."""
    return hashlib.sha256(token.encode() if isinstance(token, str) else token).hexdigest()
