"""How a store's errors are read: refused credentials fail at once, anything else is retried."""

from __future__ import annotations

import pytest

from loom.learner.datastores import _translate

STORE = {"id": "results", "endpoint": "http://127.0.0.1:40312"}


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError("Could not connect to the endpoint URL: http://127.0.0.1:40312/b"),
        OSError("Connection reset by peer, endpoint 10.0.40.3:9000"),
        TimeoutError("read timed out on 127.0.0.1:54030"),
    ],
)
def test_an_unreachable_store_is_retried_whatever_its_port(error: Exception) -> None:
    """A port or an address holding "403" is not a refusal (it failed a job that should have
    waited for its store)."""
    assert _translate(STORE, "b", error, {}).transient


@pytest.mark.parametrize(
    "error",
    [
        PermissionError("Access Denied"),
        RuntimeError("An error occurred (403) when calling the PutObject operation: Forbidden"),
        RuntimeError("An error occurred (InvalidAccessKeyId) when calling ListObjectsV2"),
    ],
)
def test_refused_credentials_fail_at_once_without_the_secret(error: Exception) -> None:
    found = _translate(STORE, "b", error, {"password": "Forbidden"})
    assert not found.transient and "credentials were refused" in found.message
    assert "Forbidden" not in found.message
