"""A model registered through MLflow's API is a Loom model version: its files are the run's
(uploaded through the artifact proxy), its provenance the run's params and metrics, and
`loom deploy` serves it; while served, MLflow's API cannot delete it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.conftest import Server, database_free, stop_deployments
from tests.serving.test_mlflow_flavours import SIGNATURE_64, mlflow_xgboost

pytestmark = [pytest.mark.integration, database_free]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    """An xgboost-flavour MLflow model folder of a small digits classifier, and some digits."""
    xgboost = pytest.importorskip("xgboost")
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    images = images.astype(np.float32)
    classifier = xgboost.XGBClassifier(n_estimators=4, max_depth=3, n_jobs=1)
    classifier.fit(images[:800], labels[:800])
    folder = mlflow_xgboost(tmp_path_factory.mktemp("m") / "model", classifier, "ubj", SIGNATURE_64)
    return folder, classifier, images[-5:]


def test_a_version_registered_through_mlflow_is_deployed(
    shared_server: Server, model: tuple[Path, Any, Any]
) -> None:
    """Logged to a run, registered from `runs:/<run>/model`, the version lists the run's files
    and provenance in Loom's API, answers V2 inference once deployed, and is not deleted while
    it is served (INVALID_STATE)."""
    folder, classifier, images = model
    with shared_server.client() as admin:
        token = admin.add_user("mlflow-registry")["token"]
    mlflow = httpx.Client(
        base_url=f"{shared_server.url}/api/2.0",
        timeout=60,
        headers={"Authorization": f"Bearer {token}"},
    )
    run = mlflow.post("/mlflow/runs/create", json={"run_name": "xgb"}).json()["run"]["info"]
    metrics = [{"key": "accuracy", "value": 0.93, "timestamp": 1, "step": 1}]
    params = [{"key": "n_estimators", "value": "4"}]
    assert (
        mlflow.post(
            "/mlflow/runs/log-batch",
            json={"run_id": run["run_id"], "metrics": metrics, "params": params},
        ).status_code
        == 200
    )
    root = run["artifact_uri"].removeprefix("mlflow-artifacts:")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        answer = mlflow.put(
            f"/mlflow-artifacts/artifacts{root}/model/{relative}", content=path.read_bytes()
        )
        assert answer.status_code == 200, answer.text
    assert mlflow.post("/mlflow/registered-models/create", json={"name": "xgb"}).status_code == 200
    made = mlflow.post(
        "/mlflow/model-versions/create",
        json={"name": "xgb", "source": f"runs:/{run['run_id']}/model", "run_id": run["run_id"]},
    )
    assert made.status_code == 200, made.text
    assert made.json()["model_version"]["version"] == "1"

    with shared_server.client(token) as client:
        version = client.model_version("xgb", "1")
        assert {f["path"] for f in version["files"]} >= {"MLmodel", "model.ubj"}
        assert version["provenance"]["params"] == {"n_estimators": "4"}
        assert version["metrics"] == {"accuracy": 0.93}
        client.deploy("xgb-mlflow", "xgb", "1")
        try:
            found = client.wait_deployment("xgb-mlflow", timeout=180)
            body = {
                "inputs": [
                    {
                        "name": "input-0",
                        "shape": [5, 64],
                        "datatype": "FP32",
                        "data": images.ravel().tolist(),
                    }
                ]
            }
            answer = httpx.post(
                found["urls"]["v2_infer"],
                json=body,
                timeout=30,
                headers={"Authorization": f"Bearer {token}"},
            )
            assert answer.status_code == 200, answer.text
            labels = {o["name"]: o for o in answer.json()["outputs"]}["label"]["data"]
            assert labels == classifier.predict(images).tolist()
            refused = mlflow.request(
                "DELETE", "/mlflow/model-versions/delete", json={"name": "xgb", "version": "1"}
            )
            assert refused.status_code == 400 and refused.json()["error_code"] == "INVALID_STATE"
        finally:
            client.delete_deployment("xgb-mlflow")
            stop_deployments(shared_server.home)
