"""A gateway started from its spec alone, as the platform starts one: what a caller is told
when the replicas cannot start, or when its request is malformed, names no reason, path or
header value of the server's."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loom.serving.access import ACCESS, render
from loom.serving.spec import DeploymentSpec
from loom.store.private import write_private
from tests.conftest import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def broken(tmp_path: Path) -> Iterator[str]:
    """A public deployment whose model cannot load, with a short readiness timeout."""
    model = tmp_path / "model-v1"
    model.mkdir()
    (model / "model.onnx").write_bytes(b"not a model")
    port = free_port()
    DeploymentSpec(
        name="broken", model_dir=str(model), model_version="1", port=port, ready_timeout_s=3
    ).write(tmp_path)
    write_private(tmp_path / ACCESS, render(True, {}))
    log = (tmp_path / "gateway.log").open("wb")
    gateway = subprocess.Popen(
        [sys.executable, "-m", "loom.serving.gateway", str(tmp_path)], stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/v2/health/live")
            break
        except httpx.TransportError:
            time.sleep(0.1)
    yield url
    gateway.terminate()
    gateway.wait(30)


def test_a_failing_deployment_tells_callers_no_reason(broken: str, tmp_path: Path) -> None:
    """The caller gets a 503 naming the deployment only; the reason, without server paths,
    is in the status the owner reads."""
    response = httpx.post(f"{broken}/v2/models/broken/infer", json={"inputs": []}, timeout=30)
    assert response.status_code == 503
    assert response.json() == {"error": "no replica of 'broken' became ready"}
    message = json.loads((tmp_path / "status.json").read_text())["message"]
    assert message.startswith("replica ") and "…/model.onnx" in message
    assert str(tmp_path) not in message


def exchange(url: str, raw: bytes) -> tuple[bytes, bytes]:
    """Send raw bytes; the answer, and what the connection gives after it (b"": closed)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(raw)
        answer = conn.recv(4096)
        try:
            after = conn.recv(4096)
        except TimeoutError:
            after = b"(still open)"
    return answer, after


def test_a_malformed_header_is_not_echoed(broken: str) -> None:
    """A header line without a colon is a 400 that does not repeat what it held."""
    answer, after = exchange(
        broken, b"GET /v2 HTTP/1.1\r\nhost: x\r\nBearer loom_secret-value\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 400") and b"malformed HTTP" in answer
    assert b"secret" not in answer and after == b""


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: -5",  # got no answer and a traceback
        b"Content-Length: 0\r\nContent-Length: 5",  # hung: the last one won (smuggling)
        b"Content-Length: 5\r\nTransfer-Encoding: chunked",
        b"Transfer-Encoding: chunked, identity",
    ],
)
def test_request_smuggling_shapes_get_400_and_a_closed_connection(
    broken: str, tmp_path: Path, head: bytes
) -> None:
    raw = b"POST /v2/models/broken/infer HTTP/1.1\r\nhost: x\r\n" + head + b"\r\n\r\nhello"
    answer, after = exchange(broken, raw)
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert after == b""
    assert b"Traceback" not in (tmp_path / "gateway.log").read_bytes()
