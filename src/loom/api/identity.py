"""The platform's identity: a key pair made once per install, so that a client can tell this
platform from whatever else answers on its address before it sends a token there.

The private key stays in `LOOM_HOME/identity.key` (0600); the public key is written to
`server.json` beside the URL, and `loom context add` keeps it with a context. A client sends a
fresh random challenge to `GET /v1/identity` (no token) and checks the signature against the
key it already has: a process that took the platform's port while it was down (or a machine
that took its address) cannot sign, and gets no token.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Annotated, Any

from cryptography.exceptions import InvalidKey
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi import APIRouter, Query, Request

from loom.domain.errors import InvalidInput, PlatformError
from loom.domain.identity import challenge_message
from loom.store.private import write_private

KEY_FILE = "identity.key"

router = APIRouter(tags=["operations"])


class ServerIdentity:
    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public = base64.b64encode(raw).decode()

    @classmethod
    def load(cls, home: Path) -> ServerIdentity:
        """This install's key, made at its first start."""
        path = home / KEY_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            key = Ed25519PrivateKey.generate()
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            write_private(path, pem)
            return cls(key)
        try:
            found = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError, InvalidKey) as exc:
            raise PlatformError(
                f"{path} is not this platform's identity key; move it away to make a new one "
                "(clients that kept the old key will then refuse the platform until told)"
            ) from exc
        if not isinstance(found, Ed25519PrivateKey):
            raise PlatformError(f"{path} holds a key that is not Ed25519")
        return cls(found)

    def sign(self, challenge: bytes) -> str:
        return base64.b64encode(self._key.sign(challenge_message(challenge))).decode()


Challenge = Annotated[
    str,
    Query(
        min_length=32,
        max_length=128,
        pattern="^[0-9a-fA-F]+$",
        description="16 to 64 random bytes, in hex, chosen by the client",
    ),
]


@router.get("/v1/identity")
def identity(request: Request, challenge: Challenge) -> dict[str, Any]:
    """This platform's public key and its signature of the client's challenge: a client checks
    it against the key it holds (from `server.json` or its context) before sending a token."""
    found: ServerIdentity | None = getattr(request.app.state.platform, "identity", None)
    if found is None:
        raise PlatformError("this platform has no identity key")
    try:
        raw = bytes.fromhex(challenge)
    except ValueError as exc:  # an odd number of digits
        raise InvalidInput("challenge: an even number of hex digits", field="challenge") from exc
    return {"key": found.public, "signature": found.sign(raw), "pid": os.getpid()}
