"""Who may call a deployment, with the real platform, gateway and replicas on loopback: the
owner's token or a deployment key (revoked: refused within seconds), anyone when public; the
replicas reachable only through the gateway, and no server secret in any of their environments;
no server path in what a caller or the owner is told of a failure."""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from loom.client import ClientError, LoomClient
from loom.domain.accounts import hash_token
from loom.store.db import Database
from loom.store.tables import Token
from tests.conftest import Server, eventually, register, stop_deployments

pytestmark = pytest.mark.integration

SECRET = "fake-secret-8b1d4f0e"  # stands for the server's cloud credentials
IMAGE = {
    "inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32", "data": [0.5] * 64}]
}


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, model_zip: bytes
) -> Iterator[tuple[Server, LoomClient]]:
    """One platform for the module, started with secrets in its environment."""
    home = tmp_path_factory.mktemp("keys") / "home"
    # exec'd, not forked: the test reads its /proc/PID/environ, which a fork keeps from pytest
    server = Server(home, fork=False, AWS_SECRET_ACCESS_KEY=SECRET, LOOM_EXTRA_SECRET=SECRET)
    server.start()
    try:
        with server.client() as client:
            register(client, model_zip)
            yield server, client
    finally:
        server.stop()
        stop_deployments(home)


@pytest.fixture(scope="module")
def guarded(platform: tuple[Server, LoomClient]) -> dict[str, Any]:
    """A private deployment, shared by the tests that only call it."""
    _server, client = platform
    client.deploy("guarded", "digits")
    return client.wait_deployment("guarded")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def infer(url: str, token: str | None = None) -> httpx.Response:
    return httpx.post(url, json=IMAGE, headers=bearer(token) if token else {}, timeout=30)


def test_a_token_is_required(platform: tuple[Server, LoomClient], guarded: dict[str, Any]) -> None:
    """Without a token, or with a wrong one, inference and /metrics are refused with 401, V2's
    error body and a Bearer challenge; the owner's token passes; health probes stay open."""
    server, _client = platform
    found = guarded
    assert found["public"] is False
    for response in (
        infer(found["urls"]["v2_infer"]),
        infer(found["urls"]["v2_infer"], "loom_not-a-token"),
        httpx.get(found["urls"]["metrics"]),
        httpx.post(found["urls"]["v1_predict"], json={"instances": [[0.0] * 64]}),
        httpx.get(f"{found['endpoint']}/v2/models/guarded"),
    ):
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == "Bearer"
        assert set(response.json()) == {"error"} and "token" in response.json()["error"]
        assert "not-a-token" not in response.text
    assert infer(found["urls"]["v2_infer"], server.admin_token).status_code == 200
    metrics = httpx.get(found["urls"]["metrics"], headers=bearer(server.admin_token))
    assert metrics.status_code == 200
    assert 'loom_deployment_requests_total{code="401",deployment="guarded"}' in metrics.text
    assert httpx.get(f"{found['endpoint']}/v2/health/ready").json() == {"ready": True}


def test_keys_work_until_revoked(
    platform: tuple[Server, LoomClient], guarded: dict[str, Any]
) -> None:
    """A deployment key passes at once and is listed (never its value) with its last use; once
    revoked it is refused within seconds; another user's token or another deployment's key
    never passes."""
    server, client = platform
    found = guarded
    created = client.create_deployment_key("guarded", "ci")
    key = created["key"]
    assert created["name"] == "ci" and key.startswith("lk_")
    assert infer(found["urls"]["v2_infer"], key).status_code == 200
    eventually(lambda: client.deployment_keys("guarded")[0]["last_used_at"] is not None)
    listed = client.deployment_keys("guarded")
    assert [(k["id"], k["name"]) for k in listed] == [(created["id"], "ci")]
    assert "key" not in listed[0] and listed[0]["created_at"]
    eve = client.add_user("eve-keys")["token"]
    assert infer(found["urls"]["v2_infer"], eve).status_code == 401
    client.deploy("other", "digits", min_replicas=0)
    other = client.create_deployment_key("other")["key"]
    assert infer(found["urls"]["v2_infer"], other).status_code == 401
    client.revoke_deployment_key("guarded", created["id"])
    took = eventually(lambda: infer(found["urls"]["v2_infer"], key).status_code == 401)
    assert took < 5
    assert client.deployment_keys("guarded") == []
    with pytest.raises(ClientError) as caught:
        client.revoke_deployment_key("guarded", created["id"])
    assert caught.value.status == 404
    with LoomClient(server.url, eve) as stranger, pytest.raises(ClientError) as caught:
        stranger.create_deployment_key("guarded")
    assert caught.value.status == 404
    client.delete_deployment("other")


def test_the_owners_tokens_are_followed(
    platform: tuple[Server, LoomClient], guarded: dict[str, Any]
) -> None:
    """A token the owner makes passes within seconds and stops passing within seconds once it
    is revoked or expires, with no call to the deployment's API (the supervisor renders the
    rules again)."""
    server, client = platform
    url = guarded["urls"]["v2_infer"]
    made = client.create_token("for-serving")
    eventually(lambda: infer(url, made["token"]).status_code == 200)
    client.revoke_token(made["id"])
    eventually(lambda: infer(url, made["token"]).status_code == 401)
    expiring = client.create_token("short")
    eventually(lambda: infer(url, expiring["token"]).status_code == 200)
    db = Database(server.database_url)
    with db.session() as session:  # its time runs out (the API offers no lifetime this short)
        session.get_one(Token, hash_token(expiring["token"])).expires_at = time.time()
    db.close()
    eventually(lambda: infer(url, expiring["token"]).status_code == 401)


def test_a_public_deployment_needs_no_token(platform: tuple[Server, LoomClient]) -> None:
    """Created public, it answers anyone, /metrics included; made private, it refuses callers
    without a token within seconds; public again, it answers them again."""
    _server, client = platform
    found = client.deploy("open", "digits", public=True)
    found = client.wait_deployment("open")
    assert found["public"] is True
    assert infer(found["urls"]["v2_infer"]).status_code == 200
    assert httpx.get(found["urls"]["metrics"]).status_code == 200
    assert client.update_deployment("open", public=False)["public"] is False
    eventually(lambda: infer(found["urls"]["v2_infer"]).status_code == 401, timeout=5)
    client.update_deployment("open", public=True)
    eventually(lambda: infer(found["urls"]["v2_infer"]).status_code == 200, timeout=5)
    client.delete_deployment("open")


def test_tritonclient_sends_the_token(
    platform: tuple[Server, LoomClient], guarded: dict[str, Any]
) -> None:
    """Triton's client, given an Authorization header, gets its answer; without it, a 401."""
    server, _client = platform
    found = guarded
    triton = httpclient.InferenceServerClient(url=found["endpoint"].removeprefix("http://"))
    headers = bearer(server.admin_token)
    images = np.random.default_rng(5).random((2, 1, 8, 8), dtype=np.float32)
    tensor = httpclient.InferInput("image", list(images.shape), "FP32")
    tensor.set_data_from_numpy(images, binary_data=True)
    assert triton.is_model_ready("guarded", headers=headers)
    result = triton.infer("guarded", [tensor], headers=headers)
    assert result.as_numpy("logits").shape == (2, 10)
    with pytest.raises(InferenceServerException) as caught:
        triton.infer("guarded", [tensor])
    assert "401" in str(caught.value.status()) or "token" in str(caught.value)
    triton.close()


def test_replicas_listen_only_on_private_sockets(platform: tuple[Server, LoomClient]) -> None:
    """A replica has no TCP port at all, only unix sockets in a folder of mode 0700 (REST, and
    gRPC for the proxy); the gateway, or the proxy it runs, is the one listening on TCP (REST
    and gRPC)."""
    server, client = platform
    client.deploy("private", "digits", min_replicas=2, max_replicas=2)
    found = wait_for(client, "private", lambda d: d["replicas"]["ready"] == 2)
    gateway = int(_folder(server, "private").joinpath("gateway.pid").read_text())
    for replica in found["replica_list"]:
        top = psutil.Process(replica["pid"])  # in a sandbox: its monitor; the server below
        processes = [top, *top.children(recursive=True)]
        assert [c for p in processes for c in p.net_connections(kind="inet")] == []
        sockets = {
            Path(c.laddr).name for p in processes for c in p.net_connections(kind="unix") if c.laddr
        }
        own = f"replica-{replica['id']}"
        assert f"{own}.sock" in sockets  # listening, and the gateway's (or the proxy's)
        assert sockets <= {f"{own}.sock", f"{own}.grpc.sock"}
    run = _folder(server, "private") / "run"
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    replicas = sorted(p.name for p in run.iterdir() if p.name.startswith("replica-"))
    assert replicas in (
        ["replica-1.sock", "replica-2.sock"],
        ["replica-1.grpc.sock", "replica-1.sock", "replica-2.grpc.sock", "replica-2.sock"],
    )
    front = psutil.Process(gateway)
    listening = [c for p in [front, *front.children()] for c in p.net_connections(kind="inet")]
    assert sorted(c.laddr.port for c in listening if c.status == psutil.CONN_LISTEN) == sorted(
        int(found[key].rsplit(":", 1)[1]) for key in ("endpoint", "grpc_endpoint")
    )
    client.delete_deployment("private")


def test_a_replica_runs_sandboxed(platform: tuple[Server, LoomClient]) -> None:
    """A replica (a user's model) runs as its deployment's own uid, on a network of its own
    (reached by its unix socket), and its view of the files holds its model but not the
    platform's token, key or database, its deployment's access rules or the host's
    /etc/shadow; its cgroup goes with it."""
    server, client = platform
    if not client.capacity()["isolation"]["confined"]:
        pytest.skip("this machine cannot sandbox (needs root and bubblewrap)")
    client.deploy("boxed", "digits")
    found = wait_for(client, "boxed", lambda d: d["replicas"]["ready"] == 1)
    folder = _folder(server, "boxed")
    model = next(folder.glob("model-v*"))
    top = psutil.Process(found["replica_list"][0]["pid"])
    served = next(p for p in top.children(recursive=True) if p.name() != "bwrap")
    assert served.uids().real != 0
    view = Path(f"/proc/{served.pid}/root")
    assert (view / str(model).lstrip("/")).is_dir()
    for hidden in (server.home / "token", server.home / "secret.key", server.home / "loom.db"):
        assert not (view / str(hidden).lstrip("/")).exists(), hidden
    assert not (view / str(folder / "access.json").lstrip("/")).exists()
    assert (view / "proc" / str(os.getpid())).exists() is False  # its own pid namespace
    assert not (view / "etc" / "shadow").exists()  # of the host's /etc, only what programs read
    network = os.readlink(f"/proc/{served.pid}/ns/net")
    if client.capacity()["isolation"].get("network"):  # an empty network of its own
        assert network != os.readlink("/proc/self/ns/net")
    client.delete_deployment("boxed")
    deadline = time.monotonic() + 20
    while served.is_running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not served.is_running()


def _folder(server: Server, name: str) -> Path:
    for spec in server.home.glob("deployments/*/spec.json"):
        if f'"name": "{name}"' in spec.read_text():
            return spec.parent
    raise AssertionError(f"no folder for deployment {name}")


def test_no_server_secret_reaches_gateways_or_replicas(
    platform: tuple[Server, LoomClient], guarded: dict[str, Any]
) -> None:
    """The platform runs with AWS_SECRET_ACCESS_KEY and LOOM_* settings; the gateway's and the
    replicas' environments hold neither, only allow-listed variables (and, for a replica, the
    variables that pin it to its GPUs: none here)."""
    server, client = platform
    found = client.deployment(guarded["name"])
    platform_env = _environ(server.process.pid if server.process else 0)
    assert platform_env["AWS_SECRET_ACCESS_KEY"] == SECRET
    gateway = int(_folder(server, "guarded").joinpath("gateway.pid").read_text())
    replicas = [r["pid"] for r in found["replica_list"]]
    pinning = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}
    for pid in [gateway, *replicas]:
        env = _environ(pid)
        assert SECRET not in "".join(env.values())
        assert not [k for k in env if k.startswith(("LOOM_", "AWS_"))]
        assert "PATH" in env
        assert set(env) - pinning <= set(platform_env)
        if pid in replicas:
            assert env["CUDA_VISIBLE_DEVICES"] == ""  # a CPU replica sees no GPU


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def test_the_owner_is_told_why_without_server_paths(platform: tuple[Server, LoomClient]) -> None:
    """A replica that cannot load its model: the owner reads why (its last log lines), with no
    path of the server's in them."""
    server, client = platform
    client.deploy("broken", "digits", min_replicas=0)
    found = client.wait_deployment("broken", states=("scaled to zero",))
    (_folder(server, "broken") / "model-v1" / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(httpx.TimeoutException):  # it waits for a replica that never comes
        httpx.post(found["urls"]["v2_infer"], json=IMAGE, headers=bearer(server.admin_token),
                   timeout=1)  # fmt: skip
    view = wait_for(client, "broken", lambda d: bool(d["message"]))
    assert "replica 1" in view["message"]
    assert str(server.home) not in view["message"]
    assert str(Path(shutil.__file__).parent) not in view["message"]
    client.delete_deployment("broken")


def wait_for(client: LoomClient, name: str, check: Callable[[dict[str, Any]], bool]) -> Any:
    found: dict[str, Any] = {}

    def seen() -> bool:
        found.update(client.deployment(name))
        return check(found)

    eventually(seen, timeout=60)
    return found


def test_api_errors_tell_no_server_path(server: Server, model_zip: bytes) -> None:
    """A deployment whose files cannot be written is a 503 naming the deployment and why,
    not a 500, and not where the server keeps its files."""
    with server.client() as client:
        register(client, model_zip)
        (server.home / "deployments").write_text("in the way")
        with pytest.raises(ClientError) as caught:
            client.deploy("nowhere", "digits")
    assert caught.value.status == 503
    assert "deployment 'nowhere'" in caught.value.message
    assert str(server.home) not in caught.value.message
    assert "/" not in caught.value.message


def test_an_unconfined_gateway_is_restarted_confined(tmp_path: Path, model_zip: bytes) -> None:
    """A deployment made while replicas ran unconfined (LOOM_ISOLATION=off) gets a new gateway
    when the platform next starts with the sandbox: no replica stays unconfined."""
    home = tmp_path / "home"
    before = Server(home, LOOM_ISOLATION="off").start()
    try:
        with before.client() as client:
            register(client, model_zip)
            client.deploy("legacy", "digits")
            found = wait_for(client, "legacy", lambda d: d["replicas"]["ready"] == 1)
        assert psutil.Process(found["replica_list"][0]["pid"]).name() != "bwrap"
    finally:
        before.stop()
    after = Server(home).start()
    try:
        with after.client() as client:
            if not client.capacity()["isolation"]["confined"]:
                pytest.skip("this machine cannot sandbox (needs root and bubblewrap)")
            # The old gateway's status may still name its replica, gone since: not an error.
            found = wait_for(client, "legacy", _confined)
            assert infer(found["urls"]["v2_infer"], after.admin_token).status_code == 200
    finally:
        after.stop()
        stop_deployments(home)


def _confined(view: dict[str, Any]) -> bool:
    """The deployment has a ready replica, started through the sandbox."""
    try:
        ready = view["replicas"]["ready"] == 1
        return ready and psutil.Process(view["replica_list"][0]["pid"]).name() == "bwrap"
    except (psutil.Error, IndexError, KeyError):
        return False
