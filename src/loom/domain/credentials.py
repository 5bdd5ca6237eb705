"""A manifest's credentials taken out of it, and put back.

`split` returns the manifest mapping with every credential replaced by `***` (what is stored and
shown) and the credentials themselves (what is sealed); `merge` reverses it exactly. Both work on
the mapping as the user wrote it, so the rest of it (`memory: 1Gb`, key order) stays intact.
"""

from __future__ import annotations

import copy
from typing import Any

from loom.domain.manifest import PUBLIC_CONNECTION_KEYS, REDACTED

Credentials = dict[str, Any]
"""`{"data_stores": {"<index>": {key: value}}, "access_token": value}`, each part only if any."""


def split(original: dict[str, Any]) -> tuple[dict[str, Any], Credentials]:
    """The manifest with its credentials redacted, and the credentials."""
    redacted = copy.deepcopy(original)
    found: Credentials = {}
    stores: dict[str, dict[str, Any]] = {}
    for index, connection in _connections(redacted):
        secret = {k: v for k, v in connection.items() if k not in PUBLIC_CONNECTION_KEYS}
        if secret:
            stores[str(index)] = secret
            connection.update(dict.fromkeys(secret, REDACTED))
    if stores:
        found["data_stores"] = stores
    location = _image_location(redacted)
    if location is not None and location.get("access_token") is not None:
        found["access_token"] = location["access_token"]
        location["access_token"] = REDACTED
    return redacted, found


def merge(redacted: dict[str, Any], credentials: Credentials) -> dict[str, Any]:
    """The manifest as the user wrote it: `redacted` with `credentials` put back."""
    original = copy.deepcopy(redacted)
    connections = dict(_connections(original))
    for index, secret in credentials.get("data_stores", {}).items():
        connection = connections.get(int(index))
        if connection is not None:
            connection.update(secret)
    location = _image_location(original)
    if location is not None and "access_token" in credentials:
        location["access_token"] = credentials["access_token"]
    return original


def _connections(manifest: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    stores = manifest.get("data_stores")
    if not isinstance(stores, list):
        return []
    return [
        (index, store["connection"])
        for index, store in enumerate(stores)
        if isinstance(store, dict) and isinstance(store.get("connection"), dict)
    ]


def _image_location(manifest: dict[str, Any]) -> dict[str, Any] | None:
    framework = manifest.get("framework")
    location = framework.get("image_location") if isinstance(framework, dict) else None
    return location if isinstance(location, dict) else None
