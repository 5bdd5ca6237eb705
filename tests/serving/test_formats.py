"""Which file of a model version is served; MLflow model folders with an onnx flavour."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from loom.serving.formats import NotServable, model_file
from tests.serving.test_rest import ModelServer, models  # noqa: F401  (a fixture)

ONNX_FLAVOUR = "flavors:\n  onnx:\n    data: onnx/digits.onnx\n    onnx_version: 1.17.0\n"


def choose(files: dict[str, str]) -> str:
    return model_file(set(files), lambda name: files[name].encode(), lambda name: []).path


def test_loom_files_first_then_an_mlflow_onnx_flavour() -> None:
    assert choose({"model.pt": "", "model.onnx": "", "MLmodel": ""}) == "model.onnx"
    assert choose({"model.pt": "", "signature.json": ""}) == "model.pt"
    assert choose({"MLmodel": ONNX_FLAVOUR, "onnx/digits.onnx": ""}) == "onnx/digits.onnx"


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"weights.bin": ""}, "no model file this platform serves"),
        ({"MLmodel": "flavors:\n  sklearn: {pickled_model: model.pkl}\n", "model.pkl": ""},
         "flavours sklearn: none is served (it needs a python_function flavour"),
        ({"MLmodel": "flavors:\n  onnx: {data: ../../etc/passwd}\n"}, "not a file of the model"),
        ({"MLmodel": "flavors: [\n"}, "not YAML"),
        ({"MLmodel": "artifact_path: x\n"}, "names no flavour"),
    ],
)  # fmt: skip
def test_what_is_not_served_says_why(files: dict[str, str], words: str) -> None:
    with pytest.raises(NotServable) as raised:
        choose(files)
    assert words in str(raised.value)


@pytest.mark.integration
def test_an_mlflow_model_folder_is_served(models: Path, tmp_path: Path) -> None:  # noqa: F811
    folder = tmp_path / "mlflow-model"
    (folder / "onnx").mkdir(parents=True)
    shutil.copyfile(models / "digits" / "model.onnx", folder / "onnx" / "digits.onnx")
    (folder / "MLmodel").write_text(ONNX_FLAVOUR)
    server = ModelServer(folder, "digits")
    try:
        images = np.zeros((2, 1, 8, 8), dtype=np.float32)
        answer = httpx.post(f"{server.url}/v2/models/digits/infer", json={"inputs": [
            {"name": "image", "shape": [2, 1, 8, 8], "datatype": "FP32",
             "data": images.ravel().tolist()}]})  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json()["outputs"][0]["shape"] == [2, 10]
    finally:
        assert "Traceback" not in server.stop()
