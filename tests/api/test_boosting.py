"""XGBoost and LightGBM models, trained through their scikit-learn API in the job's own
environment, saved as ONNX (onnxmltools' converters), registered, and served over V2 and V1:
the platform never loads a pickle or a booster's own file."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from loom.client.archive import zip_folder
from tests.conftest import ROOT, Server, database_free, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow, database_free]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
EXAMPLE = ROOT / "examples" / "digits-boosting"


@pytest.mark.parametrize("booster", ["xgboost", "lightgbm"])
def test_a_booster_is_served_as_onnx(server: Server, booster: str) -> None:
    manifest = (EXAMPLE / "manifest.yml").read_text()
    manifest = manifest.replace("--booster xgboost", f"--booster {booster}")
    manifest = manifest.replace("name: digits-boosting", f"name: digits-{booster}")
    with server.client() as client:
        job_id = client.submit(manifest.encode(), zip_folder(EXAMPLE))
        job = wait_for_state(client, job_id, FINAL, timeout=600, interval=0.5)
        lines = [x["line"] for x in client.logs(job_id, pagesize=10_000)]
        assert job["state"] == "COMPLETED", (job, lines[-30:])
        assert any(line.startswith(f"{booster} test accuracy") for line in lines), lines[-10:]
        version = client.model_version(f"digits-{booster}")
        assert {f["path"] for f in version["files"]} == {"model.onnx", "signature.json"}
        assert version["provenance"]["params"]["model"] == booster
        client.deploy(booster, f"digits-{booster}")
        try:
            found = client.wait_deployment(booster, timeout=120)
            from sklearn.datasets import load_digits

            digits = load_digits()
            pixels = (digits.data[-50:] / 16.0).astype(np.float32)
            auth = {"Authorization": f"Bearer {server.admin_token}"}
            body = {"inputs": [{"name": "pixels", "shape": [50, 64], "datatype": "FP32",
                                "data": pixels.ravel().tolist()}]}  # fmt: skip
            answer = httpx.post(found["urls"]["v2_infer"], json=body, headers=auth, timeout=30)
            assert answer.status_code == 200, answer.text
            outputs = {o["name"]: o for o in answer.json()["outputs"]}
            assert set(outputs) == {"label", "probabilities"}
            probabilities = np.array(outputs["probabilities"]["data"]).reshape(50, 10)
            assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)
            labels = np.array(outputs["label"]["data"])
            assert float(np.mean(labels == digits.target[-50:])) > 0.85
            v1 = httpx.post(
                found["urls"]["v1_predict"],
                json={"instances": pixels[:5].tolist()},
                headers=auth,
                timeout=30,
            )
            assert v1.status_code == 200, v1.text
            assert v1.json()["predictions"] == labels[:5].tolist()
        finally:
            client.delete_deployment(booster)
