"""The gateway's access rules on their own: bearer tokens checked against the hashes of
`access.json`, the file read again when it changes, nothing passing without it; the caller's
credentials never forwarded to a replica; the serving environment's allow-list."""

from __future__ import annotations

import hashlib
from pathlib import Path

from loom.domain.accounts import hash_token
from loom.serving.access import INVALID, MISSING, AccessList, bearer, render
from loom.serving.environment import serving_env
from loom.serving.http1 import Message, encode_request
from loom.store.private import write_private


def rules(folder: Path, public: bool, **tokens: str) -> Path:
    path = folder / "access.json"
    write_private(path, render(public, {hash_token(t): whose for whose, t in tokens.items()}))
    return path


def test_a_known_token_passes_and_others_are_refused(tmp_path: Path) -> None:
    """The owner's token and a key pass and are recorded as used; no token, another scheme or an
    unknown token are refused with the reason; the file holds hashes, never a token."""
    path = rules(tmp_path, False, token="loom_owner", k1="lk_key")
    access = AccessList(path)
    access.refresh(force=True)
    assert access.refusal(b"Bearer loom_owner") is None
    assert access.refusal(b"bearer  lk_key ") is None
    assert access.refusal(None) == MISSING
    assert access.refusal(b"Basic bG9vbTpsb29t") == MISSING
    assert access.refusal(b"Bearer ") == MISSING
    assert access.refusal(b"Bearer loom_other") == INVALID
    assert set(access.used) == {"token", "k1"}
    assert hashlib.sha256(b"lk_key").hexdigest() in path.read_text()
    assert "lk_key" not in path.read_text()


def test_changes_are_read_again_and_a_missing_file_lets_nothing_pass(tmp_path: Path) -> None:
    """A revoked key stops passing once the file changes (looked at no more than once a
    second); a public deployment needs no token; without the file, or with a bad one, nothing
    passes."""
    path = rules(tmp_path, False, k1="lk_key")
    clock = [100.0]
    access = AccessList(path, clock=lambda: clock[0])

    def later(seconds: float) -> None:
        clock[0] += seconds
        access.refresh()

    later(0)
    assert access.refusal(b"Bearer lk_key") is None
    rules(tmp_path, False)
    later(0.5)  # too soon to look again
    assert access.refusal(b"Bearer lk_key") is None
    later(1)
    assert access.refusal(b"Bearer lk_key") == INVALID
    rules(tmp_path, True)
    later(2)
    assert access.refusal(None) is None
    path.unlink()
    later(2)
    assert access.refusal(None) == MISSING
    rules(tmp_path, True)
    later(2)
    path.write_text("{not json")  # never written so by the platform: still, nothing passes
    later(2)
    assert access.refusal(None) == MISSING


def test_a_new_key_passes_at_once(tmp_path: Path) -> None:
    """An unknown token makes the gateway look at the file again at once (at most every 50 ms),
    so a key just created needs no wait."""
    path = rules(tmp_path, False, k1="lk_key")
    clock = [100.0]
    access = AccessList(path, clock=lambda: clock[0])
    access.refresh(force=True)
    rules(tmp_path, False, k1="lk_key", k2="lk_new")
    clock[0] += 0.06
    assert access.refusal(b"Bearer lk_new") is None
    assert set(access.used) == {"k2"}


def test_bearer_parsing() -> None:
    """Only `Bearer <token>` (any case, spaces trimmed) gives a token."""
    assert bearer(b"Bearer abc") == b"abc"
    assert bearer(b"BEARER abc ") == b"abc"
    assert bearer(b"Token abc") is None
    assert bearer(b"") is None


def test_credentials_are_not_forwarded_to_replicas() -> None:
    """The request a replica gets has the caller's headers but Authorization and Cookie."""
    request = Message(
        [b"POST", b"/v2/models/m/infer"],
        [
            (b"authorization", b"Bearer secret-token"),
            (b"cookie", b"session=secret"),
            (b"content-type", b"application/json"),
        ],
        b"{}",
    )
    sent = encode_request(request)
    assert b"secret" not in sent
    assert b"content-type: application/json" in sent


def test_the_serving_environment_is_an_allow_list() -> None:
    """PATH, HOME, locale and thread settings pass; the server's settings, cloud credentials
    and anything else do not."""
    server = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "OMP_NUM_THREADS": "1",
        "LOOM_ADMIN_TOKEN": "loom_x",
        "LOOM_DATABASE_URL": "postgresql://u:p@db/loom",
        "AWS_SECRET_ACCESS_KEY": "fake",
        "AWS_ACCESS_KEY_ID": "fake",
        "GITHUB_TOKEN": "ghp_x",
        "SSH_AUTH_SOCK": "/tmp/agent",
    }
    assert serving_env(server) == {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "OMP_NUM_THREADS": "1",
    }
