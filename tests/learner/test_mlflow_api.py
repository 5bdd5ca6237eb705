"""The learner's MLflow endpoint: it forwards MLflow's client to the platform with the job's
token in place of its own secret, and refuses whatever is not the client's, or not MLflow's."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from loom.learner.mlflow_api import Endpoint

JOB_TOKEN = "Bearer job-token"


class Platform:
    """What the platform's side of the forward got, and a canned answer."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        platform = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                platform.seen.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "body": body,
                        "auth": self.headers.get("Authorization"),
                    }
                )
                data = json.dumps({"run": {"info": {"run_id": "abc"}}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._any()

            def do_POST(self) -> None:
                self._any()

            def do_PUT(self) -> None:
                self._any()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def connect(self, timeout: float) -> tuple[http.client.HTTPConnection, str, str]:
        port = self.server.server_address[1]
        return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout), "/loom", JOB_TOKEN


@pytest.fixture
def forwarding() -> Iterator[tuple[Endpoint, Platform]]:
    platform = Platform()
    endpoint = Endpoint(platform.connect).start()
    yield endpoint, platform
    endpoint.close()
    platform.server.shutdown()


def test_the_client_is_forwarded_with_the_jobs_token(forwarding: Any) -> None:
    """A run created through the endpoint reaches the platform's MLflow API under its URL's
    prefix, with the job's token and the same body; the platform's answer comes back."""
    endpoint, platform = forwarding
    headers = {"Authorization": f"Bearer {endpoint.token}"}
    answer = httpx.post(
        f"{endpoint.url}/api/2.0/mlflow/runs/create",
        json={"experiment_id": "0"},
        headers=headers,
        timeout=10,
    )
    assert answer.status_code == 200 and answer.json()["run"]["info"]["run_id"] == "abc"
    (seen,) = platform.seen
    assert seen["path"] == "/loom/api/2.0/mlflow/runs/create" and seen["auth"] == JOB_TOKEN
    assert json.loads(seen["body"]) == {"experiment_id": "0"}
    upload = b"x" * (3 << 20)  # an artifact: streamed through, whole
    put = httpx.put(
        f"{endpoint.url}/api/2.0/mlflow-artifacts/artifacts/0/abc/artifacts/m.bin",
        content=upload,
        headers=headers,
        timeout=30,
    )
    assert put.status_code == 200 and platform.seen[-1]["body"] == upload


def test_without_the_learners_secret_nothing_is_forwarded(forwarding: Any) -> None:
    """Another process on the machine, without the learner's secret, gets 401 in MLflow's shape,
    and a path that is not MLflow's gets 404: neither reaches the platform."""
    endpoint, platform = forwarding
    bad = httpx.post(
        f"{endpoint.url}/api/2.0/mlflow/runs/create",
        json={},
        headers={"Authorization": "Bearer guess"},
        timeout=10,
    )
    assert bad.status_code == 401 and bad.json()["error_code"] == "UNAUTHENTICATED"
    other = httpx.get(
        f"{endpoint.url}/v1/jobs", timeout=10, headers={"Authorization": f"Bearer {endpoint.token}"}
    )
    assert other.status_code == 404 and other.json()["error_code"] == "ENDPOINT_NOT_FOUND"
    assert platform.seen == []


def test_an_unreachable_platform_is_a_503_the_client_retries() -> None:
    """With the platform gone, the client gets TEMPORARILY_UNAVAILABLE (which MLflow's client
    retries), not a hang or a dropped connection."""

    def nowhere(timeout: float) -> tuple[http.client.HTTPConnection, str, str]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout), "", JOB_TOKEN

    endpoint = Endpoint(nowhere).start()
    try:
        answer = httpx.post(
            f"{endpoint.url}/api/2.0/mlflow/runs/create",
            json={"a": 1},
            headers={"Authorization": f"Bearer {endpoint.token}"},
            timeout=10,
        )
    finally:
        endpoint.close()
    assert answer.status_code == 503 and answer.json()["error_code"] == "TEMPORARILY_UNAVAILABLE"


def test_a_negative_length_is_refused_not_read(forwarding: Any) -> None:
    """A Content-Length that is not a number is refused before anything is read or sent."""
    endpoint, platform = forwarding
    port = int(endpoint.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            f"POST /api/2.0/mlflow/runs/create HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{endpoint.token}\r\nContent-Length: -1\r\n\r\n".encode()
        )
        answer = conn.recv(200)
    assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request"), answer
    assert platform.seen == []


def test_close_stops_the_endpoint_at_once(forwarding: Any) -> None:
    """`close` (which the learner's end waits for) wakes the serving thread rather than waiting
    for a poll: when it returns, the thread has ended and no connection is taken any more."""
    endpoint, _platform = forwarding
    port = int(endpoint.url.rsplit(":", 1)[1])
    endpoint.close()
    assert not endpoint.thread.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
