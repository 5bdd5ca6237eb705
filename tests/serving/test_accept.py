"""A server's listener on uvloop takes up every connection waiting at once (libuv's own takes
one a turn of the loop: on a saturated server, each turn parsing every request, 64 callers
connecting at once waited up to 1.5 s)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from loom.serving.accept import Listener
from tests.conftest import free_port
from tests.serving.test_rest import identity_model

uvloop = pytest.importorskip("uvloop")
CALLERS = 32


class Made(asyncio.Protocol):
    made: ClassVar[list[asyncio.BaseTransport]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        Made.made.append(transport)


async def _taken_within(turns: int, serve: Callable[[], Awaitable[int]]) -> int:
    """How many of CALLERS connections (all waiting in the kernel's queue) the server has
    taken up after `turns` turns of the loop."""
    Made.made = []
    port = await serve()
    callers = [socket.create_connection(("127.0.0.1", port)) for _ in range(CALLERS)]
    for _ in range(turns):
        await asyncio.sleep(0)
    taken = len(Made.made)
    for caller in callers:
        caller.close()
    for transport in Made.made:
        transport.close()
    return taken


def test_every_waiting_connection_is_taken_up_in_a_few_turns() -> None:
    async def greedy() -> int:
        listener = Listener("127.0.0.1", 0, 128)
        listener.start(Made)
        return int(listener.sockets[0].getsockname()[1])

    async def libuvs() -> int:  # for contrast: what the loop's own server does
        server = await asyncio.get_running_loop().create_server(Made, "127.0.0.1", 0)
        return int(server.sockets[0].getsockname()[1])

    assert uvloop.run(_taken_within(6, greedy)) == CALLERS
    assert uvloop.run(_taken_within(6, libuvs)) < CALLERS


def test_a_bare_server_answers_through_its_listener(tmp_path: Path) -> None:
    """`loom serve` over TCP answers through the listener; a port already taken is said
    plainly, without a traceback."""
    identity_model(tmp_path / "m.onnx", ["FP32"])
    port = free_port()
    command = [sys.executable, "-m", "loom.serving", str(tmp_path / "m.onnx"), "--name", "m",
               "--port", str(port), "--grpc-port", "off"]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body = {"inputs": [{"name": "in_FP32", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}
        answer = None
        for _ in range(400):
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}/v2/models/m/infer", json=body)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert answer is not None and answer.json()["outputs"][0]["data"] == [1, 2]
        taken = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert taken.returncode != 0, taken.stdout
        assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr
        assert "Traceback" not in taken.stderr
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert "Traceback" not in err
