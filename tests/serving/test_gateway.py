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


def test_a_malformed_header_is_not_echoed(broken: str) -> None:
    """A header line without a colon is a 400 that says which line, not what it held."""
    port = int(broken.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(b"GET /v2 HTTP/1.1\r\nhost: x\r\nBearer loom_secret-value\r\n\r\n")
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400")
    assert b"line 3" in answer and b"secret" not in answer
