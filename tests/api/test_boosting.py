"""XGBoost and LightGBM models, trained through their scikit-learn API in the job's own
environment, saved as ONNX (onnxmltools' converters), registered, and served over V2 and V1:
the platform never loads a pickle or a booster's own file."""

from __future__ import annotations

import pytest

from loom.client.archive import zip_folder
from tests.api.test_model_formats import serves_digits_classifier
from tests.conftest import ROOT, Server, database_free, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow, database_free]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
EXAMPLE = ROOT / "examples" / "digits-boosting"


# One platform for both: the example's environment (both boosters' packages) is built once.
@pytest.mark.parametrize("booster", ["xgboost", "lightgbm"])
def test_a_booster_is_served_as_onnx(shared_server: Server, booster: str) -> None:
    server = shared_server
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
            auth = {"Authorization": f"Bearer {server.admin_token}"}
            serves_digits_classifier(found, auth, accuracy=0.85)
        finally:
            client.delete_deployment(booster)
