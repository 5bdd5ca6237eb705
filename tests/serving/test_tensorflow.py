"""A TensorFlow SavedModel served natively by its serving signature, in a replica whose
environment holds TensorFlow (built once, shared with this test's own export): the digits CNN of
`examples/digits-tensorflow`, exported as that example does with a signature that takes encoded
images, answers TF Serving's `{"instances": [{"b64": …}]}` in V1 and BYTES tensors in V2 (JSON
and binary) as the SavedModel itself does.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from loom.client import LoomClient
from tests.conftest import COPY, ROOT, Server, register
from tests.serving.environments import python_for

pytestmark = pytest.mark.integration

EXPORT = """
import base64, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import keras, numpy as np, tensorflow as tf
from sklearn.datasets import load_digits
from train import digits_cnn
from serving import export_image_model

out = Path(sys.argv[2])
digits = load_digits()
x, y = (digits.images / 16.0).astype(np.float32), digits.target
keras.utils.set_random_seed(0)
model = digits_cnn()
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x[:1200], y[:1200], epochs=3, batch_size=64, verbose=0)
export_image_model(model, out / "saved_model")
images = [tf.io.encode_jpeg(tf.constant((im * 255).astype(np.uint8)[:, :, None]),
                            quality=100).numpy() for im in x[1200:1208]]
served = tf.saved_model.load(str(out / "saved_model")).signatures["serving_default"]
answer = served(image_bytes=tf.constant(images))
json.dump({"images": [base64.b64encode(i).decode() for i in images],
           "labels": y[1200:1208].tolist(),
           "classes": answer["class"].numpy().tolist(),
           "probabilities": answer["probabilities"].numpy().tolist()},
          open(out / "expected.json", "w"))
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's SavedModel, trained briefly and exported by the example's own code in
    the environment a TensorFlow replica gets (one build for both)."""
    folder = tmp_path_factory.mktemp("tf")
    python = python_for("tensorflow")
    example = ROOT / "examples" / "digits-tensorflow"
    done = subprocess.run([str(python), "-c", EXPORT, str(example), str(folder)],
                          check=False, capture_output=True, text=True, timeout=600,
                          env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def model_zip(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in (folder / "saved_model").rglob("*"):
            archive.write(path, f"model/{path.relative_to(folder).as_posix()}")
        archive.writestr("copy.py", COPY)
    return buffer.getvalue()


def post(server: Server, url: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.admin_token}", **kwargs.pop("headers", {})}
    return httpx.post(url, headers=headers, timeout=60, **kwargs)


def test_the_example_savedmodel_answers_base64_images(
    code_platform: Server, code_owner: LoomClient, exported: Path
) -> None:
    """Deployed with --runtime tensorflow, the SavedModel's metadata is its signature's, V1
    takes {"b64": …} images and answers every output per image, V2 takes the JPEG bytes as a
    BYTES tensor (binary extension, or {"b64": …} in JSON): the same classes and
    probabilities as the SavedModel called in-process, and mostly the right digits."""
    expected = json.loads((exported / "expected.json").read_text())
    register(code_owner, model_zip(exported), name="digits-tf")
    code_owner.deploy("digits-tf", "digits-tf", runtime="tensorflow")
    try:
        found = code_owner.wait_deployment("digits-tf", timeout=900)
        meta = httpx.get(f"{found['endpoint']}/v2/models/digits-tf", timeout=30, headers={
            "Authorization": f"Bearer {code_platform.admin_token}"}).json()  # fmt: skip
        assert meta["platform"] == "tensorflow_savedmodel"
        assert meta["inputs"] == [{"name": "image_bytes", "datatype": "BYTES", "shape": [-1]}]
        assert {o["name"] for o in meta["outputs"]} == {"class", "probabilities"}

        instances = [{"b64": image} for image in expected["images"]]
        v1 = post(code_platform, found["urls"]["v1_predict"], json={"instances": instances})
        assert v1.status_code == 200, v1.text
        rows = v1.json()["predictions"]
        assert [row["class"] for row in rows] == expected["classes"]
        np.testing.assert_allclose([row["probabilities"] for row in rows],
                                   expected["probabilities"], atol=1e-5)  # fmt: skip
        right = np.mean(np.array(expected["classes"]) == np.array(expected["labels"]))
        assert right >= 0.75, expected

        raw = [base64.b64decode(image) for image in expected["images"]]
        section = b"".join(len(r).to_bytes(4, "little") + r for r in raw)
        header = json.dumps({"inputs": [{"name": "image_bytes", "shape": [len(raw)],
                                         "datatype": "BYTES",
                                         "parameters": {"binary_data_size": len(section)}}],
                             "outputs": [{"name": "class"}]}).encode()  # fmt: skip
        binary = post(code_platform, found["urls"]["v2_infer"], content=header + section,
                      headers={"Inference-Header-Content-Length": str(len(header))})  # fmt: skip
        assert binary.status_code == 200, binary.text
        assert binary.json()["outputs"][0]["data"] == expected["classes"]

        body = {"inputs": [{"name": "image_bytes", "shape": [len(raw)], "datatype": "BYTES",
                            "data": instances}]}  # fmt: skip
        in_json = post(code_platform, found["urls"]["v2_infer"], json=body)
        assert in_json.status_code == 200, in_json.text
        outputs = {o["name"]: o["data"] for o in in_json.json()["outputs"]}
        assert outputs["class"] == expected["classes"]
    finally:
        code_owner.delete_deployment("digits-tf")
