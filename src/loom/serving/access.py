"""Who may call a deployment's endpoint, the gateway's side: `access.json` in the deployment's
folder, written by the platform (mode 0600), holds whether the deployment is public and the
SHA-256 of every token it accepts (the owner's API tokens and the deployment's keys), each with
whose it is. The gateway never touches the database: it reads the file again when it changes.

A request passes with `Authorization: Bearer <token>` whose hash is in the file; checking it is
one hash (cached per token string) and one dict lookup. Without the file, nothing passes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loom.domain.accounts import hash_token

ACCESS = "access.json"
CHECK_S = 1.0  # how often the gateway looks at the file's stamp
MISS_CHECK_S = 0.05  # sooner for an unknown token: a key just created works at once
USED_GRAIN_S = 10  # last-use times are kept this coarse, so status.json changes rarely
MISSING = "missing bearer token: send `Authorization: Bearer <token>`"
INVALID = "invalid or revoked token"


def bearer(header: bytes | None) -> bytes | None:
    """The token of an `Authorization: Bearer <token>` header; None without one."""
    if not header:
        return None
    scheme, _, token = header.partition(b" ")
    token = token.strip()
    return token if scheme.lower() == b"bearer" and token else None


def render(public: bool, hashes: dict[str, str]) -> bytes:
    """The file's content: the same for the same rules, so the platform writes only changes."""
    return json.dumps({"public": public, "hashes": hashes}, sort_keys=True).encode()


class AccessList:
    """The rules of `path`, read again (at most once per CHECK_S) when its stamp changes."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.clock = clock
        self.public = False
        self.hashes: dict[str, str] = {}
        self.used: dict[str, int] = {}  # whose token → last use (UNIX seconds, coarse)
        self._stamp: tuple[int, int, int] | None = None
        self._checked = -CHECK_S
        self._now = 0

    def refresh(self, *, force: bool = False) -> None:
        """Read the file again if it changed since the last look."""
        self._now = int(time.time()) // USED_GRAIN_S * USED_GRAIN_S
        now = self.clock()
        if not force and now - self._checked < CHECK_S:
            return
        self._checked = now
        try:
            found = os.stat(self.path)
        except OSError:
            self._deny_all(None)
            return
        stamp = (found.st_ino, found.st_mtime_ns, found.st_size)
        if stamp != self._stamp:
            self._load(stamp)

    def _load(self, stamp: tuple[int, int, int]) -> None:
        try:
            data: Any = json.loads(self.path.read_bytes())
            public = data["public"] is True
            hashes = {str(k): str(v) for k, v in data["hashes"].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            why = type(exc).__name__
            print(f"access rules unreadable ({why}): nothing passes", file=sys.stderr, flush=True)
            self._deny_all(stamp)
            return
        self.public, self.hashes, self._stamp = public, hashes, stamp

    def _deny_all(self, stamp: tuple[int, int, int] | None) -> None:
        self.public, self.hashes, self._stamp = False, {}, stamp

    def note_use(self, whose: str) -> None:
        """A request passed with `whose` token (checked by the proxy)."""
        self.used[whose] = self._now

    def refusal(self, header: bytes | None) -> str | None:
        """None when a request with this Authorization header may pass; else why not."""
        if self.public:
            return None
        token = bearer(header)
        if token is None:
            return MISSING
        hashed = hash_token(token)
        whose = self.hashes.get(hashed)
        if whose is None and self.clock() - self._checked >= MISS_CHECK_S:
            self.refresh(force=True)
            whose = self.hashes.get(hashed)
        if whose is None:
            return INVALID
        self.used[whose] = self._now
        return None
