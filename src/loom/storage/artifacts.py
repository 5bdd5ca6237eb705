"""The platform's artifact store: submitted code kept by content digest, on the local disk."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from loom.domain.errors import NotFound


class ArtifactStore:
    """Blobs named by their SHA-256; the same code submitted twice is stored once."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, digest: str) -> Path:
        algo, _, value = digest.partition(":")
        if algo != "sha256" or len(value) != 64 or not value.isalnum():
            raise NotFound(f"no artifact {digest!r}")
        return self.root / "sha256" / value[:2] / value

    def put(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        return digest

    def put_file(self, source: Path) -> str:
        """Store a file by its digest, streaming it; returns the digest."""
        hasher = hashlib.sha256()
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root)
        with os.fdopen(fd, "wb") as out, source.open("rb") as data:
            while chunk := data.read(2**20):
                hasher.update(chunk)
                out.write(chunk)
        digest = "sha256:" + hasher.hexdigest()
        path = self._path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, path)
        return digest

    def path(self, digest: str) -> Path:
        path = self._path(digest)
        if not path.exists():
            raise NotFound(f"no artifact {digest!r}")
        return path

    def get(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()
