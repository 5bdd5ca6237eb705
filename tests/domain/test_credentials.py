"""A manifest's credentials taken out and put back."""

from __future__ import annotations

import pytest

from loom.domain.credentials import merge, split
from loom.domain.errors import ManifestError
from loom.domain.manifest import load_manifest

TEXT = """
name: with-stores
memory: 1Gb
framework:
  name: python
  command: python t.py
  image_location: {registry: r.io, access_token: tok-123}
data_stores:
  - id: cos
    type: s3_datastore
    training_data: {container: data}
    connection: {auth_url: 'http://s3', user_name: key-id, password: pw-456}
  - id: here
    type: local
    connection: {path: /tmp/x}
"""


def test_split_redacts_credentials_and_keeps_the_rest() -> None:
    """Every credential becomes `***`; public keys and every other field stay as written."""
    _, original = load_manifest(TEXT)
    redacted, credentials = split(original)
    cos = redacted["data_stores"][0]["connection"]
    assert cos == {"auth_url": "http://s3", "user_name": "***", "password": "***"}
    assert redacted["data_stores"][1]["connection"] == {"path": "/tmp/x"}
    assert redacted["framework"]["image_location"] == {"registry": "r.io", "access_token": "***"}
    assert redacted["memory"] == "1Gb"
    assert credentials == {
        "data_stores": {"0": {"user_name": "key-id", "password": "pw-456"}},
        "access_token": "tok-123",
    }
    assert original["data_stores"][0]["connection"]["password"] == "pw-456"  # not changed


def test_merge_restores_the_manifest_exactly() -> None:
    """Putting the credentials back gives the mapping the user wrote."""
    _, original = load_manifest(TEXT)
    assert merge(*split(original)) == original


def test_manifest_without_credentials_has_none() -> None:
    """A manifest with no data store and no image token has nothing to seal."""
    _, original = load_manifest("name: x\nframework: {name: python, command: 'true'}\n")
    assert split(original) == (original, {})


def test_manifest_errors_never_repeat_a_credential() -> None:
    """A bad credential value is named by its field, never shown."""
    with pytest.raises(ManifestError) as caught:
        load_manifest(TEXT.replace("password: pw-456", "password: [pw-456]"))
    assert caught.value.field == "data_stores[0].connection.password"
    assert "pw-456" not in caught.value.message
