"""Formats whose loading runs their author's code, each deployed on a real platform and served
from inside the replica's sandbox: a scikit-learn pickle, a `torch.save`d module with its code,
and an MLflow model by its pyfunc flavour (in an environment built from its requirements).

A pickle that touches a file in /tmp when unpickled proves where it was unpickled: in the
replica's private /tmp, never by the platform or the gateway, whose /tmp is the host's.
"""

from __future__ import annotations

import io
import json
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from loom.client import LoomClient
from tests.conftest import COPY, Server, register
from tests.serving.test_mlflow_flavours import SIGNATURE_64, pyfunc, write_mlmodel

pytestmark = pytest.mark.integration

MARKED = '''
import os
from sklearn.linear_model import LogisticRegression


class Marked(LogisticRegression):
    """Unpickled, it leaves a file in /tmp: the proof of which /tmp it was unpickled in."""

    marker = ""

    def __setstate__(self, state):
        super().__setstate__(state)
        open(self.marker, "w").close()
'''

NET = '''
import torch


class Digits(torch.nn.Module):
    """The module's class: torch.save pickles a reference to it, not its code."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.layer(x.reshape(x.shape[0], -1))
'''


def model_zip(folder: Path) -> bytes:
    """A job that registers `folder` as its model (RESULT_DIR/model)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in folder.rglob("*"):
            if "__pycache__" not in path.parts:
                archive.write(path, f"model/{path.relative_to(folder).as_posix()}")
        archive.writestr("copy.py", COPY)
    return buffer.getvalue()


def digits() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    from sklearn.datasets import load_digits

    data = load_digits()
    return (data.data / 16.0).astype(np.float64), data.target


def deployed(owner: LoomClient, folder: Path, name: str, **options: Any) -> dict[str, Any]:
    register(owner, model_zip(folder), name=name)
    owner.deploy(name, name, **options)
    return owner.wait_deployment(name, timeout=900)


def call(server: Server, url: str, body: dict[str, Any]) -> Any:
    answer = httpx.post(url, json=body, timeout=60,
                        headers={"Authorization": f"Bearer {server.admin_token}"})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return answer.json()


def v2(name: str, x: np.ndarray[Any, Any], datatype: str = "FP64") -> dict[str, Any]:
    return {"inputs": [{"name": name, "shape": list(x.shape), "datatype": datatype,
                        "data": x.ravel().tolist()}]}  # fmt: skip


def test_a_scikit_learn_pickle_is_unpickled_in_the_sandbox_only(
    code_platform: Server, code_owner: LoomClient, tmp_path: Path
) -> None:
    """model.joblib (a classifier whose class lives beside it) answers V1 with its classes and
    V2 with classes and probabilities, its metadata from the fitted model; the file its
    unpickling touches in /tmp never appears in the host's /tmp."""
    import joblib

    folder = tmp_path / "sk"
    folder.mkdir()
    (folder / "marked.py").write_text(MARKED)
    sys.path.insert(0, str(folder))
    try:
        from marked import Marked  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(folder))
    x, y = digits()
    model = Marked(max_iter=300).fit(x[:600], y[:600])
    model.marker = f"/tmp/loom-unpickled-{uuid.uuid4().hex}"
    joblib.dump(model, folder / "model.joblib")
    sys.modules.pop("marked", None)
    found = deployed(code_owner, folder, "sk-pickle")
    try:
        meta = httpx.get(f"{found['endpoint']}/v2/models/sk-pickle", timeout=30, headers={
            "Authorization": f"Bearer {code_platform.admin_token}"}).json()  # fmt: skip
        assert meta["platform"] == "sklearn"
        assert meta["inputs"] == [{"name": "input-0", "datatype": "FP64", "shape": [-1, 64]}]
        sample = x[600:605]
        v1 = call(code_platform, found["urls"]["v1_predict"], {"instances": sample.tolist()})
        assert v1 == {"predictions": model.predict(sample).tolist()}
        answer = call(code_platform, found["urls"]["v2_infer"], v2("input-0", sample))
        outputs = {o["name"]: o for o in answer["outputs"]}
        np.testing.assert_allclose(np.reshape(outputs["probabilities"]["data"], (5, 10)),
                                   model.predict_proba(sample), rtol=1e-9)  # fmt: skip
        assert not Path(model.marker).exists()  # unpickled in the replica's own /tmp
    finally:
        code_owner.delete_deployment("sk-pickle")


def test_a_torch_save_module_is_served_with_its_code(
    code_platform: Server, code_owner: LoomClient, tmp_path: Path
) -> None:
    """A module saved whole with torch.save (not scripted) loads in the replica with the class
    from net.py beside it, and answers what the module itself answers."""
    import torch

    folder = tmp_path / "pt"
    folder.mkdir()
    (folder / "net.py").write_text(NET)
    sys.path.insert(0, str(folder))
    try:
        from net import Digits  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(folder))
    torch.manual_seed(1)
    module = Digits().eval()
    torch.save(module, folder / "model.pt")
    sys.modules.pop("net", None)
    (folder / "signature.json").write_text(json.dumps({
        "inputs": [{"name": "image", "datatype": "float32", "shape": [-1, 8, 8]}],
        "outputs": [{"name": "logits", "datatype": "float32", "shape": [-1, 10]}]}))  # fmt: skip
    found = deployed(code_owner, folder, "pt-module")
    try:
        images = np.random.default_rng(2).random((4, 8, 8), dtype=np.float32)
        answer = call(code_platform, found["urls"]["v2_infer"], v2("image", images, "FP32"))
        with torch.no_grad():
            want = module(torch.from_numpy(images)).numpy()
        got = np.reshape(answer["outputs"][0]["data"], (4, 10))
        np.testing.assert_allclose(got, want, atol=1e-5)
    finally:
        code_owner.delete_deployment("pt-module")


def test_an_mlflow_model_is_served_by_its_pyfunc_flavour(
    code_platform: Server, code_owner: LoomClient, tmp_path: Path
) -> None:
    """An sklearn-flavour MLflow model, laid out as mlflow.sklearn.save_model writes it, is
    loaded by MLflow's own `mlflow.pyfunc.load_model` in an environment built from its
    requirements.txt, and answers V1 and V2 by its tensor signature."""
    import pickle

    from sklearn.linear_model import LogisticRegression

    x, y = digits()
    model = LogisticRegression(max_iter=300).fit(x[:600], y[:600])
    folder = tmp_path / "mlflow"
    folder.mkdir()
    (folder / "model.pkl").write_bytes(pickle.dumps(model))
    write_mlmodel(folder, {
        "python_function": pyfunc("mlflow.sklearn", "model.pkl", predict_fn="predict"),
        "sklearn": {"code": None, "pickled_model": "model.pkl",
                    "serialization_format": "pickle", "sklearn_version": "1.9.1"},
    }, SIGNATURE_64)  # fmt: skip
    (folder / "requirements.txt").write_text("mlflow==3.17.2\nscikit-learn==1.9.1\n")
    found = deployed(code_owner, folder, "mlflow-sk")
    try:
        assert found["runtime"] is None
        sample = x[600:604]
        v1 = call(code_platform, found["urls"]["v1_predict"], {"instances": sample.tolist()})
        assert v1 == {"predictions": model.predict(sample).tolist()}
        answer = call(code_platform, found["urls"]["v2_infer"], v2("input-0", sample))
        assert answer["outputs"][0]["data"] == model.predict(sample).tolist()
    finally:
        code_owner.delete_deployment("mlflow-sk")


def test_the_built_in_explainer_attributes_each_pixel(
    code_platform: Server, code_owner: LoomClient, tmp_path: Path
) -> None:
    """`explainer="captum"` on an ONNX deployment: `:explain` answers, per instance, the class
    the model picks and one attribution per pixel, each what blanking that pixel takes off the
    class's score (feature ablation, checked against ONNX Runtime for the strongest pixel)."""
    import onnxruntime

    from tests.serving.test_rest import digits_models

    folder = tmp_path / "onnx"
    digits_models(folder)
    (folder / "model.pt").unlink()
    found = deployed(code_owner, folder, "explained", explainer="captum")
    try:
        assert found["explainer"] == "captum"
        images = np.random.default_rng(5).random((2, 1, 8, 8), dtype=np.float32)
        url = f"{found['endpoint']}/v1/models/explained:explain"
        answer = call(code_platform, url, {"instances": images.tolist()})
        session = onnxruntime.InferenceSession(str(folder / "model.onnx"))
        logits = session.run(None, {"image": images})[0]
        assert answer["method"] == "captum.attr.FeatureAblation"
        for image, scores, explained in zip(images, logits, answer["explanations"], strict=True):
            target = int(scores.argmax())
            assert explained["target"] == target
            attributions = np.asarray(explained["attributions"])
            assert attributions.shape == (1, 8, 8)
            strongest = np.unravel_index(np.abs(attributions).argmax(), attributions.shape)
            blanked = image.copy()
            blanked[strongest] = 0.0
            after = session.run(None, {"image": blanked[None]})[0][0, target]
            assert attributions[strongest] == pytest.approx(scores[target] - after, abs=1e-4)
    finally:
        code_owner.delete_deployment("explained")
