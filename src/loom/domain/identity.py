"""What a platform signs to prove it is itself (`GET /v1/identity`): the client's challenge
behind a fixed label, so that the signature can be taken for nothing else."""

from __future__ import annotations

LABEL = b"loom-platform-identity-v1:"


def challenge_message(challenge: bytes) -> bytes:
    return LABEL + challenge
