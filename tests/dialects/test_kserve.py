"""KServe's InferenceService applied unchanged to a real platform: its model fetched from the
test's S3 server with the credentials of its ServiceAccount's Secret, registered and served,
answering V1 and V2; a canary at the share asked, then promoted; a `loom://` model served at
once; what cannot be served refused naming the field."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from loom.client import ClientError, LoomClient
from tests.conftest import held_out_digits, v2_request

pytestmark = [pytest.mark.integration, pytest.mark.s3]


@pytest.fixture(scope="module")
def models(s3: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The digits model in two folders of a bucket: s3://kserve-models/digits-v1, -v2."""
    from tests.serving.test_rest import digits_models

    folder = tmp_path_factory.mktemp("digits")
    digits_models(folder)
    client = s3.client()
    client.create_bucket(Bucket="kserve-models")
    for version in ("digits-v1", "digits-v2"):
        for path in folder.iterdir():
            if path.name.startswith("model.onnx"):
                client.upload_file(str(path), "kserve-models", f"{version}/{path.name}")
    return str(s3.endpoint)


def service(name: str, uri: str, **predictor: Any) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "annotations": {"autoscaling.knative.dev/target": "4"}},
        "spec": {
            "predictor": {
                "minReplicas": 1,
                "maxReplicas": 2,
                "serviceAccountName": "s3-reader",
                "model": {
                    "modelFormat": {"name": "onnx"},
                    "protocolVersion": "v2",
                    "runtime": "kserve-tritonserver",
                    "storageUri": uri,
                },
                **predictor,
            }
        },
    }


def credentials(endpoint: str, s3: Any) -> list[dict[str, Any]]:
    """KServe's way: a Secret with the keys and the endpoint, a ServiceAccount naming it."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "s3-credentials",
                "annotations": {
                    "serving.kserve.io/s3-endpoint": endpoint.removeprefix("http://"),
                    "serving.kserve.io/s3-usehttps": "0",
                    "serving.kserve.io/s3-region": "us-east-1",
                },
            },
            "type": "Opaque",
            "stringData": {"AWS_ACCESS_KEY_ID": s3.key, "AWS_SECRET_ACCESS_KEY": s3.secret},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "s3-reader"},
            "secrets": [{"name": "s3-credentials"}],
        },
    ]


def ready(client: LoomClient, name: str, timeout: float = 180) -> dict[str, Any]:
    """The service's status once its Ready condition is true."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.object("isvc", name).get("status", {})
        conditions = {c["type"]: c for c in status.get("conditions", [])}
        if conditions.get("Ready", {}).get("status") == "True":
            return status
        failure = status.get("modelStatus", {}).get("lastFailureInfo")
        assert failure is None, failure
        assert time.monotonic() < deadline, f"{name} never ready: {status}"
        time.sleep(0.3)


def test_an_inference_service_from_s3_answers_v1_and_v2(
    tenant: LoomClient, s3: Any, models: str
) -> None:
    """Applied with its Secret and ServiceAccount, the service fetches its model from S3 and
    answers V1 and V2 at its status' url; a new model with canaryTrafficPercent becomes a
    canary at that share, promoted once the percent is removed. (A loom:// service is a deploy
    step alone: see test_kubeflow_translation.)"""
    documents = [*credentials(models, s3), service("digits", "s3://kserve-models/digits-v1")]
    applied = tenant.apply(yaml.safe_dump_all(documents))
    notes = {n["field"] for o in applied for n in o["notes"]}
    assert "spec.predictor.model.runtime" in notes
    status = ready(tenant, "digits")
    assert status["modelStatus"]["states"]["activeModelState"] == "Loaded"
    images, _labels = held_out_digits()
    token = tenant._http.headers["Authorization"]
    v2 = httpx.post(
        f"{status['url']}/v2/models/digits/infer",
        json=v2_request(images[:4].reshape(4, 1, 8, 8)),
        headers={"Authorization": token},
    )
    assert v2.status_code == 200, v2.text
    assert v2.json()["outputs"][0]["shape"] == [4, 10]
    v1 = httpx.post(
        f"{status['url']}/v1/models/digits:predict",
        json={"instances": images[:3].reshape(3, 1, 8, 8).tolist()},
        headers={"Authorization": token},
    )
    assert v1.status_code == 200, v1.text
    assert len(v1.json()["predictions"]) == 3
    assert tenant.model_version("digits", "latest")["version"] == 1

    canary = service("digits", "s3://kserve-models/digits-v2", canaryTrafficPercent=25)
    (changed,) = tenant.apply(yaml.safe_dump(canary))
    assert changed["action"] == "configured"
    deadline = time.monotonic() + 180
    while True:
        traffic = tenant.object("isvc", "digits")["status"]["components"]["predictor"]["traffic"]
        if len(traffic) == 2:
            break
        assert time.monotonic() < deadline, traffic
        time.sleep(0.3)
    assert {t["revisionName"]: t["percent"] for t in traffic} == {
        "digits-predictor-2": 25,
        "digits-predictor-1": 75,
    }
    promoted = service("digits", "s3://kserve-models/digits-v2")
    tenant.apply(yaml.safe_dump(promoted))
    shown = tenant.deployment("digits")
    assert shown["canary"] is None and shown["model_version"] == 2

    (listed,) = tenant.objects("inferenceservices")
    assert listed["status"]["url"] == status["url"]
    gone = tenant.delete_documents(yaml.safe_dump_all(documents))
    assert [o["action"] for o in gone] == ["deleted"] * 3
    with pytest.raises(ClientError, match="no deployment"):
        tenant.deployment("digits")


def test_what_cannot_be_served_is_refused(tenant: LoomClient) -> None:
    """A pickled scikit-learn model, a transformer, a gs:// URI and a missing service account
    are refused when applied, each naming its field."""
    sklearn = service("pickled", "s3://bucket/model")
    sklearn["spec"]["predictor"]["model"]["modelFormat"]["name"] = "sklearn"
    transformer = service("transformed", "s3://bucket/model")
    transformer["spec"]["transformer"] = {"containers": [{"image": "x"}]}
    cases = {
        "spec.predictor.model.modelFormat.name": sklearn,
        "spec.transformer": transformer,
        "spec.predictor.model.storageUri": service("gcs", "gs://bucket/model"),
        "spec.predictor.serviceAccountName": service("nobody", "s3://bucket/model"),
    }
    for field, document in cases.items():
        with pytest.raises(ClientError) as refused:
            tenant.apply(yaml.safe_dump(document))
        assert refused.value.status == 400 and field in refused.value.message, refused.value.message


def test_the_storage_initializer_lays_out_each_format(tmp_path: Path) -> None:
    """The storage initializer names the one model file as Loom's server looks for it, and says
    what is missing otherwise."""
    from loom.dialects.kubeflow.storage_initializer import lay_out

    onnx = tmp_path / "onnx"
    onnx.mkdir()
    (onnx / "digits.onnx").write_bytes(b"x")
    assert lay_out(onnx, "onnx") == "model.onnx" and (onnx / "model.onnx").exists()
    booster = tmp_path / "xgb"
    booster.mkdir()
    (booster / "model.json").write_text("{}")
    assert lay_out(booster, "xgboost") == "model.json"
    assert "xgboost:" in (booster / "MLmodel").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match=r"expected one \.pt/\.pth file"):
        lay_out(empty, "pytorch")
