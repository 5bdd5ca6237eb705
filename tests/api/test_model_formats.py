"""Model formats beyond PyTorch: a scikit-learn pipeline saved as ONNX in its job's environment
(skl2onnx), registered, and served over V2 and V1 without the platform unpickling anything."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from loom.client.archive import zip_folder
from tests.conftest import ROOT, Server, database_free, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow, database_free]

FINAL = {"COMPLETED", "FAILED", "HALTED"}


def test_sklearn_pipeline_is_served_as_onnx(server: Server) -> None:
    example = ROOT / "examples" / "digits-sklearn"
    with server.client() as client:
        job_id = client.submit((example / "manifest.yml").read_bytes(), zip_folder(example))
        job = wait_for_state(client, job_id, FINAL, timeout=300, interval=0.5)
        lines = [x["line"] for x in client.logs(job_id, pagesize=10_000)]
        assert job["state"] == "COMPLETED", (job, lines[-30:])
        version = client.model_version("digits-sklearn")
        files = {f["path"] for f in version["files"]}
        assert files == {"model.onnx", "signature.json"}, files  # no pickle anywhere
        assert version["provenance"]["params"]["model"] == "logistic-regression"
        client.deploy("sk", "digits-sklearn")
        try:
            found = client.wait_deployment("sk", timeout=120)
            auth = {"Authorization": f"Bearer {server.admin_token}"}
            serves_digits_classifier(found, auth, accuracy=0.9)
            metadata = httpx.get(f"{found['endpoint']}/v2/models/sk", headers=auth).json()
            assert metadata["inputs"] == [
                {"name": "pixels", "datatype": "FP32", "shape": [-1, 64]}
            ], metadata
        finally:
            client.delete_deployment("sk")


def serves_digits_classifier(found: dict[str, Any], auth: dict[str, str], accuracy: float) -> None:
    """A deployed digits classifier (input `pixels`) answers V2 with `label` and
    `probabilities` (rows summing to 1) at least this accurate, and V1 with the same labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = (digits.data[-50:] / 16.0).astype(np.float32)
    body = {"inputs": [{"name": "pixels", "shape": [50, 64], "datatype": "FP32",
                        "data": pixels.ravel().tolist()}]}  # fmt: skip
    answer = httpx.post(found["urls"]["v2_infer"], json=body, headers=auth, timeout=30)
    assert answer.status_code == 200, answer.text
    outputs = {o["name"]: o for o in answer.json()["outputs"]}
    assert set(outputs) == {"label", "probabilities"}
    assert outputs["probabilities"]["shape"] == [50, 10]
    probabilities = np.array(outputs["probabilities"]["data"]).reshape(50, 10)
    assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)
    labels = np.array(outputs["label"]["data"])
    assert float(np.mean(labels == digits.target[-50:])) > accuracy
    v1 = httpx.post(
        found["urls"]["v1_predict"],
        json={"instances": pixels[:5].tolist()},
        headers=auth,
        timeout=30,
    )
    assert v1.status_code == 200, v1.text
    assert v1.json()["predictions"] == labels[:5].tolist()
