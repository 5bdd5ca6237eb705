"""Serving one's own code: a `kserve.Model` predictor (KServe's own package, in the replica's
environment) deployed on a real platform, answering V1, V2 REST and V2 gRPC through its
preprocess/postprocess, with KServe's error statuses; and confined: it cannot read the
platform's token, another deployment's files, or the caller's token.

The replicas' environment (KServe's package) is built once and kept between runs under
`.venvs/serving-environments`: the first run downloads it (about a minute and a half).
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from loom.client import LoomClient
from tests.conftest import COPY, ROOT, Server, register
from tests.serving.test_rest import digits_models

pytestmark = pytest.mark.integration

EXAMPLE = ROOT / "examples" / "custom-predictor"
FIRST_BUILD_S = 600.0  # the first run builds KServe's environment; later ones reuse it

PROBE = '''
import os
import kserve


class Probe(kserve.Model):
    """Says what it can read and what reached it: the proof of what a predictor cannot see."""

    def load(self):
        self.ready = True

    def predict(self, payload, headers=None):
        seen = {}
        for path in payload["paths"]:
            try:
                with open(path, "rb") as handle:
                    seen[path] = "read " + str(len(handle.read(64))) + " bytes"
            except OSError as exc:
                seen[path] = type(exc).__name__
        listed = {}
        for folder in payload["folders"]:
            try:
                listed[folder] = sorted(os.listdir(folder))
            except OSError as exc:
                listed[folder] = type(exc).__name__
        return {"files": seen, "folders": listed, "headers": dict(headers or {}),
                "env": sorted(os.environ), "uid": os.getuid()}
'''


def model_zip(files: dict[str, bytes]) -> bytes:
    """A job that registers these files as its model (RESULT_DIR/model)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"model/{name}", data)
        archive.writestr("copy.py", COPY)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def platform(code_platform: Server) -> Server:
    return code_platform


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("digits")
    digits_models(folder)
    return folder


@pytest.fixture(scope="module")
def owner(code_owner: LoomClient) -> LoomClient:
    return code_owner


@pytest.fixture(scope="module")
def custom(owner: LoomClient, onnx_dir: Path) -> Iterator[dict[str, Any]]:
    """The example predictor beside the digits model, deployed and ready."""
    files = {
        "predictor.py": (EXAMPLE / "predictor.py").read_bytes(),
        "model.onnx": (onnx_dir / "model.onnx").read_bytes(),
    }
    register(owner, model_zip(files), name="digits-custom")
    owner.deploy("digits-custom", "digits-custom")
    yield owner.wait_deployment("digits-custom", timeout=FIRST_BUILD_S)
    owner.delete_deployment("digits-custom")


def auth(platform: Server) -> dict[str, str]:
    return {"Authorization": f"Bearer {platform.admin_token}"}


def onnx_logits(onnx_dir: Path, images: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx_dir / "model.onnx"))
    result: np.ndarray[Any, Any] = session.run(None, {"image": images})[0]
    return result


def test_a_kserve_predictor_answers_v1_v2_and_grpc(
    platform: Server, custom: dict[str, Any], onnx_dir: Path
) -> None:
    """The predictor's preprocess/predict/postprocess answer V1 (digits), V2 REST in JSON and
    in binary tensors, and V2 gRPC (Triton's client) as the ONNX model itself does."""
    images = np.random.default_rng(3).random((3, 1, 8, 8), dtype=np.float32)
    want = onnx_logits(onnx_dir, images)
    urls = custom["urls"]
    v1 = httpx.post(urls["v1_predict"], json={"instances": images[:, 0].tolist()},
                    headers=auth(platform), timeout=30)  # fmt: skip
    assert v1.status_code == 200, v1.text
    assert v1.json() == {"predictions": want.argmax(axis=1).tolist()}

    body = {"id": "r-1", "inputs": [{"name": "image", "shape": [3, 1, 8, 8], "datatype": "FP32",
                                    "data": images.ravel().tolist()}]}  # fmt: skip
    v2 = httpx.post(urls["v2_infer"], json=body, headers=auth(platform), timeout=30)
    assert v2.status_code == 200, v2.text
    answer = v2.json()
    assert answer["id"] == "r-1" and answer["outputs"][0]["name"] == "logits"
    got = np.asarray(answer["outputs"][0]["data"], dtype=np.float32).reshape(3, 10)
    np.testing.assert_allclose(got, want, atol=1e-5)

    sized = {"binary_data_size": images.nbytes}
    header = json.dumps({"inputs": [{"name": "image", "shape": [3, 1, 8, 8], "datatype": "FP32",
                                     "parameters": sized}]})  # fmt: skip
    binary = httpx.post(urls["v2_infer"], content=header.encode() + images.tobytes(), timeout=30,
                        headers={**auth(platform), "Inference-Header-Content-Length":
                                 str(len(header))})  # fmt: skip
    assert binary.status_code == 200, binary.text
    assert np.allclose(np.asarray(binary.json()["outputs"][0]["data"]).reshape(3, 10), want,
                       atol=1e-5)  # fmt: skip

    grpc = grpcclient.InferenceServerClient(custom["grpc_endpoint"])
    tensor = grpcclient.InferInput("image", [3, 1, 8, 8], "FP32")
    tensor.set_data_from_numpy(images)
    headers = {"authorization": auth(platform)["Authorization"]}
    result = grpc.infer("digits-custom", [tensor], headers=headers)
    np.testing.assert_allclose(result.as_numpy("logits"), want, atol=1e-5)
    meta = grpc.get_model_metadata("digits-custom", headers=headers, as_json=True)
    assert meta["platform"] == "kserve"
    assert meta["inputs"] == [{"name": "image", "datatype": "FP32", "shape": ["-1", "1", "8", "8"]}]


def test_kserve_errors_keep_their_status(platform: Server, custom: dict[str, Any]) -> None:
    """KServe's InvalidInput is a 400 with the model's own message, in V1 and V2; a request
    KServe cannot decode is a 400 that names what is missing; never a traceback."""
    urls = custom["urls"]
    bad = httpx.post(urls["v1_predict"], json={"rows": []}, headers=auth(platform), timeout=30)
    assert bad.status_code == 400, bad.text
    assert bad.json() == {"error": 'expected {"instances": [...]} or a V2 request'}
    shape = httpx.post(urls["v1_predict"], json={"instances": [[1.0, 2.0]]},
                       headers=auth(platform), timeout=30)  # fmt: skip
    assert shape.status_code == 400 and "images are [1, 8, 8]" in shape.json()["error"]
    missing = httpx.post(urls["v2_infer"], json={"inputs": [{"name": "image"}]},
                         headers=auth(platform), timeout=30)  # fmt: skip
    assert missing.status_code == 400 and "no `shape`" in missing.json()["error"]
    explain = httpx.post(f"{custom['endpoint']}/v1/models/digits-custom:explain",
                         json={"instances": [[[0.0] * 8] * 8]}, headers=auth(platform),
                         timeout=30)  # fmt: skip
    assert explain.status_code == 501, explain.text  # no explain() of its own, no explainer
    assert "Traceback" not in bad.text + shape.text + missing.text + explain.text


def test_a_predictor_cannot_read_secrets_or_other_models(
    platform: Server, owner: LoomClient, custom: dict[str, Any], tmp_path: Path
) -> None:
    """A probe predictor in the sandbox cannot read the platform's token, its database or
    artifacts, another deployment's model files or access rules; the caller's token (and
    cookie) never reach it, while the request's other headers do; its environment holds no
    LOOM_ setting and it runs as its own uid."""
    register(owner, model_zip({"predictor.py": PROBE.encode()}), name="probe")
    owner.deploy("probe", "probe")
    try:
        found = owner.wait_deployment("probe", timeout=FIRST_BUILD_S)
        home = platform.home
        other = next(p for p in (home / "deployments").iterdir()
                     if (p / "model-v1" / "model.onnx").exists())  # fmt: skip
        paths = [str(home / "token"), str(home / "loom.db"), str(other / "model-v1" / "model.onnx"),
                 str(other / "access.json"), str(other / "spec.json"), "/etc/shadow"]  # fmt: skip
        folders = [str(home), str(home / "deployments"), str(home / "artifacts"), str(other)]
        headers = {**auth(platform), "Cookie": "session=secret", "X-Request-Id": "probe-1"}
        answer = httpx.post(found["urls"]["v1_predict"], headers=headers, timeout=30,
                            json={"paths": paths, "folders": folders})  # fmt: skip
        assert answer.status_code == 200, answer.text
        seen = answer.json()
        assert all(not said.startswith("read") for said in seen["files"].values()), seen
        assert all(isinstance(said, str) for said in seen["folders"].values()), seen
        assert "authorization" not in seen["headers"] and "cookie" not in seen["headers"]
        assert seen["headers"]["x-request-id"] == "probe-1"
        assert platform.admin_token not in json.dumps(seen)
        assert not [name for name in seen["env"] if name.startswith(("LOOM_", "AWS_"))]
        assert seen["uid"] != 0
    finally:
        owner.delete_deployment("probe")
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_a_transformer_sits_in_front_of_an_onnx_deployment(
    platform: Server, owner: LoomClient, onnx_dir: Path
) -> None:
    """`deploy(…, transformer=FOLDER)`: the example transformer's preprocess turns raw pixels
    (V1) into the V2 request the ONNX model takes, and its postprocess names the digits the
    model picked; its InvalidInput is the caller's 400; the model's metadata is the model's."""
    files = {"model.onnx": (onnx_dir / "model.onnx").read_bytes()}
    register(owner, model_zip(files), name="digits-onnx")
    owner.deploy("digits-named", "digits-onnx", transformer=EXAMPLE / "transformer")
    try:
        found = owner.wait_deployment("digits-named", timeout=FIRST_BUILD_S)
        assert found["transformer"] is True
        pixels = np.random.default_rng(4).integers(0, 17, (3, 8, 8))
        names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
        want = onnx_logits(onnx_dir, (pixels / 16.0).astype(np.float32)[:, None]).argmax(axis=1)
        rows = [{"pixels": p.tolist()} for p in pixels]
        answer = httpx.post(found["urls"]["v1_predict"], headers=auth(platform), timeout=30,
                            json={"instances": rows})  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"predictions": [names[d] for d in want]}
        bad = httpx.post(found["urls"]["v1_predict"], headers=auth(platform), timeout=30,
                         json={"instances": [[1, 2]]})  # fmt: skip
        assert bad.status_code == 400 and "pixels" in bad.json()["error"], bad.text
        meta = httpx.get(f"{found['endpoint']}/v2/models/digits-named", headers=auth(platform))
        assert meta.json()["platform"] == "onnxruntime_onnx"
        replicas = owner.deployment("digits-named")["replica_list"]
        assert sorted(r["version"] for r in replicas) == ["1", "transformer"]
    finally:
        owner.delete_deployment("digits-named")
