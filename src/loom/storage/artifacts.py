"""The platform's artifact store: submitted code and model files, kept by content digest.

A local folder by default; any fsspec URL (`s3://bucket/prefix`, …) by setting, with a local
cache so that learners and downloads read plain files. The same content is stored once.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from loom.domain.errors import NotFound, StorageError


class ArtifactStore:
    """Blobs named by their SHA-256 under `root` (a folder, or a URL with `remote_options`)."""

    def __init__(
        self, root: Path, *, url: str | None = None, options: dict[str, Any] | None = None
    ) -> None:
        self.root = root
        self.url = url.rstrip("/") if url else None
        self._options = options or {}
        self._fs: Any = None

    def _remote(self) -> Any:
        if self._fs is None:
            import fsspec

            protocol = self.url.split("://", 1)[0] if self.url else "file"
            try:
                self._fs = fsspec.filesystem(protocol, **self._options)
            except (ImportError, ValueError) as exc:
                raise StorageError(f"artifact store {self.url!r}: {exc}") from exc
        return self._fs

    @staticmethod
    def _key(digest: str) -> str:
        algo, _, value = digest.partition(":")
        if algo != "sha256" or len(value) != 64 or not value.isalnum():
            raise NotFound(f"no artifact {digest!r}")
        return f"sha256/{value[:2]}/{value}"

    def _path(self, digest: str) -> Path:
        return self.root / self._key(digest)

    def _publish(self, local: Path, digest: str) -> None:
        """Copy a stored blob to the remote store, unless it is there already."""
        if self.url is None:
            return
        remote = f"{self.url}/{self._key(digest)}"
        try:
            fs = self._remote()
            if not fs.exists(remote):
                fs.put_file(str(local), remote)
        except StorageError:
            raise
        except Exception as exc:  # the engine's error, translated at this boundary
            raise StorageError(f"artifact store {self.url!r}: {type(exc).__name__}") from exc

    def put(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        self._publish(path, digest)
        return digest

    def put_file(self, source: Path) -> str:
        """Store a file by its digest, streaming it; returns the digest."""
        with source.open("rb") as data:
            return self.put_stream(data)[0]

    def put_stream(self, data: BinaryIO) -> tuple[str, int]:
        """Store what a readable stream holds by its digest; returns the digest and size."""
        hasher = hashlib.sha256()
        size = 0
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root)
        with os.fdopen(fd, "wb") as out:
            while chunk := data.read(2**20):
                hasher.update(chunk)
                size += len(chunk)
                out.write(chunk)
        digest = "sha256:" + hasher.hexdigest()
        path = self._path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, path)
        self._publish(path, digest)
        return digest, size

    def path(self, digest: str) -> Path:
        """A local file with the blob: the store itself, or its cache of the remote store."""
        path = self._path(digest)
        if path.exists():
            return path
        if self.url is not None:
            remote = f"{self.url}/{self._key(digest)}"
            try:
                fs = self._remote()
                if fs.exists(remote):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    fs.get_file(remote, str(path))
                    return path
            except StorageError:
                raise
            except Exception as exc:
                raise StorageError(f"artifact store {self.url!r}: {type(exc).__name__}") from exc
        raise NotFound(f"no artifact {digest!r}")

    def get(self, digest: str) -> bytes:
        return self.path(digest).read_bytes()
