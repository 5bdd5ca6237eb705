"""The model server's own HTTP/1 protocol on its hot route (V2 inference, answered without
ASGI), over raw sockets: the parts of HTTP/1.1 a client may use there."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.serving.test_rest import TYPES, ModelServer, identity_model

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    path = tmp_path_factory.mktemp("models") / "identity.onnx"
    identity_model(path)
    server = ModelServer(path, "identity")
    yield server
    assert "Traceback" not in server.stop()


def _infer_body(request_id: str) -> bytes:
    inputs = [
        {"name": f"in_{n}", "shape": [2], "datatype": t, "data": d} for n, (t, d) in TYPES.items()
    ]
    return orjson.dumps({"id": request_id, "inputs": inputs})


def _head(path: str, body: bytes, *lines: str, version: str = "1.1") -> bytes:
    head = [f"POST {path} HTTP/{version}", "Host: x", f"Content-Length: {len(body)}", *lines]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


def _read_response(stream: Any) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response off a socket's file: status, headers, body (by its length)."""
    status = int(stream.readline().split()[1])
    headers: dict[str, str] = {}
    while (line := stream.readline().decode("latin-1").strip()) != "":
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, stream.read(int(headers["content-length"]))


def test_the_hot_route_keeps_to_http1(identity: ModelServer) -> None:
    """The server's HTTP/1 protocol answers V2 inference requests itself, without ASGI; the
    rest of HTTP/1.1 holds on that route: pipelined requests answered in order (the hot route
    and another, one behind the other), a body in pieces or chunked, `Connection: close` and
    HTTP/1.0 (the connection closed after the answer), `Expect: 100-continue`, and a client
    gone in the middle of a body."""
    path = "/v2/models/identity/infer"
    first, second = _infer_body("one"), _infer_body("second")
    # a request's own head: the second says its JSON is its whole body (binary extension, no
    # binary part), which the first, shorter, would fail on if it were read with the second
    binary = f"Inference-Header-Content-Length: {len(second)}"

    def connect() -> tuple[socket.socket, Any]:
        sock = socket.create_connection(("127.0.0.1", identity.port), timeout=10)
        return sock, sock.makefile("rb")

    sock, stream = connect()
    with sock, stream:
        # three pipelined requests in one write: an inference, a metadata request, another
        # inference (the last head read before the first is answered)
        sock.sendall(
            _head(path, first) + first
            + b"GET /v2/models/identity HTTP/1.1\r\nHost: x\r\n\r\n"
            + _head(path, second, binary) + second
        )  # fmt: skip
        answers = [_read_response(stream) for _ in range(3)]
        assert [a[0] for a in answers] == [200, 200, 200]
        found = [orjson.loads(a[2]) for a in answers]
        assert (found[0]["id"], found[1]["name"], found[2]["id"]) == ("one", "identity", "second")
        # a body in pieces, then a chunked one, on the same connection
        sock.sendall(_head(path, first) + first[:100])
        time.sleep(0.2)
        sock.sendall(first[100:])
        assert orjson.loads(_read_response(stream)[2])["id"] == "one"
        chunked = f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        pieces = [second[:50], second[50:]]
        sock.sendall(
            chunked.encode()
            + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
            + b"0\r\n\r\n"
        )
        assert orjson.loads(_read_response(stream)[2])["id"] == "second"
        # a bad body: 400 with the error, and the connection goes on
        sock.sendall(_head(path, b"{nope") + b"{nope")
        status, _, body = _read_response(stream)
        assert status == 400 and "not valid JSON" in orjson.loads(body)["error"]
        # Expect: 100-continue (the ASGI way): the interim answer, then the answer
        sock.sendall(_head(path, first, "Expect: 100-continue"))
        assert stream.readline().startswith(b"HTTP/1.1 100")
        assert stream.readline() == b"\r\n"
        sock.sendall(first)
        assert orjson.loads(_read_response(stream)[2])["id"] == "one"
        # Connection: close, then nothing more
        sock.sendall(_head(path, second, "Connection: close") + second)
        status, headers, body = _read_response(stream)
        assert (status, headers.get("connection"), orjson.loads(body)["id"]) == (
            200, "close", "second",
        )  # fmt: skip
        assert stream.read() == b""
    sock, stream = connect()
    with sock, stream:  # HTTP/1.0: the answer, then the end of the connection
        sock.sendall(_head(path, first, version="1.0") + first)
        assert orjson.loads(_read_response(stream)[2])["id"] == "one"
        assert stream.read() == b""
    sock, stream = connect()
    with sock, stream:  # gone in the middle of a body
        sock.sendall(_head(path, first) + first[:10])
    answer = httpx.post(f"{identity.url}{path}", content=second).json()
    assert answer["id"] == "second"  # and the server goes on
