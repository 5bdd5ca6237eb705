"""Deployments with the real platform, gateway and replica processes on loopback: deploy a
registered model, answer over V2 and V1 with the right predictions, scale with the load (to zero
and back), replace a replica killed with -9 under load, roll out a new version, and survive a
crash of the platform."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from loom.client import ClientError, LoomClient
from tests.conftest import Server, backoff, eventually, register, running, stop_deployments

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "HALTED"}


@pytest.fixture(scope="module")
def images() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    return (digits.images[:32] / 16.0).astype(np.float32)[:, None], digits.target[:32]


def expected(
    server: Server, client: LoomClient, images: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """The registered ONNX model's answers, computed in this process."""
    import onnxruntime

    path = client.download_model("digits", "latest", server.home.parent / "m.onnx", "model.onnx")
    session = onnxruntime.InferenceSession(str(path))
    result: np.ndarray[Any, Any] = session.run(["logits"], {"image": images})[0]
    return result


def v2(image: np.ndarray[Any, Any]) -> dict[str, Any]:
    return {
        "id": "r1",
        "inputs": [
            {
                "name": "image",
                "shape": [1, 1, 8, 8],
                "datatype": "FP32",
                "data": image.ravel().tolist(),
            }
        ],
    }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Load:
    """Threads sending V2 requests for known images (with `token`); every answer is checked."""

    def __init__(
        self,
        url: str,
        images: np.ndarray[Any, Any],
        want: np.ndarray[Any, Any],
        threads: int,
        token: str,
    ) -> None:
        self.url, self.images, self.want = url, images, want.argmax(1)
        self.headers = bearer(token)
        self.ok = 0
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(threads)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _run(self, seed: int) -> None:
        with httpx.Client(timeout=60, headers=self.headers) as http:
            i = seed
            while not self.stop.is_set():
                i = (i + 7) % len(self.images)
                try:
                    response = http.post(self.url, json=v2(self.images[i]))
                    body = response.json()
                    answer = int(np.argmax(body["outputs"][0]["data"]))
                    if response.status_code != 200 or answer != self.want[i]:
                        self.failures.append(f"{response.status_code} {body}"[:300])
                    else:
                        self.ok += 1
                except Exception as exc:
                    self.failures.append(repr(exc))


def wait_for(client: LoomClient, name: str, check: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    found = client.deployment(name)
    for pause in backoff():
        found = client.deployment(name)
        if check(found) or time.monotonic() > deadline:
            break
        time.sleep(pause)
    assert check(found), f"deployment {name} never got there: {found}"
    return found


@pytest.fixture
def platform(server: Server, model_zip: bytes) -> Iterator[tuple[Server, LoomClient]]:
    with server.client() as client:
        register(client, model_zip)
        yield server, client


def test_deploy_predict_list_show_delete(platform: tuple[Server, LoomClient], images: Any) -> None:
    """V2 and V1 through the deployment's endpoint give the registered model's answers; status,
    metrics and the request log tell what happened; delete stops every process."""
    server, client = platform
    pictures, _labels = images
    want = expected(server, client, pictures)
    owner = bearer(server.admin_token)
    created = client.deploy("web", "digits", "latest", request_log=True)
    assert created["model_version"] == 1
    found = client.wait_deployment("web")
    assert found["replicas"]["ready"] == 1
    # HAProxy carries the requests where it is installed (a deep home's socket paths included)
    assert found["data_path"] == ("haproxy" if shutil.which("haproxy") else "gateway")
    endpoint = found["endpoint"]
    response = httpx.post(found["urls"]["v2_infer"], json=v2(pictures[3]), headers=owner)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == "r1" and body["model_name"] == "web" and body["model_version"] == "1"
    assert np.allclose(body["outputs"][0]["data"], want[3], atol=1e-4)
    instances = pictures[:5].tolist()
    predictions = httpx.post(
        found["urls"]["v1_predict"], json={"instances": instances}, headers=owner
    ).json()
    assert np.allclose(predictions["predictions"], want[:5], atol=1e-4)
    bad = httpx.post(found["urls"]["v2_infer"], content=b"{not json", headers=owner)
    assert bad.status_code == 400 and "JSON" in bad.json()["error"]
    assert httpx.get(f"{endpoint}/v2/health/ready").json() == {"ready": True}
    metrics = httpx.get(found["urls"]["metrics"], headers=owner).text
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
    }
    web = ("deployment", "web")
    assert samples["loom_deployment_replicas", (web, ("state", "ready"))] == 1
    assert samples["loom_deployment_requests_total", (("code", "200"), web)] == 2
    assert samples["loom_deployment_request_duration_seconds_count", (web,)] == 3  # and the 400
    assert "# HELP loom_deployment_requests_total" in metrics
    assert [d["name"] for d in client.deployments()] == ["web"]
    log_file = next(server.home.glob("deployments/*/requests.jsonl"))
    deadline = time.monotonic() + 10  # the log is flushed every tick
    while log_file.read_text().count("\n") < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [r["status"] for r in records] == [200, 200, 400]
    assert '"image"' in records[0]["request"] and "logits" in records[0]["response"]
    assert httpx.get(f"{endpoint}/").json() == {"status": "alive"}  # KServe's V1 liveness
    assert httpx.get(f"{endpoint}/v1/models", headers=owner).json() == {"models": ["web"]}
    pids = [r["pid"] for r in client.deployment("web")["replica_list"]]
    gateway = int(next(server.home.glob("deployments/*/gateway.pid")).read_text())
    for pid in [gateway, *pids]:  # no platform settings (admin token, database URL) in them
        assert b"LOOM_" not in Path(f"/proc/{pid}/environ").read_bytes()
    client.delete_deployment("web")
    assert not any(running(pid) for pid in pids)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{endpoint}/v2/health/live")
    assert client.deployments() == []


def test_bad_requests_and_ownership(platform: tuple[Server, LoomClient]) -> None:
    """Wrong input names the field and is a 400/404/409, never a 500; another user can neither
    see nor change a deployment; a deployed model version cannot be deleted."""
    server, client = platform
    cases = [
        ({"name": "Bad_Name", "model": "digits"}, 400, "name"),
        (
            {"name": "a", "model": "digits", "min_replicas": 3, "max_replicas": 2},
            400,
            "max_replicas",
        ),
        ({"name": "a", "model": "digits", "target_concurrency": 0}, 400, "target_concurrency"),
        ({"name": "a", "model": "nope"}, 404, None),
        ({"name": "a", "model": "digits", "version": "7"}, 404, None),
        ({"name": "a", "model": "digits", "colour": "red"}, 400, "colour"),
    ]
    http = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {server.admin_token}"}
    )
    for body, status, field in cases:
        response = http.post("/v1/deployments", json=body)
        assert response.status_code == status, (body, response.text)
        assert response.json()["error"]
        if field:
            assert response.json()["field"] == field
    client.deploy("mine", "digits", "1", min_replicas=0)
    with pytest.raises(ClientError) as caught:
        client.deploy("mine", "digits")
    assert caught.value.status == 409
    with pytest.raises(ClientError) as caught:
        client.delete_model("digits", "1")
    assert caught.value.status == 409 and "mine" in caught.value.message
    eve_token = client.add_user("eve")["token"]
    with LoomClient(server.url, eve_token) as eve:
        assert eve.deployments() == []
        for action in (
            lambda: eve.deployment("mine"),
            lambda: eve.update_deployment("mine", max_replicas=3),
            lambda: eve.delete_deployment("mine"),
        ):
            with pytest.raises(ClientError) as caught:
                action()
            assert caught.value.status == 404
    assert client.deployment("mine")["max_replicas"] == 1
    client.delete_deployment("mine")


def test_autoscaling_to_zero_and_back(platform: tuple[Server, LoomClient], images: Any) -> None:
    """From zero, load starts replicas (a cold start, measured) and raises their count past one;
    idleness brings it back to zero; every request sent gets the right answer."""
    server, client = platform
    pictures, _ = images
    want = expected(server, client, pictures)
    client.deploy(
        "auto", "digits", min_replicas=0, max_replicas=3, target_concurrency=1,
        scale_down_delay_s=2,
    )  # fmt: skip
    found = client.wait_deployment("auto", states=("scaled to zero",))
    assert found["replicas"]["ready"] == 0
    seen = 0
    with Load(
        found["urls"]["v2_infer"], pictures, want, threads=6, token=server.admin_token
    ) as load:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and seen < 2:
            seen = max(seen, client.deployment("auto")["replicas"]["ready"])
            time.sleep(0.2)
        time.sleep(1)
    assert seen >= 2
    assert load.failures == [] and load.ok > 100
    idle = wait_for(client, "auto", lambda d: d["state"] == "scaled to zero", timeout=30)
    assert idle["replicas"]["ready"] == 0
    assert idle["last_cold_start_s"] is not None and idle["last_cold_start_s"] > 0
    client.delete_deployment("auto")


def test_kill9_replica_under_load_is_replaced(
    platform: tuple[Server, LoomClient], images: Any
) -> None:
    """A replica killed with -9 while serving is replaced; requests it held go to another one, so
    every request gets its answer."""
    server, client = platform
    pictures, _ = images
    want = expected(server, client, pictures)
    client.deploy("sturdy", "digits", min_replicas=2, max_replicas=2)
    found = wait_for(client, "sturdy", lambda d: d["replicas"]["ready"] == 2)
    victim = found["replica_list"][0]
    with Load(
        found["urls"]["v2_infer"], pictures, want, threads=4, token=server.admin_token
    ) as load:
        time.sleep(1)
        before = load.ok
        os.kill(victim["pid"], signal.SIGKILL)

        def replaced(d: dict[str, Any]) -> bool:
            ids = [r["id"] for r in d["replica_list"]]
            return bool(d["replicas"]["ready"] == 2 and victim["id"] not in ids)

        after = wait_for(client, "sturdy", replaced)
        time.sleep(1)
    assert load.failures == []
    assert load.ok > before
    assert after["restarts"] == 1
    client.delete_deployment("sturdy")


def test_rolling_update_and_platform_crash(
    platform: tuple[Server, LoomClient], images: Any, model_zip: bytes
) -> None:
    """A new version rolls out under load without a failed request; the deployment keeps serving
    while the platform is killed with -9, and a gateway killed with -9 is started again."""
    server, client = platform
    pictures, _ = images
    want = expected(server, client, pictures)
    register(client, model_zip)  # version 2, same weights
    client.deploy("roll", "digits", "1", min_replicas=1)
    found = client.wait_deployment("roll")
    with Load(
        found["urls"]["v2_infer"], pictures, want, threads=3, token=server.admin_token
    ) as load:
        client.update_deployment("roll", version="latest")
        rolled = wait_for(client, "roll", lambda d: d["serving_version"] == "2" and
                          [r["version"] for r in d["replica_list"]] == ["2"])  # fmt: skip
        server.kill9()
        time.sleep(1)
    assert load.failures == [] and load.ok > 0
    assert rolled["model_version"] == 2
    assert (
        httpx.post(
            rolled["urls"]["v2_infer"], json=v2(pictures[0]), headers=bearer(server.admin_token)
        ).status_code
        == 200
    )
    server.start()
    with server.client() as again:
        after = again.wait_deployment("roll")
        assert after["model_version"] == 2 and after["endpoint"] == rolled["endpoint"]
        gateway = int(next(server.home.glob("deployments/*/gateway.pid")).read_text())
        os.kill(gateway, signal.SIGKILL)
        pid_file = next(server.home.glob("deployments/*/gateway.pid"))

        def restarted(d: dict[str, Any]) -> bool:
            return bool(d["state"] == "ready" and int(pid_file.read_text()) != gateway)

        back = wait_for(again, "roll", restarted, timeout=30)
        response = httpx.post(
            back["urls"]["v2_infer"], json=v2(pictures[0]), headers=bearer(server.admin_token)
        )
        assert response.status_code == 200
    stop_deployments(server.home)


def test_a_gateway_whose_folder_is_gone_ends_with_its_replicas(
    platform: tuple[Server, LoomClient],
) -> None:
    """No orphans: with its platform stopped and its folder removed (a deleted home), a
    deployment's gateway stops, and its replicas with it."""
    server, client = platform
    client.deploy("orphan", "digits", min_replicas=2, max_replicas=2)
    found = wait_for(client, "orphan", lambda d: d.get("replicas", {}).get("ready") == 2)
    folder = next(server.home.glob("deployments/*/gateway.pid")).parent
    pids = [int((folder / "gateway.pid").read_text())]
    pids += [r["pid"] for r in found["replica_list"]]
    assert all(running(pid) for pid in pids)
    server.stop()
    shutil.rmtree(folder)
    eventually(lambda: not any(running(pid) for pid in pids), timeout=30)


def test_try_it_through_the_platform(platform: tuple[Server, LoomClient], images: Any) -> None:
    """`POST /v1/deployments/N/infer` (the web UI's "try it") answers as the endpoint does, with
    the caller's rights: the owner gets predictions, another user a 404, bad input the
    gateway's 400."""
    server, client = platform
    pictures, _ = images
    want = expected(server, client, pictures[:1])
    client.deploy("tryme", "digits")
    wait_for(client, "tryme", lambda d: d["replicas"]["ready"] == 1)
    http = httpx.Client(base_url=server.url, headers=bearer(server.admin_token), timeout=30)
    answer = http.post("/v1/deployments/tryme/infer", json=v2(pictures[0]))
    assert answer.status_code == 200, answer.text
    logits = np.array(answer.json()["outputs"][0]["data"], dtype=np.float32)
    np.testing.assert_allclose(logits, want[0], rtol=1e-4, atol=1e-4)
    counted = http.get("/v1/deployments/tryme/stats").json()
    assert counted["requests"]["200"] >= 1 and counted["count"] >= 1
    assert counted["buckets"][-1] == ["+Inf", counted["count"]] and counted["inflight"] == 0
    meta = http.get("/v1/deployments/tryme/metadata").json()
    assert meta["name"] == "tryme" and meta["inputs"][0]["name"] == "image"
    bad = http.post("/v1/deployments/tryme/infer", content=b"{not json")
    assert bad.status_code == 400 and "JSON" in bad.json()["error"]
    eve_token = client.add_user("eve-try")["token"]
    other = httpx.post(
        f"{server.url}/v1/deployments/tryme/infer", json=v2(pictures[0]), headers=bearer(eve_token)
    )
    assert other.status_code == 404
    hidden = httpx.get(f"{server.url}/v1/deployments/tryme/metadata", headers=bearer(eve_token))
    assert hidden.status_code == 404
    client.delete_deployment("tryme")
