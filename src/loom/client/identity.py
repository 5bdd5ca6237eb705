"""The token goes only to the platform it belongs to.

A client that knows the platform's public key (from `server.json` in the platform's home, or
kept with a context) first sends a random challenge to `GET /v1/identity` and checks the
signature; only then does its first request carry the token. Whatever else answers on that
address — a process that took the port while the platform was restarting — gets no token.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Generator

import httpx
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from loom.client.errors import ClientError
from loom.domain.identity import challenge_message


def public_key(text: str) -> Ed25519PublicKey:
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True))
    except (ValueError, binascii.Error) as exc:
        raise ClientError(f"the platform's identity key {text[:20]!r}… is not a key") from exc


def verify(answer: httpx.Response, key: Ed25519PublicKey, challenge: bytes, url: str) -> None:
    """The answer to the challenge is the platform's own signature, or `ClientError`."""
    try:
        body = answer.json() if answer.status_code == 200 else {}
        signature = base64.b64decode(str(body.get("signature", "")), validate=True)
        key.verify(signature, challenge_message(challenge))
    except (ValueError, binascii.Error, InvalidSignature, AttributeError):
        raise ClientError(
            f"the server at {url} did not prove it is the Loom platform you know (its identity "
            "key is not the one in server.json or your context): your token was NOT sent. If "
            "the platform was reinstalled, take its key anew (`loom context add` again, or "
            "its new server.json)"
        ) from None


class VerifiedToken(httpx.Auth):
    """A bearer token, sent once the server has proved its identity (checked once per
    client)."""

    def __init__(self, token: str, identity: str, base_url: str) -> None:
        self._token = token
        self._key = public_key(identity)
        self._base = base_url.rstrip("/")
        self._verified = False

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        if not self._verified:
            challenge = secrets.token_bytes(32)
            probe = httpx.Request(
                "GET", f"{self._base}/v1/identity", params={"challenge": challenge.hex()}
            )
            answer = yield probe
            answer.read()
            verify(answer, self._key, challenge, self._base)
            self._verified = True
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request


def fetch(base_url: str, *, verify_tls: object = True) -> str:
    """The public key a platform says is its own, its signature checked (trust on first use:
    `loom context add` keeps it, and from then on the client holds the platform to it)."""
    challenge = secrets.token_bytes(32)
    try:
        answer = httpx.get(
            f"{base_url.rstrip('/')}/v1/identity",
            params={"challenge": challenge.hex()},
            timeout=10,
            verify=verify_tls,  # type: ignore[arg-type]
        )
    except httpx.HTTPError as exc:
        raise ClientError(f"cannot reach {base_url} to take its identity: {exc}") from exc
    text = str(answer.json().get("key", "")) if answer.status_code == 200 else ""
    if not text:
        raise ClientError(f"{base_url} does not say its identity (HTTP {answer.status_code})")
    verify(answer, public_key(text), challenge, base_url)
    return text
