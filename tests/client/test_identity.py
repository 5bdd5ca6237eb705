"""A client sends its token only to the platform whose identity it holds."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from loom.client import ClientError, LoomClient
from loom.client.http import discover_endpoint
from loom.domain.identity import challenge_message


class Squatter:
    """An HTTP server on a port the platform used to have: it answers everything, signs with a
    key of its own (or not at all), and keeps every Authorization header it is sent."""

    def __init__(self, key: Ed25519PrivateKey | None) -> None:
        self.headers: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("Authorization"):
                    owner.headers.append(str(self.headers["Authorization"]))
                body: dict[str, Any] = {"jobs": []}
                if self.path.startswith("/v1/identity") and key is not None:
                    challenge = bytes.fromhex(self.path.split("challenge=")[1])
                    signed = key.sign(challenge_message(challenge))
                    body = {"key": "", "signature": base64.b64encode(signed).decode()}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def public_text(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("LOOM_URL", "LOOM_TOKEN", "LOOM_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOOM_HOME", str(tmp_path))
    (tmp_path / "token").write_text("admin-secret-token\n")
    yield tmp_path


@pytest.mark.parametrize("signs", [False, True], ids=["no-key", "another-key"])
def test_a_squatter_on_the_platforms_port_never_gets_the_token(home: Path, signs: bool) -> None:
    """With the platform's key in server.json, a client that finds another server on the
    platform's address (unsigned, or signed with another key) refuses before sending its token."""
    platform_key = Ed25519PrivateKey.generate()
    squatter = Squatter(Ed25519PrivateKey.generate() if signs else None)
    try:
        server = {"url": squatter.url, "pid": 1, "identity": public_text(platform_key)}
        (home / "server.json").write_text(json.dumps(server))
        with LoomClient.from_env() as client, pytest.raises(ClientError) as refused:
            client.jobs()
        assert "NOT sent" in refused.value.message
        assert squatter.headers == []
    finally:
        squatter.close()


def test_the_token_goes_where_the_platforms_key_answers(home: Path) -> None:
    """A server that signs with the key in server.json gets the token, once it has proved it."""
    platform_key = Ed25519PrivateKey.generate()
    genuine = Squatter(platform_key)
    try:
        server = {"url": genuine.url, "pid": 1, "identity": public_text(platform_key)}
        (home / "server.json").write_text(json.dumps(server))
        with LoomClient.from_env() as client:
            assert client.jobs() == {"jobs": []}
            client.jobs()
        assert genuine.headers == ["Bearer admin-secret-token"] * 2
    finally:
        genuine.close()


def test_the_local_socket_is_preferred_and_an_explicit_url_keeps_the_key(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the platform's machine the client uses its unix socket; given the platform's URL
    explicitly it still checks the key; given another URL it has no key to hold it to."""
    (home / "api.sock").touch()
    server = {"url": "http://127.0.0.1:1", "socket": str(home / "api.sock"), "identity": "K"}
    (home / "server.json").write_text(json.dumps(server))
    found = discover_endpoint()
    assert (found.socket, found.identity) == (str(home / "api.sock"), "K")
    monkeypatch.setenv("LOOM_URL", "http://127.0.0.1:1/")
    assert (discover_endpoint().socket, discover_endpoint().identity) == (None, "K")
    monkeypatch.setenv("LOOM_URL", "http://elsewhere:8470")
    assert discover_endpoint().identity is None
