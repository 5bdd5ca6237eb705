"""A gateway started from its spec alone, as the platform starts one: what a caller is told
when the replicas cannot start, or when its request is malformed, names no reason, path or
header value of the server's."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
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


def slow_model(path: Path) -> None:
    """An ONNX model that takes a while per request: 192 chained 384×384 products, ~30 ms on
    a fast core, several times what reading a burst request's 120 KB of JSON takes (with 48, a
    fast machine answered each request about as fast as the next was read, and a burst of 16
    never filled the line)."""
    import numpy as np
    from onnx import helper, numpy_helper, save

    weight = numpy_helper.from_array(
        np.random.default_rng(0).random((384, 384), dtype=np.float32) / 384, name="w"
    )
    names = ["x", *(f"h{i}" for i in range(192))]
    nodes = [helper.make_node("MatMul", [a, "w"], [b]) for a, b in itertools.pairwise(names)]
    nodes.append(helper.make_node("Identity", [names[-1]], ["y"]))
    graph = helper.make_graph(
        nodes,
        "slow",
        [helper.make_tensor_value_info("x", 1, [None, 384])],
        [helper.make_tensor_value_info("y", 1, [None, 384])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save(model, str(path))


def burst(url: str, count: int = 16, in_parts: bool = False) -> list[httpx.Response]:
    """Once the slow model at `url` is ready: `count` requests for it at once, their answers.
    `in_parts`: each body comes in two parts, the second once every request has been sent its
    first (so every request is under way, in the server's line or refused, before any runs,
    however the server happened to read them)."""
    import asyncio

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/v2/models/slow/ready").status_code == 200:
                break
        time.sleep(0.2)
    body = {"inputs": [{"name": "x", "shape": [64, 384], "datatype": "FP32",
                        "data": [0.5] * (64 * 384)}]}  # fmt: skip

    # Encoded once: encoding it per request, one after another, spread the burst out enough on
    # a fast moment that each request was answered before the next arrived.
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}

    async def together() -> list[httpx.Response]:
        begun = asyncio.Event()

        async def parts() -> AsyncIterator[bytes]:
            yield content[:10]
            await begun.wait()
            yield content[10:]

        async with httpx.AsyncClient(timeout=60) as client:
            infer = f"{url}/v2/models/slow/infer"
            sends = [
                asyncio.ensure_future(
                    client.post(infer, content=parts() if in_parts else content, headers=headers)
                )
                for _ in range(count)
            ]
            if in_parts:
                await asyncio.sleep(0.5)
                begun.set()
            return await asyncio.gather(*sends)

    return asyncio.run(together())


@pytest.mark.parametrize("proxy", ["", "haproxy"])
def test_overload_is_refused_with_retry_after_not_left_waiting(tmp_path: Path, proxy: str) -> None:
    """One replica taking one request at a time, a line of two: of a burst of 16 requests,
    those with no room are answered at once with 503 and Retry-After; the rest are served,
    each with its own answer; the refusals are counted. The same by the gateway alone and
    through HAProxy."""
    if proxy and shutil.which(proxy) is None:
        pytest.skip("haproxy is not installed")
    model = tmp_path / "model-v1"
    model.mkdir()
    slow_model(model / "model.onnx")
    port = free_port()
    DeploymentSpec(
        name="slow", model_dir=str(model), model_version="1", port=port,
        max_inflight_per_replica=1, max_queue=2, queue_timeout_s=30, proxy=proxy,
    ).write(tmp_path)  # fmt: skip
    write_private(tmp_path / ACCESS, render(True, {}))
    log = (tmp_path / "gateway.log").open("wb")
    gateway = subprocess.Popen(
        [sys.executable, "-m", "loom.serving.gateway", str(tmp_path)], stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        answers = burst(url)
        metrics = httpx.get(f"{url}/metrics").text
    finally:
        gateway.terminate()
        gateway.wait(30)
    said = (tmp_path / "gateway.log").read_text()
    assert ("through haproxy" in said) == bool(proxy), said
    busy = [a for a in answers if a.status_code == 503]
    served = [a for a in answers if a.status_code == 200]
    assert len(busy) + len(served) == 16
    assert busy and len(served) >= 3  # the one running and the two in line at least
    for answer in busy:
        assert answer.headers["retry-after"] == "1"
        assert answer.json()["error"].startswith("busy: 2 requests are waiting already")
    first = served[0].json()["outputs"][0]
    assert all(a.json()["outputs"][0] == first for a in served)
    assert (
        f'loom_deployment_requests_total{{code="503",deployment="slow"}} {len(busy)}.0' in metrics
    )


def test_a_bare_server_serves_in_turn_and_refuses_past_its_line(tmp_path: Path) -> None:
    """`loom serve` without a gateway: one request at a time, a line of two; of a burst of 16,
    the rest are answered at once with 503 and Retry-After, and the served get their answers."""
    model = tmp_path / "slow"
    model.mkdir()
    slow_model(model / "model.onnx")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "loom.serving", str(model), "--port", str(port),
         "--grpc-port", "off", "--max-inflight", "1", "--max-queue", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        answers = burst(f"http://127.0.0.1:{port}", in_parts=True)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    busy = [a for a in answers if a.status_code == 503]
    served = [a for a in answers if a.status_code == 200]
    assert len(busy) + len(served) == 16
    assert busy and len(served) >= 3, [a.status_code for a in answers]
    for answer in busy:
        assert answer.headers["retry-after"] == "1"
        assert answer.json()["error"] == "busy: 2 requests are waiting already; retry"
    first = served[0].json()["outputs"][0]
    assert all(a.json()["outputs"][0] == first for a in served)
    assert b"Traceback" not in err
