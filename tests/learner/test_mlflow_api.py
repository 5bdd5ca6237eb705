"""The learner's MLflow endpoint: its token, and bad requests answered 4xx, never dropped."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from loom.learner.mlflow_api import PREFIX, Endpoint, Tracking


@pytest.fixture
def endpoint() -> Iterator[tuple[Endpoint, list[dict[str, Any]]]]:
    shipped: list[dict[str, Any]] = []
    server = Endpoint(Tracking("job-1", "file:///tmp/artifacts", shipped.extend)).start()
    yield server, shipped
    server.close()


def call(server: Endpoint, route: str, body: Any, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    return httpx.post(f"{server.url}{PREFIX}{route}", json=body, headers=headers, timeout=10)


def test_a_run_logs_metrics_params_and_tags(endpoint: Any) -> None:
    server, shipped = endpoint
    run_id = call(server, "runs/create", {"experiment_id": "0"}).json()["run"]["info"]["run_id"]
    assert call(server, "runs/log-batch", {
        "run_id": run_id,
        "metrics": [{"key": "test/accuracy", "value": 0.9, "step": 2, "timestamp": 1}],
        "params": [{"key": "lr", "value": "0.1"}],
        "tags": [{"key": "mlflow.user", "value": "x"}, {"key": "team", "value": "a"}],
    }).status_code == 200  # fmt: skip
    assert {"info": {"kind": "param", "key": "lr", "value": "0.1"}} in shipped
    assert {"info": {"kind": "tag", "key": "team", "value": "a"}} in shipped
    assert not any(p.get("info", {}).get("key") == "mlflow.user" for p in shipped)
    point = next(p for p in shipped if "values" in p)
    assert (point["group"], point["step"], point["values"]) == ("test", 2, {"accuracy": 0.9})
    got = httpx.get(f"{server.url}{PREFIX}runs/get", params={"run_id": run_id},
                    headers={"Authorization": f"Bearer {server.token}"}).json()  # fmt: skip
    assert {"key": "lr", "value": "0.1"} in got["run"]["data"]["params"]


def test_without_the_token_nothing_is_logged(endpoint: Any) -> None:
    server, shipped = endpoint
    assert call(server, "runs/create", {}, token="guess").status_code == 401
    assert shipped == []


@pytest.mark.parametrize(
    "body",
    [
        {"key": "loss", "value": 1, "step": "x"},
        {"key": "loss", "value": 10**400},
        {"key": "loss", "value": "high"},
        {"key": None, "value": 1},
        {"key": "loss", "value": 1, "timestamp": [1]},
    ],
)
def test_bad_metrics_are_400(endpoint: Any, body: dict[str, Any]) -> None:
    server, _shipped = endpoint
    run_id = call(server, "runs/create", {}).json()["run"]["info"]["run_id"]
    answer = call(server, "runs/log-metric", {"run_id": run_id, **body})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    assert call(server, "runs/get?run_id=x", None).status_code in (404, 405)  # still serving


def test_malformed_bodies_are_400(endpoint: Any) -> None:
    server, _shipped = endpoint
    run_id = call(server, "runs/create", {}).json()["run"]["info"]["run_id"]
    for body in ({"run_id": run_id, "tags": "ab"}, {"run_id": run_id, "metrics": [1]}, [1, 2]):
        assert call(server, "runs/log-batch", body).status_code == 400, body
    assert call(server, "runs/log-parameter", {"run_id": run_id}).status_code == 400
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    broken = httpx.post(f"{server.url}{PREFIX}runs/create", content=b"{no", headers=headers)
    assert broken.status_code == 400


def test_a_negative_length_is_refused_not_read(endpoint: Any) -> None:
    server, _shipped = endpoint
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(
            f"POST {PREFIX}runs/create HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{server.token}\r\nContent-Length: -1\r\n\r\n".encode()
        )
        answer = conn.recv(200)
    assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request"), answer


def test_a_params_flood_is_refused_past_what_the_endpoint_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Params past the endpoint's hold (the platform's memory, outside the job's cgroup) are
    refused with 413 and RESOURCE_LIMIT_EXCEEDED; the job's log is told once; what was
    accepted before stays, and nothing more is shipped."""
    monkeypatch.setattr("loom.learner.mlflow_api.MAX_HELD_BYTES", 200_000)
    shipped: list[dict[str, Any]] = []
    notices: list[str] = []
    server = Endpoint(Tracking("job-1", "file:///tmp/a", shipped.extend, notices.append)).start()
    try:
        run_id = call(server, "runs/create", {}).json()["run"]["info"]["run_id"]
        answers = []
        for batch in range(10):
            params = [{"key": f"p{batch}-{i}", "value": "v" * 5000} for i in range(10)]
            answers.append(call(server, "runs/log-batch", {"run_id": run_id, "params": params}))
        codes = [a.status_code for a in answers]
        assert codes[:3] == [200] * 3 and codes[-1] == 413, codes
        assert answers[-1].json()["error_code"] == "RESOURCE_LIMIT_EXCEEDED"
        assert server.tracking.held <= 200_000
        assert len(notices) == 1 and "was not logged" in notices[0]
        kept = [p for p in shipped if p.get("info", {}).get("kind") == "param"]
        assert 30 <= len(kept) < 40
    finally:
        server.close()
