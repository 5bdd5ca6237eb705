"""The artifact store: content-addressed, local or on any fsspec URL (S3 here, through moto)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from loom.domain.errors import NotFound
from loom.storage.artifacts import ArtifactStore


def test_local_store_keeps_one_copy(tmp_path: Path) -> None:
    """The same content stored twice is one blob; an unknown digest is NotFound."""
    store = ArtifactStore(tmp_path)
    first = store.put(b"weights")
    source = tmp_path / "w.bin"
    source.write_bytes(b"weights")
    assert store.put_file(source) == first
    assert store.get(first) == b"weights"
    assert len(list((tmp_path / "sha256").rglob("*"))) == 2  # one folder, one blob
    with pytest.raises(NotFound):
        store.path("sha256:" + "0" * 64)
    with pytest.raises(NotFound):
        store.path("md5:../../etc/passwd")


@pytest.mark.s3
def test_remote_store_on_s3(tmp_path: Path, s3: Any) -> None:
    """With an s3:// URL, blobs land in the bucket; a platform with an empty cache reads them."""
    bucket = f"artifacts-{uuid.uuid4().hex[:8]}"
    s3.client().create_bucket(Bucket=bucket)
    options = {"key": s3.key, "secret": s3.secret, "endpoint_url": s3.endpoint}
    store = ArtifactStore(tmp_path / "a", url=f"s3://{bucket}/loom", options=options)
    digest = store.put(b"model bytes")
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == [f"loom/sha256/{digest[7:9]}/{digest[7:]}"]
    fresh = ArtifactStore(tmp_path / "b", url=f"s3://{bucket}/loom", options=options)
    assert fresh.get(digest) == b"model bytes"
