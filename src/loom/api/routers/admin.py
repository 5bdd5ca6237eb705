"""`/v1/admin`: the platform's own upkeep (admins only)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from loom.api.auth import AdminDep, PlatformDep
from loom.store import sealed
from loom.store.secret_keys import SecretKeys

router = APIRouter(prefix="/v1/admin", tags=["admin"])


@router.post("/secret-key/rotate")
def rotate_secret_key(loom: PlatformDep, _admin: AdminDep) -> dict[str, Any]:
    """Reseal every stored credential with a new current key; the old keys stop opening them."""
    resealed = sealed.rotate(loom.db, loom.keys)
    return {"resealed": resealed, "key_source": loom.keys.source, "message": _next(loom.keys)}


def _next(keys: SecretKeys) -> str:
    if keys.file is not None:
        return f"every stored credential is sealed with a new key in {keys.file}; the old is gone"
    if keys.count > 1:
        return (
            "every stored credential is sealed with the first key of LOOM_SECRET_KEYS; remove "
            "the others from LOOM_SECRET_KEYS and restart the platform"
        )
    return (
        "every stored credential is sealed again with the key of LOOM_SECRET_KEYS; to change "
        "it, put a new key first in LOOM_SECRET_KEYS, restart, and rotate again"
    )
