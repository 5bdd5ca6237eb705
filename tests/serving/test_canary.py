"""Canary rollouts with the real platform, gateway and replicas: a second version takes its
share of requests (within 5 points over 2,000), is promoted or rolled back under load without a
failed request, with requests counted per version; bad changes are refused by name."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Server, register, stop_deployments
from tests.serving.test_deployments import Load, bearer, expected, images, platform, v2, wait_for

pytestmark = pytest.mark.integration
__all__ = ["images", "platform"]  # fixtures, shared with the deployment tests


def versions(found: dict[str, Any]) -> list[str]:
    return sorted(r["version"] for r in found["replica_list"] if r["state"] == "ready")


def test_canary_split_promote_and_rollback_under_load(
    platform: tuple[Server, LoomClient], images: Any, model_zip: bytes
) -> None:
    server, client = platform
    pictures, _ = images
    want = expected(server, client, pictures)
    register(client, model_zip)  # version 2 (same weights: every answer stays right)
    client.deploy("can", "digits", "1", min_replicas=1)
    found = client.wait_deployment("can")
    updated = client.update_deployment("can", canary="2", canary_percent=10)
    assert updated["canary"] == {"version": 2, "percent": 10.0}
    wait_for(client, "can", lambda d: versions(d) == ["1", "2"])

    answered: dict[str, int] = {}
    with httpx.Client(headers=bearer(server.admin_token), timeout=30) as http:
        for i in range(2000):
            body = http.post(found["urls"]["v2_infer"], json=v2(pictures[i % 32])).json()
            answered[body["model_version"]] = answered.get(body["model_version"], 0) + 1
    assert sum(answered.values()) == 2000
    assert abs(answered.get("2", 0) / 2000 * 100 - 10) <= 5, answered
    counted = wait_for(  # the gateway's status, a tick behind
        client,
        "can",
        lambda d: all(d["requests_by_version"].get(v, 0) >= n for v, n in answered.items()),
    )
    assert set(counted["requests_by_version"]) == {"1", "2"}

    with Load(
        found["urls"]["v2_infer"], pictures, want, threads=3, token=server.admin_token
    ) as load:
        promoted = client.update_deployment("can", promote=True)
        assert promoted["model_version"] == 2 and promoted["canary"] is None
        wait_for(client, "can", lambda d: d["serving_version"] == "2" and versions(d) == ["2"])
        client.update_deployment("can", canary="1", canary_percent=50)
        wait_for(client, "can", lambda d: versions(d) == ["1", "2"])
        rolled = client.update_deployment("can", rollback=True)
        assert rolled["canary"] is None and rolled["model_version"] == 2
        wait_for(client, "can", lambda d: versions(d) == ["2"] and len(d["replica_list"]) == 1)
    assert load.failures == [] and load.ok > 0
    metrics = httpx.get(f"{found['endpoint']}/metrics", headers=bearer(server.admin_token)).text
    assert (
        'loom_deployment_version_requests_total{code="200",deployment="can",version="1"}' in metrics
    )
    assert (
        'loom_deployment_version_requests_total{code="200",deployment="can",version="2"}' in metrics
    )
    client.delete_deployment("can")
    stop_deployments(server.home)


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"promote": True}, 409, "has no canary to promote"),
        ({"rollback": True}, 409, "has no canary to roll back"),
        ({"canary_percent": 20}, 400, "has no canary; give its version"),
        ({"canary": "1"}, 400, "version 1 is the version served already"),
        ({"canary": "9"}, 404, "9"),
        ({"canary": "1", "promote": True}, 400, "one at a time"),
        ({"canary_percent": 101}, 400, "canary_percent"),
        ({"version": "1", "canary": "1"}, 400, "not both at once"),
    ],
)
def test_bad_canary_changes_are_refused(
    platform: tuple[Server, LoomClient], change: dict[str, Any], status: int, words: str
) -> None:
    server, client = platform
    if not any(d["name"] == "plain" for d in client.deployments()):
        client.deploy("plain", "digits", "1", min_replicas=0)
    with pytest.raises(ClientError) as caught:
        client.update_deployment("plain", **change)
    assert caught.value.status == status, caught.value
    assert words in caught.value.message
    assert client.deployment("plain")["canary"] is None
    stop_deployments(server.home)
