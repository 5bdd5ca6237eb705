"""MLflow's API keeps Loom's tenancy: a user sees and changes only their own runs, projects
and models (an admin sees all), and is told so in MLflow's error shapes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import Server

pytestmark = pytest.mark.integration
API = "/api/2.0/mlflow"


class Mlflow:
    """MLflow's REST API of a platform, as one caller."""

    def __init__(self, server: Server, token: str) -> None:
        self.http = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def post(self, route: str, **body: Any) -> httpx.Response:
        return self.http.post(f"{API}/{route}", json=body)

    def get(self, route: str, **params: Any) -> httpx.Response:
        return self.http.get(f"{API}/{route}", params=params)


@pytest.fixture
def users(shared_server: Server, request: pytest.FixtureRequest) -> Iterator[tuple[Mlflow, ...]]:
    """Two users of the shared platform, and its admin."""
    with shared_server.client() as admin:
        tokens = [admin.add_user(f"{request.node.name[:30]}-{n}")["token"] for n in (1, 2)]
    yield (
        Mlflow(shared_server, tokens[0]),
        Mlflow(shared_server, tokens[1]),
        Mlflow(shared_server, shared_server.admin_token),
    )


def test_another_users_runs_are_absent(users: tuple[Mlflow, ...]) -> None:
    """Ana's project and runs do not exist for Bo (RESOURCE_DOES_NOT_EXIST, 404), not even in
    the Default project they share; the admin sees and finds them."""
    ana, bo, admin = users
    project = ana.post("experiments/create", name="vision").json()["experiment_id"]
    mine = ana.post("runs/create", experiment_id=project).json()["run"]["info"]["run_id"]
    shared = ana.post("runs/create", experiment_id="0").json()["run"]["info"]["run_id"]
    for route, params in (
        ("runs/get", {"run_id": mine}),
        ("runs/get", {"run_id": shared}),
        ("experiments/get", {"experiment_id": project}),
    ):
        answer = bo.get(route, **params)
        assert answer.status_code == 404, answer.text
        assert answer.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    assert bo.post("runs/search", experiment_ids=["0", project]).json().get("runs") is None
    assert bo.get("experiments/get-by-name", experiment_name="vision").status_code == 404
    found = admin.post("runs/search", experiment_ids=["0", project], max_results=1000).json()
    assert {mine, shared} <= {r["info"]["run_id"] for r in found["runs"]}
    # The same name is Bo's own to take: names are per user.
    assert bo.post("experiments/create", name="vision").status_code == 200


def test_writes_to_another_users_run_are_refused(users: tuple[Mlflow, ...]) -> None:
    """Bo can neither log to, tag, delete nor rename Ana's run, nor upload into its artifact
    folder; the Default project is no one's to rename or delete (PERMISSION_DENIED)."""
    ana, bo, _admin = users
    run = ana.post("runs/create", experiment_id="0").json()["run"]["info"]
    for route in ("runs/log-parameter", "runs/set-tag", "runs/delete"):
        answer = bo.post(route, run_id=run["run_id"], key="k", value="v")
        assert (
            answer.status_code == 404 and answer.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
        )
    path = run["artifact_uri"].removeprefix("mlflow-artifacts:")
    put = bo.http.put(f"/api/2.0/mlflow-artifacts/artifacts{path}/x.txt", content=b"x")
    assert put.status_code == 404 and put.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    for route, body in (("experiments/update", {"new_name": "mine"}), ("experiments/delete", {})):
        answer = bo.post(route, experiment_id="0", **body)
        assert answer.status_code == 403 and answer.json()["error_code"] == "PERMISSION_DENIED"
    assert ana.get("runs/get", run_id=run["run_id"]).json()["run"]["data"] == {
        "tags": [{"key": "mlflow.runName", "value": run["run_name"]}]
    }


def test_a_bad_token_gets_mlflows_shape(shared_server: Server) -> None:
    """No token, or a wrong one, is UNAUTHENTICATED (401) in MLflow's shape; an endpoint Loom
    does not serve is ENDPOINT_NOT_FOUND."""
    anonymous = httpx.get(f"{shared_server.url}{API}/experiments/get?experiment_id=0", timeout=30)
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == "UNAUTHENTICATED"
    wrong = Mlflow(shared_server, "loom_not-a-token").get("experiments/get", experiment_id="0")
    assert wrong.status_code == 401 and wrong.json()["error_code"] == "UNAUTHENTICATED"
    admin = Mlflow(shared_server, shared_server.admin_token)
    missing = admin.post("traces/search")
    assert missing.status_code == 404 and missing.json()["error_code"] == "ENDPOINT_NOT_FOUND"
    bad = admin.post("runs/search", experiment_ids=["0"], filter="metrics.loss <")
    assert bad.status_code == 400 and bad.json()["error_code"] == "INVALID_PARAMETER_VALUE"


def test_an_artifact_is_an_upload_not_a_json_body(users: tuple[Mlflow, ...]) -> None:
    """A 17 MB artifact (past the 16 MiB for JSON bodies) is stored whole and read back; its
    folder lists it with its size."""
    ana, _bo, _admin = users
    run = ana.post("runs/create", experiment_id="0").json()["run"]["info"]
    path = run["artifact_uri"].removeprefix("mlflow-artifacts:")
    data = bytes(range(256)) * (17 * 4096)
    put = ana.http.put(f"/api/2.0/mlflow-artifacts/artifacts{path}/big/weights.bin", content=data)
    assert put.status_code == 200, put.text
    listed = ana.http.get("/api/2.0/mlflow-artifacts/artifacts", params={"path": f"{path[1:]}/big"})
    assert listed.json() == {
        "files": [{"path": "weights.bin", "is_dir": False, "file_size": len(data)}]
    }
    back = ana.http.get(f"/api/2.0/mlflow-artifacts/artifacts{path}/big/weights.bin")
    assert back.status_code == 200 and back.content == data
