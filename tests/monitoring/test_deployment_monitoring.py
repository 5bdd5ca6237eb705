"""A deployment watched by its detector, on a real platform: requests drawn from the
reference raise no drift, a shifted feature does within a window, an outlier is flagged and
kept, payloads are sampled and never carry the caller's token, and the platform's API,
`/metrics` and CLI say so."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import httpx
import numpy as np
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Server, eventually, processes_with, register

pytestmark = pytest.mark.integration

WINDOW = 100
PER_REQUEST = 10


def send(url: str, token: str, rows: np.ndarray[Any, Any]) -> None:
    body = {"inputs": [{"name": "x", "shape": list(rows.shape), "datatype": "FP32",
                        "data": rows.ravel().tolist()}]}  # fmt: skip
    answer = httpx.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.status_code == 200, answer.text


@pytest.mark.timeout(600)  # the detector imports Alibi Detect: minutes on a loaded machine
def test_drift_outliers_and_payloads(monitored_server: Server, tabular_zip: bytes) -> None:
    """Five windows of reference traffic: no drift, and a drift-triggered schedule starts
    nothing; one shifted window: drift naming the feature, and the schedule starts a run; an
    outlier request: flagged with its body; about half the payloads kept, none holding the
    token; the platform's /metrics carries the drift gauge."""
    with monitored_server.client() as admin:
        token = admin.add_user("watcher")["token"]
    with LoomClient(monitored_server.url, token) as loom:
        register(loom, tabular_zip, name="tabular")
        monitoring = {"drift": True, "outliers": True, "window": WINDOW, "p_value": 0.01,
                      "payloads": {"rate": 0.5, "retention_days": 1}}  # fmt: skip
        loom.deploy("tab", "tabular", monitoring=monitoring)
        view = loom.wait_deployment("tab", timeout=120)
        assert view["monitoring"]["window"] == WINDOW
        # watched on the compiled data path where there is one, as unwatched deployments are
        assert view["data_path"] == ("haproxy" if shutil.which("haproxy") else "gateway")
        retrain = {"name": "retrain", "steps": [{"name": "say", "kind": "shell",
                                                 "command": "echo retraining"}]}  # fmt: skip
        trigger = {"drift": {"deployment": "tab", "cooldown_s": 0}}
        loom.schedule_pipeline(retrain, "on-drift", "", trigger=trigger)
        eventually(lambda: _state(loom) == "watching", timeout=300)
        # the detector yields the CPU to serving: it runs at a lower priority than the gateway
        ours = str(monitored_server.home).encode()
        detectors = [p for p in processes_with(b"loom.serving.detector") if ours in _cmdline(p)]
        assert detectors and {_nice(p) for p in detectors} == {min(19, os.nice(0) + 10)}
        # and once fitted, only on CPU time serving leaves idle
        eventually(lambda: os.SCHED_IDLE in {_policy(p) for p in detectors}, timeout=10)
        url = view["urls"]["v2_infer"]
        rng = np.random.default_rng(7)
        for _ in range(5 * WINDOW // PER_REQUEST):
            send(url, token, rng.normal(size=(PER_REQUEST, 4)).astype(np.float32))
        eventually(lambda: len(loom.deployment_drift("tab")["history"]) == 5, timeout=60)
        quiet = loom.deployment_drift("tab")
        assert [w["drift"] for w in quiet["history"]] == [False] * 5
        assert quiet["drift"] is False and quiet["window"] == WINDOW
        assert loom.pipeline_runs("retrain") == []  # no drift: the trigger did not fire

        for _ in range(WINDOW // PER_REQUEST):
            rows = rng.normal(size=(PER_REQUEST, 4)).astype(np.float32)
            rows[:, 2] += 1.5
            send(url, token, rows)
        eventually(lambda: len(loom.deployment_drift("tab")["history"]) == 6, timeout=60)
        drifted = loom.deployment_drift("tab")
        assert drifted["drift"] is True and drifted["features"] == ["c"]
        assert drifted["version"] == 1 and drifted["p_value"] < 0.01 / 4
        eventually(lambda: loom.pipeline_runs("retrain"), timeout=60)  # the drift trigger fired
        assert loom.pipeline_runs("retrain")[0]["schedule"] == "on-drift"
        schedule = loom.pipeline_schedule("on-drift")
        assert schedule["runs"] == 1 and "drifted (c)" in schedule["triggered_by"]

        send(url, token, np.array([[9.0, -9.0, 9.0, -9.0]], dtype=np.float32))
        # the shifted window may have had outliers of its own: wait for this request's
        eventually(lambda: _flagged(loom, "9.0"), timeout=60)
        flagged = _flagged(loom, "9.0")[0]
        assert flagged["score"] > flagged["threshold"]

        sent = 5 * WINDOW // PER_REQUEST + WINDOW // PER_REQUEST + 1
        logged = loom.deployment_payloads("tab", limit=1000)
        assert 0 < len(logged) < sent  # a sample (rate 0.5), each with its version and answer
        assert all(r["version"] == "1" and '"outputs"' in r["response"] for r in logged)
        stored = b"".join(p.read_bytes() for p in monitored_server.home.rglob("payloads/*"))
        assert token.encode() not in stored and b"uthorization" not in stored

        admin_auth = {"Authorization": f"Bearer {monitored_server.admin_token}"}
        metrics = httpx.get(f"{monitored_server.url}/metrics", headers=admin_auth).text
        assert 'loom_model_drift{deployment="tab"' in metrics
        line = next(x for x in metrics.splitlines() if x.startswith("loom_model_drift{"))
        assert line.endswith(" 1.0")
        gateway = httpx.get(view["urls"]["metrics"], headers={"Authorization": f"Bearer {token}"})
        assert "loom_deployment_outliers_total" in gateway.text


def test_monitoring_refused_without_reference(monitored_server: Server, model_zip: bytes) -> None:
    """Drift asked of a version with no reference data is refused naming the field and how to
    give it one; a bad window is refused naming its field."""
    with monitored_server.client() as admin:
        token = admin.add_user("no-reference")["token"]
    with LoomClient(monitored_server.url, token) as loom:
        register(loom, model_zip, name="digits")
        with pytest.raises(ClientError) as refused:
            loom.deploy("d", "digits", monitoring={"drift": True})
        assert refused.value.status == 400 and "save_reference" in str(refused.value)
        with pytest.raises(ClientError) as bad:
            loom.deploy("d", "digits", monitoring={"drift": True, "window": 1})
        assert bad.value.status in (400, 422) and "window" in str(bad.value)


def test_a_pipelines_deploy_step_turns_monitoring_on(
    monitored_server: Server, tabular_zip: bytes
) -> None:
    """A deploy step's `monitoring:` reaches the deployment it creates (drift watched, the
    window given); one the API would refuse fails the step, naming the field."""
    with monitored_server.client() as admin:
        token = admin.add_user("pipeline-watcher")["token"]
    with LoomClient(monitored_server.url, token) as loom:
        register(loom, tabular_zip, name="tabular")

        def deploying(name: str, monitoring: dict[str, Any]) -> dict[str, Any]:
            step = {"name": "serve", "kind": "deploy", "deployment": name,
                    "model": "tabular@1", "monitoring": monitoring}  # fmt: skip
            made = loom.run_pipeline({"name": f"deploy-{name}", "steps": [step]})
            return loom.wait_pipeline_run(made["id"], timeout_s=180)

        done = deploying("watched", {"drift": True, "window": 40})
        assert done["state"] == "SUCCEEDED", done["steps"]
        watched = loom.deployment("watched")["monitoring"]
        assert watched["drift"] is True and watched["window"] == 40

        refused = deploying("unwatched", {"drift": True, "window": 1})
        assert refused["state"] == "FAILED"
        assert "monitoring.window" in refused["steps"][0]["message"], refused["steps"]
        loom.delete_deployment("watched")


def _flagged(loom: LoomClient, text: str) -> list[dict[str, Any]]:
    return [r for r in loom.deployment_payloads("tab", outliers=True) if text in r["request"]]


def _state(loom: LoomClient) -> str:
    status = (loom.deployment("tab")["monitoring"] or {}).get("status") or {}
    if status.get("state") == "failing":
        raise AssertionError(json.dumps(status))
    return str(status.get("state"))


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as found:
            return found.read()
    except OSError:
        return b""


def _nice(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as found:
        return int(found.read().rsplit(")", 1)[1].split()[16])


def _policy(pid: int) -> int | None:
    try:
        return os.sched_getscheduler(pid)
    except OSError:
        return None
