"""The compiled data path: HAProxy configured and steered by a deployment's gateway, in front of
replicas that echo what reached them (unix-socket HTTP servers of the test's own), so that what
the proxy passes, strips, splits, refuses and logs is seen without a model."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import shutil
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from loom.domain.accounts import hash_token
from loom.serving.access import ACCESS, render
from loom.serving.gateway import Gateway
from loom.serving.http1 import MessageReader, encode_response
from loom.serving.proxy import GATEWAY_SOCKET, Proxy, unproxied
from loom.serving.proxy_config import GRPC, ProxyPlan, flags, server_line
from loom.serving.proxy_config import render as render_config
from loom.serving.replicas import Replica, canary_generation, generation
from loom.serving.spec import DeploymentSpec
from loom.store.private import write_private
from tests.conftest import free_port

HAPROXY = shutil.which("haproxy")
needs_haproxy = pytest.mark.skipif(HAPROXY is None, reason="haproxy is not installed")
TOKEN = "loom_test-token"


def plan(grpc: bool = True) -> ProxyPlan:
    return ProxyPlan(
        host="127.0.0.1", port=8080, grpc_port=8081 if grpc else None,
        admin_socket="run/proxy.sock", access_map="run/access.map", flags_map="run/flags.map",
        gateway_socket="run/gateway.sock", gateway_grpc_socket="run/gateway-grpc.sock",
        queue_timeout_s=5, ready_timeout_s=120,
    )  # fmt: skip


@needs_haproxy
def test_the_configuration_is_one_haproxy_accepts(tmp_path: Path) -> None:
    """The rendered configuration, REST and gRPC, passes `haproxy -c`, with the maps of a
    public deployment with a canary (HAProxy reads them as it loads the configuration)."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "access.map").write_text(f"{hash_token(TOKEN)} k0\n")
    public = flags(True, 25, 2)
    (tmp_path / "run" / "flags.map").write_text("".join(f"{k} {v}\n" for k, v in public.items()))
    (tmp_path / "proxy.cfg").write_text(render_config(plan()))
    checked = subprocess.run(
        [str(HAPROXY), "-c", "-f", "proxy.cfg"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_flags_and_server_lines() -> None:
    """The flags map says public, the canary's share in ten-thousandths and the line's length;
    a gRPC server is reached over HTTP/2."""
    assert flags(False, 12.5, 7) == {"canary_share": "1250", "max_queue": "7"}
    assert flags(True, 0, 1)["public"] == "1"
    assert server_line("run/r.sock", 4, GRPC).endswith("proto h2")
    assert "maxconn 4" in server_line("run/r.sock", 4, "rest")
    assert "pool-max-conn -1" in server_line("run/r.sock", 4, "rest")


def test_what_the_gateway_keeps_serving_itself(tmp_path: Path) -> None:
    """Graphs, transformers and HTTPS stay on the gateway's own path, and so does everything
    when the platform runs without a proxy."""
    spec = DeploymentSpec(name="d", model_dir="m", model_version="1", proxy="haproxy")
    assert unproxied(DeploymentSpec(name="d", model_dir="m", model_version="1")) is not None
    assert "transformer" in str(unproxied(_with(spec, transformer_dir="t")))
    assert "HTTPS" in str(unproxied(_with(spec, certfile="c.pem")))
    if HAPROXY:
        assert unproxied(spec) is None


def _with(spec: DeploymentSpec, **changes: Any) -> DeploymentSpec:
    from dataclasses import replace

    return replace(spec, **changes)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
    """A replica (or the gateway's own endpoint) that answers what reached it."""
    messages = MessageReader(reader, max_body=2**20)
    with contextlib.suppress(Exception):
        while (request := await messages.next()) is not None:
            if request.target == "/slow":
                await asyncio.sleep(1.0)
            seen = {"by": name, "headers": {k.decode(): v.decode() for k, v in request.headers}}
            writer.write(encode_response(200, orjson.dumps(seen)))
            await writer.drain()
    writer.close()


class Setup:
    def __init__(self, gateway: Gateway, proxy: Proxy, url: str) -> None:
        self.gateway, self.proxy, self.url = gateway, proxy, url


@contextlib.asynccontextmanager
async def proxied(
    tmp_path: Path, monitoring: dict[str, Any] | None = None, **changes: Any
) -> AsyncIterator[Setup]:
    """A gateway object (not running its loop) steering a real HAProxy in front of three echo
    replicas (two of the main version, one canary) and an echo standing for its own endpoint."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    spec = DeploymentSpec(
        name="echo", model_dir=str(tmp_path / "v1"), model_version="1", port=free_port(),
        canary_model_dir=str(tmp_path / "v2"), canary_version="2", canary_percent=25.0,
        max_inflight_per_replica=1, max_queue=2, proxy="haproxy", monitoring=monitoring,
        **changes,
    )  # fmt: skip
    write_private(tmp_path / ACCESS, render(False, {hash_token(TOKEN): "token"}))
    gateway = Gateway(tmp_path, spec)
    servers = []
    for number, serves in ((1, generation(spec)), (2, generation(spec)), (3, None)):
        socket = f"run/replica-{number}.sock"
        replica = Replica(number, str(tmp_path / socket), serves or canary_generation(spec),
                          tmp_path / f"replica-{number}.log", state="ready")  # fmt: skip
        gateway.replicas.append(replica)
        servers.append(await asyncio.start_unix_server(
            lambda r, w, n=f"replica-{number}": _echo(r, w, n), str(tmp_path / socket)
        ))  # fmt: skip
    servers.append(await asyncio.start_unix_server(
        lambda r, w: _echo(r, w, "gateway"), str(tmp_path / GATEWAY_SOCKET)
    ))  # fmt: skip
    proxy = Proxy(gateway, spec.port, None)
    await proxy.start()
    gateway.front = proxy
    await proxy.sync()
    try:
        yield Setup(gateway, proxy, f"http://127.0.0.1:{spec.port}")
    finally:
        await proxy.stop(5)
        for server in servers:
            server.close()


def _bearer(token: str = TOKEN) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "cookie": "c=1"}


@needs_haproxy
def test_a_known_token_reaches_a_replica_without_its_credentials(tmp_path: Path) -> None:
    """A request with a token the deployment accepts goes to a replica, which sees neither the
    token nor the cookie; an unknown token, no token and the health path go to the gateway with
    their headers whole; the log lines count the requests and the key's use."""
    asyncio.run(_a_known_token_reaches_a_replica_without_its_credentials(tmp_path))


async def _a_known_token_reaches_a_replica_without_its_credentials(tmp_path: Path) -> None:
    async with proxied(tmp_path) as setup:
        async with httpx.AsyncClient(base_url=setup.url) as client:
            passed = (await client.post("/v2/models/echo/infer", headers=_bearer())).json()
            unknown = (await client.post("/v2/models/echo/infer", headers=_bearer("nope"))).json()
            bare = (await client.post("/v2/models/echo/infer")).json()
            health = (await client.get("/v2/health/ready", headers=_bearer())).json()
        assert passed["by"].startswith("replica-")
        assert not {"authorization", "cookie"} & set(passed["headers"])
        assert unknown["by"] == "gateway" and unknown["headers"]["authorization"] == "Bearer nope"
        assert bare["by"] == "gateway"
        assert health["by"] == "gateway" and "authorization" in health["headers"]
        await _logged(setup, 1)
        assert setup.gateway.requests == {200: 1}  # the gateway counts what it answers itself
        assert setup.gateway.access.used.keys() == {"token"}


@needs_haproxy
def test_the_canary_takes_its_share_and_balancing_uses_both_replicas(tmp_path: Path) -> None:
    """Of 400 requests one after the other, about a quarter reach the canary's replica, the
    rest are spread over the main version's two; the counters by version agree."""
    asyncio.run(_the_canary_takes_its_share_and_balancing_uses_both_replicas(tmp_path))


async def _the_canary_takes_its_share_and_balancing_uses_both_replicas(tmp_path: Path) -> None:
    async with proxied(tmp_path) as setup:
        async with httpx.AsyncClient(base_url=setup.url) as client:
            answers = [
                await client.post("/v2/models/echo/infer", headers=_bearer()) for _ in range(400)
            ]
        by = Counter(a.json()["by"] for a in answers)
        assert sum(by.values()) == 400
        assert 50 <= by["replica-3"] <= 150, by
        assert by["replica-1"] and by["replica-2"], by
        await _logged(setup, 400)
        versions = setup.gateway.by_version
        assert versions.get(("2", 200), 0) == by["replica-3"]
        # the replicas' connections are kept and used again, not opened per request
        stats = await setup.proxy.command("show stat")
        rows = csv.DictReader(io.StringIO(stats.lstrip("# ")))
        main = next(r for r in rows if r["pxname"] == "main" and r["svname"] == "BACKEND")
        assert int(main["reuse"]) > int(main["connect"]), main


@needs_haproxy
def test_haproxy_runs_on_the_cpus_it_is_given(tmp_path: Path) -> None:
    """`LOOM_SERVING_PROXY_CPUS` (the spec's `proxy_cpus`): HAProxy runs on those CPUs, away
    from the replicas', whatever the gateway's own; a CPU the machine lacks is ignored."""
    import os

    last = (os.cpu_count() or 1) - 1

    async def placed() -> set[int]:
        async with proxied(tmp_path / "a", proxy_cpus=[last, 4096]) as setup:
            process = setup.proxy.process
            assert process is not None
            return os.sched_getaffinity(process.pid)

    (tmp_path / "a").mkdir()
    assert asyncio.run(placed()) == {last}


@needs_haproxy
def test_past_the_line_a_request_is_refused_at_once_with_retry_after(tmp_path: Path) -> None:
    """Each replica takes one request at a time and two wait: a burst of slow requests gets
    503s with Retry-After, worded as the gateway words them, and the rest are served."""
    asyncio.run(_past_the_line_a_request_is_refused_at_once_with_retry_after(tmp_path))


async def _past_the_line_a_request_is_refused_at_once_with_retry_after(tmp_path: Path) -> None:
    async with proxied(tmp_path) as setup:
        setup.gateway.spec = _with(setup.gateway.spec, canary_percent=0.0)
        await setup.proxy.sync()
        async with httpx.AsyncClient(base_url=setup.url, timeout=30) as client:
            answers = await asyncio.gather(
                *(client.post("/slow", headers=_bearer()) for _ in range(10))
            )
        busy = [a for a in answers if a.status_code == 503]
        assert busy and len(busy) < 10
        assert all(a.headers["retry-after"] == "1" for a in busy)
        assert busy[0].json()["error"] == "busy: 2 requests are waiting already; retry"


@needs_haproxy
def test_a_replica_taken_out_gets_nothing_new_and_none_sends_to_the_gateway(tmp_path: Path) -> None:
    """A drained replica gets no more requests; with none left ready, requests go to the
    gateway (which holds them while the deployment wakes)."""
    asyncio.run(_a_replica_taken_out_gets_nothing_new_and_none_sends_to_the_gateway(tmp_path))


async def _a_replica_taken_out_gets_nothing_new_and_none_sends_to_the_gateway(
    tmp_path: Path,
) -> None:
    async with proxied(tmp_path) as setup:
        gone = setup.gateway.replicas[0]
        await setup.proxy.drained(gone, 5)
        async with httpx.AsyncClient(base_url=setup.url) as client:
            seen = {(await client.post("/x", headers=_bearer())).json()["by"] for _ in range(20)}
            assert "replica-1" not in seen
            setup.gateway.replicas.clear()
            await setup.proxy.sync()
            woke = (await client.post("/x", headers=_bearer())).json()
        assert woke["by"] == "gateway" and "authorization" in woke["headers"]


async def _logged(setup: Setup, count: int) -> None:
    """Wait until the proxy's log has counted `count` requests."""
    for _ in range(100):
        setup.proxy.read_log()  # the gateway's tick does this
        if sum(setup.gateway.requests.values()) >= count:
            return
        await asyncio.sleep(0.05)


@needs_haproxy
def test_a_watched_deployments_bodies_reach_its_monitor_through_the_proxy(tmp_path: Path) -> None:
    """Monitored, the deployment stays on the proxy: an inference request's body reaches the
    detector's feed and, sampled, the payload log with the replica's answer (never a token); a
    body too large for a log line goes to the gateway (which watches what it answers itself);
    other paths are not watched; the payload log's share follows the monitoring settings."""
    asyncio.run(_a_watched_deployments_bodies_reach_its_monitor_through_the_proxy(tmp_path))


async def _a_watched_deployments_bodies_reach_its_monitor_through_the_proxy(
    tmp_path: Path,
) -> None:
    from loom.serving.payloads import read_payloads
    from loom.serving.proxy_config import WATCHED_REQUEST

    watched = {"drift": True, "payloads": {"rate": 1.0, "retention_days": 1}}
    async with proxied(tmp_path, watched) as setup:
        monitor = setup.gateway.monitor
        assert monitor is not None and setup.proxy.flags["payload_ppm"] == "1000000"
        fed: list[tuple[str, bytes]] = []
        monitor.state = "watching"  # as when its detector is ready (none runs here)
        monitor._send = lambda _id, version, _now, body: fed.append((version, body))  # type: ignore[method-assign]
        small = orjson.dumps({"inputs": [{"name": "x", "shape": [1, 3], "data": [1, 2, 3]}]})
        large = b'{"pad": "' + b"x" * WATCHED_REQUEST + b'"}'
        async with httpx.AsyncClient(base_url=setup.url) as client:
            answer = await client.post("/v2/models/echo/infer", content=small, headers=_bearer())
            big = await client.post("/v2/models/echo/infer", content=large, headers=_bearer())
            other = await client.post("/x", content=small, headers=_bearer())
            monitor.payloads.rate = 0.0  # type: ignore[union-attr]
            await setup.proxy.sync()
            unsampled = await client.post(
                "/v1/models/echo:predict", content=small, headers=_bearer()
            )
        assert answer.json()["by"].startswith("replica-")
        assert big.json()["by"] == "gateway" and "authorization" in big.json()["headers"]
        assert other.json()["by"].startswith("replica-")
        assert unsampled.json()["by"].startswith("replica-")
        await _logged(setup, 3)
        assert [body for _, body in fed] == [small, small]
        assert {version for version, _ in fed} <= {"1", "2"}
        monitor.payloads.flush()  # type: ignore[union-attr]
        logged = read_payloads(setup.gateway.folder)
        assert len(logged) == 1, logged
        assert logged[0]["request"] == small.decode() and logged[0]["path"].endswith("/infer")
        assert orjson.loads(logged[0]["response"]) == answer.json()
        kept = "".join(p.read_text() for p in (tmp_path / "payloads").iterdir())
        assert TOKEN not in kept and "c=1" not in kept


@needs_haproxy
def test_monitoring_turned_on_later_watches_the_proxys_requests(tmp_path: Path) -> None:
    """A deployment that started unwatched on the proxy: monitoring turned on by an update
    (a new monitor, pushed to HAProxy within a tick) sees the next requests' bodies."""
    asyncio.run(_monitoring_turned_on_later_watches_the_proxys_requests(tmp_path))


async def _monitoring_turned_on_later_watches_the_proxys_requests(tmp_path: Path) -> None:
    from loom.serving.monitor import Monitor

    async with proxied(tmp_path) as setup:
        assert setup.gateway.monitor is None and "watch" not in setup.proxy.flags
        body = b'{"instances": [[1, 2, 3]]}'
        async with httpx.AsyncClient(base_url=setup.url) as client:
            await client.post("/v1/models/echo:predict", content=body, headers=_bearer())
            await _logged(setup, 1)
            spec = _with(setup.gateway.spec, monitoring={"drift": True})
            setup.gateway.spec = spec
            monitor = Monitor.of(setup.gateway.folder, spec)
            assert monitor is not None
            fed: list[bytes] = []
            monitor.state = "watching"
            monitor._send = lambda _id, _version, _now, sent: fed.append(sent)  # type: ignore[method-assign]
            setup.gateway.monitor = monitor
            await setup.proxy.sync()
            await client.post("/v1/models/echo:predict", content=body, headers=_bearer())
        await _logged(setup, 2)
        assert fed == [body]


@needs_haproxy
def test_grpc_calls_reuse_the_replicas_connections_and_a_freed_slot_serves_the_next(
    tmp_path: Path,
) -> None:
    """gRPC through the proxy goes to real replicas over the slots declared in its
    configuration, which keep their HTTP/2 connections (a server added at run time opened one
    per call); a drained replica's slot, once its connections are closed, serves the next
    replica, and the drained one gets nothing more."""
    asyncio.run(_grpc_reuses_connections_and_slots(tmp_path))


async def _grpc_reuses_connections_and_slots(tmp_path: Path) -> None:
    import sys

    import numpy as np
    import tritonclient.grpc as grpcclient

    from tests.serving.test_rest import identity_model

    identity_model(tmp_path / "m.onnx", ["FP32"])
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    spec = DeploymentSpec(
        name="m", model_dir=str(tmp_path), model_version="1", port=free_port(),
        grpc_port=free_port(), proxy="haproxy", max_inflight_per_replica=4,
    )  # fmt: skip
    write_private(tmp_path / ACCESS, render(False, {hash_token(TOKEN): "token"}))
    gateway = Gateway(tmp_path, spec)
    processes = []
    for number in (1, 2, 3):
        socket = f"run/replica-{number}.sock"
        processes.append(await asyncio.create_subprocess_exec(
            sys.executable, "-m", "loom.serving", str(tmp_path / "m.onnx"), "--name", "m",
            "--uds", socket, "--grpc-uds", f"run/replica-{number}.grpc.sock", cwd=tmp_path,
        ))  # fmt: skip
        log = tmp_path / f"replica-{number}.log"
        gateway.replicas.append(Replica(number, socket, generation(spec), log, state="ready"))
    third = gateway.replicas.pop()
    proxy = Proxy(gateway, spec.port, spec.grpc_port)
    try:
        for _ in range(200):  # the replicas load the model
            if all((run / f"replica-{n}.grpc.sock").exists() for n in (1, 2, 3)):
                break
            await asyncio.sleep(0.05)
        await proxy.start()
        gateway.front = proxy
        await proxy.sync()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{spec.grpc_port}")
        tensor = grpcclient.InferInput("in_FP32", [3], "FP32")
        tensor.set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32))

        def calls(n: int) -> None:
            for _ in range(n):
                answer = client.infer("m", [tensor], headers={"authorization": f"Bearer {TOKEN}"})
                assert answer.as_numpy("out_FP32").tolist() == [1, 2, 3]

        await asyncio.to_thread(calls, 60)
        stats = await _stats(proxy)
        grpc_main = stats[("grpc_main", "BACKEND")]
        assert int(grpc_main["stot"]) == 60
        assert int(grpc_main["reuse"]) > int(grpc_main["connect"]), grpc_main
        used = {k for k, row in stats.items() if k[0] == "grpc_main" and int(row["stot"])}
        assert used == {("grpc_main", "BACKEND"), ("grpc_main", "s0"), ("grpc_main", "s1")}
        await proxy.drained(gateway.replicas.pop(0), 5)
        for _ in range(100):  # s0's connection to the first replica closes: the slot is free
            await proxy.sync()
            if "grpc_main/r1" not in proxy.physical:
                break
            await asyncio.sleep(0.05)
        gateway.replicas.append(third)
        await proxy.sync()
        assert proxy.physical.get("grpc_main/r3") == "grpc_main/s0", proxy.physical
        served = await _served(tmp_path)
        await asyncio.to_thread(calls, 40)
        now = await _served(tmp_path)
        assert now[1] == served[1] and now[3] > served[3] and now[2] > served[2], (served, now)
        client.close()
    finally:
        await proxy.stop(5)
        for process in processes:
            process.terminate()
            await process.wait()


async def _stats(proxy: Proxy) -> dict[tuple[str, str], dict[str, str]]:
    rows = csv.DictReader(io.StringIO((await proxy.command("show stat")).lstrip("# ")))
    return {(r["pxname"], r["svname"]): r for r in rows}


async def _served(folder: Path) -> dict[int, float]:
    """Each replica's inference count, from its own metrics (over its REST socket)."""
    found = {}
    for number in (1, 2, 3):
        transport = httpx.AsyncHTTPTransport(uds=str(folder / f"run/replica-{number}.sock"))
        async with httpx.AsyncClient(transport=transport) as client:
            text = (await client.get("http://replica/metrics")).text
        found[number] = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("loom_inference_requests_total{")
        )
    return found
