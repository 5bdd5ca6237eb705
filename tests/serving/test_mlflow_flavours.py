"""MLflow model folders with the xgboost and pytorch (TorchScript) flavours, written as MLflow's
`save_model` lays them out, served by their runtimes and over HTTP; pickles are left to the
pyfunc flavour (loaded by a sandboxed replica only), told apart without being unpickled."""

from __future__ import annotations

import io
import json
import platform
import sys
import zipfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml

from loom.client import ClientError
from loom.serving import runtimes
from loom.serving.formats import NotServable, model_file
from loom.serving.runtimes import TensorSpec
from tests.conftest import COPY, Server, register
from tests.serving.test_rest import ModelServer

SIGNATURE_64 = {
    "inputs": [{"type": "tensor", "tensor-spec": {"dtype": "float64", "shape": [-1, 64]}}],
    "outputs": [{"type": "tensor", "tensor-spec": {"dtype": "int64", "shape": [-1]}}],
}
COLUMNS_64 = {
    "inputs": [{"type": "double", "name": f"pixel_{i}", "required": True} for i in range(64)],
    "outputs": [{"type": "tensor", "tensor-spec": {"dtype": "float32", "shape": [-1]}}],
}
SIGNATURE_IMAGES = {
    "inputs": [{"type": "tensor", "tensor-spec": {"dtype": "float32", "shape": [-1, 1, 8, 8]}}],
    "outputs": [{"type": "tensor", "tensor-spec": {"dtype": "float32", "shape": [-1, 10]}}],
}


class Marker:
    """Unpickled, it creates its file: the proof that a pickle was (or was not) loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


def write_mlmodel(
    folder: Path, flavours: dict[str, Any], signature: dict[str, Any] | None = None
) -> None:
    """An MLmodel as `mlflow.models.Model.save` writes it: YAML with the signature's inputs and
    outputs as JSON strings, and the environment files beside it."""
    document: dict[str, Any] = {
        "artifact_path": "model",
        "flavors": flavours,
        "mlflow_version": "2.17.2",
        "model_size_bytes": sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()),
        "model_uuid": "0f3c2d51b4a04f6c9a3f1e2d3c4b5a69",
        "utc_time_created": "2026-11-20 10:00:00.000000",
    }
    if signature is not None:
        document["signature"] = {k: json.dumps(v) for k, v in signature.items()}
        document["signature"]["params"] = None
    (folder / "MLmodel").write_text(yaml.safe_dump(document, default_flow_style=False))
    (folder / "conda.yaml").write_text("name: mlflow-env\ndependencies: [python=3.11]\n")
    (folder / "python_env.yaml").write_text("python: 3.11.7\nbuild_dependencies: [pip]\n")
    (folder / "requirements.txt").write_text("mlflow==2.17.2\n")


def pyfunc(loader: str, data: str, **extra: Any) -> dict[str, Any]:
    return {
        "data": data,
        "env": {"conda": "conda.yaml", "virtualenv": "python_env.yaml"},
        "loader_module": loader,
        "python_version": platform.python_version(),
        **extra,
    }


def mlflow_xgboost(
    folder: Path, model: Any, model_format: str, signature: dict[str, Any] | None
) -> Path:
    """What `mlflow.xgboost.save_model(model, folder, model_format=…)` writes."""
    import xgboost

    folder.mkdir(parents=True)
    data = f"model.{model_format}"
    model.save_model(str(folder / data))
    kind = f"{type(model).__module__}.{type(model).__qualname__}"
    write_mlmodel(folder, {
        "python_function": pyfunc("mlflow.xgboost", data),
        "xgboost": {"code": None, "data": data, "model_class": kind,
                    "model_format": model_format, "xgb_version": xgboost.__version__},
    }, signature)  # fmt: skip
    return folder


def mlflow_pytorch(folder: Path, save: Any, signature: dict[str, Any] | None) -> Path:
    """What `mlflow.pytorch.save_model` writes: `data/model.pth` by `save`, the pickle
    module's name beside it."""
    import torch

    (folder / "data").mkdir(parents=True)
    save(folder / "data" / "model.pth")
    (folder / "data" / "pickle_module_info.txt").write_text("mlflow.pytorch.pickle_module")
    write_mlmodel(folder, {
        "python_function": pyfunc("mlflow.pytorch", "data", model_config={"device": None},
                                  pickle_module_name="mlflow.pytorch.pickle_module"),
        "pytorch": {"code": None, "model_data": "data", "pytorch_version": str(torch.__version__)},
    }, signature)  # fmt: skip
    return folder


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    return images.astype(np.float32), labels


@pytest.fixture(scope="module")
def classifier(digits: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]) -> Any:
    """A small XGBClassifier on the digits, stopped early by held-out digits with shuffled
    labels: its best iteration is not its last, and its `predict` uses the best."""
    xgboost = pytest.importorskip("xgboost")
    images, labels = digits
    shuffled = np.random.default_rng(0).permutation(labels[1500:])
    model = xgboost.XGBClassifier(n_estimators=12, max_depth=3, n_jobs=1, early_stopping_rounds=3)
    model.fit(images[:1500], labels[:1500], eval_set=[(images[1500:], shuffled)], verbose=False)
    assert model.best_iteration + 1 < model.get_booster().num_boosted_rounds()
    return model


@pytest.mark.filterwarnings("ignore:.*Saving model in the UBJSON format as default")
@pytest.mark.parametrize("model_format", ["xgb", "json", "ubj"])
def test_an_xgboost_classifier_answers_as_xgboost_does(
    classifier: Any, digits: Any, tmp_path: Path, model_format: str
) -> None:
    """A classifier in each of MLflow's model formats answers XGBoost's own labels and
    probabilities, from an FP32 input of [-1, 64]."""
    images = digits[0][:200]
    runtime = runtimes.load(mlflow_xgboost(tmp_path / "m", classifier, model_format, SIGNATURE_64))
    assert runtime.platform == "xgboost"
    assert runtime.inputs == [TensorSpec("input-0", "FP32", [-1, 64])]
    assert runtime.outputs == [
        TensorSpec("label", "INT64", [-1]),
        TensorSpec("probabilities", "FP32", [-1, 10]),
    ]
    answer = runtime.infer({"input-0": images})
    np.testing.assert_array_equal(answer["label"], classifier.predict(images))
    np.testing.assert_array_equal(answer["probabilities"], classifier.predict_proba(images))
    assert answer["label"].dtype == np.int64


def test_a_binary_classifier_and_a_regressor(digits: Any, tmp_path: Path) -> None:
    """A binary classifier answers both classes' probabilities; a regressor `predictions`; a
    named tensor in the signature names the input, columns leave it `input-0`."""
    xgboost = pytest.importorskip("xgboost")
    images, labels = digits
    binary = xgboost.XGBClassifier(n_estimators=5, max_depth=2).fit(images, labels > 4)
    named = {**SIGNATURE_64, "inputs": [{**SIGNATURE_64["inputs"][0], "name": "pixels"}]}
    runtime = runtimes.load(mlflow_xgboost(tmp_path / "binary", binary, "json", named))
    assert [s.name for s in runtime.inputs] == ["pixels"]
    assert runtime.outputs[1] == TensorSpec("probabilities", "FP32", [-1, 2])
    answer = runtime.infer({"pixels": images[:100]})
    np.testing.assert_array_equal(answer["label"], binary.predict(images[:100]))
    np.testing.assert_array_equal(answer["probabilities"], binary.predict_proba(images[:100]))

    regressor = xgboost.XGBRegressor(n_estimators=5, max_depth=3).fit(images, labels)
    runtime = runtimes.load(mlflow_xgboost(tmp_path / "reg", regressor, "ubj", COLUMNS_64))
    assert runtime.inputs == [TensorSpec("input-0", "FP32", [-1, 64])]
    assert runtime.outputs == [TensorSpec("predictions", "FP32", [-1])]
    answer = runtime.infer({"input-0": images[:100]})
    np.testing.assert_array_equal(answer["predictions"], regressor.predict(images[:100]))


def test_without_xgboost_the_error_says_what_to_install(
    classifier: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where XGBoost is not installed, loading says which extra brings it."""
    folder = mlflow_xgboost(tmp_path / "m", classifier, "json", None)
    monkeypatch.setitem(sys.modules, "xgboost", None)  # `import xgboost` now fails
    with pytest.raises(ImportError, match=r"pip install 'loom-dl\[xgboost\]'"):
        runtimes.load(folder)


def scripted_digits() -> Any:
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 10),
    )  # fmt: skip
    return torch.jit.script(net.eval())


def test_a_torchscript_pytorch_flavour_is_served(digits: Any, tmp_path: Path) -> None:
    """A ScriptModule that mlflow.pytorch saved with torch.jit.save answers as itself, named
    and shaped by the MLmodel's signature."""
    import torch

    scripted = scripted_digits()
    folder = mlflow_pytorch(tmp_path / "m", scripted.save, SIGNATURE_IMAGES)
    runtime = runtimes.load(folder)
    assert runtime.platform == "pytorch_torchscript"
    assert runtime.inputs == [TensorSpec("input-0", "FP32", [-1, 1, 8, 8])]
    assert runtime.outputs == [TensorSpec("output-0", "FP32", [-1, 10])]
    images = (digits[0][:16] / 16.0).reshape(-1, 1, 8, 8)
    answer = runtime.infer({"input-0": images})
    with torch.no_grad():
        expected = scripted(torch.from_numpy(images)).numpy()
    np.testing.assert_array_equal(answer["output-0"], expected)


def chosen(folder: Path) -> str:
    """The kind of runtime the platform would choose for a model folder (names only)."""
    return runtimes.choose(folder).kind


def test_a_torchscript_without_a_signature_is_served_by_its_pyfunc(tmp_path: Path) -> None:
    """TorchScript does not carry its inputs: without the MLmodel's signature its pyfunc
    flavour serves it (in a replica's sandbox), rather than Loom's own runtime."""
    folder = mlflow_pytorch(tmp_path / "m", scripted_digits().save, None)
    assert chosen(folder) == "pyfunc"


@pytest.mark.parametrize("zipped", [True, False])
def test_a_torch_save_pickle_is_left_to_pyfunc_unread(tmp_path: Path, zipped: bool) -> None:
    """A module saved with torch.save (zip or legacy) is told from its zip's names alone and
    left to the pyfunc flavour: the marker its unpickling would create is not there, and is
    once it is unpickled."""
    import torch

    marker = tmp_path / "unpickled"
    net = torch.nn.Linear(64, 10)
    net.marker = Marker(marker)  # type: ignore[assignment]

    def save(path: Path) -> None:
        torch.save(net, str(path), _use_new_zipfile_serialization=zipped)

    folder = mlflow_pytorch(tmp_path / "m", save, SIGNATURE_IMAGES)
    assert chosen(folder) == "pyfunc"
    assert not marker.exists()
    torch.load(folder / "data" / "model.pth", weights_only=False)  # the author's code runs
    assert marker.exists()


def test_an_sklearn_flavour_is_chosen_unread(tmp_path: Path) -> None:
    """An sklearn-flavour model (a pickle) is served by its pyfunc flavour, chosen from the
    MLmodel alone: the pickle is not opened."""
    import pickle

    marker = tmp_path / "unpickled"
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.pkl").write_bytes(pickle.dumps(Marker(marker)))
    write_mlmodel(folder, {
        "python_function": pyfunc("mlflow.sklearn", "model.pkl", predict_fn="predict"),
        "sklearn": {"code": None, "pickled_model": "model.pkl",
                    "serialization_format": "cloudpickle", "sklearn_version": "1.9.1"},
    }, SIGNATURE_64)  # fmt: skip
    assert chosen(folder) == "pyfunc"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("flavour", "files", "words"),
    [
        ({"xgboost": {"data": "../model.json"}}, {"../model.json"}, "not a file of the model"),
        ({"xgboost": {"data": "model.pkl"}}, {"model.pkl"}, "not a .json, .ubj"),
        ({"pytorch": {"model_data": "data"}}, {"data/model.pt2"}, "none is served"),
        ({"pytorch": {"model_data": "/data"}}, {"/data/model.pth"}, "not a file of the model"),
    ],
)
def test_flavour_files_are_checked(flavour: Any, files: set[str], words: str) -> None:
    """The new flavours' files are inside the model and of a kind that is served."""
    mlmodel = yaml.safe_dump({"flavors": flavour}).encode()
    with pytest.raises(NotServable, match=words):
        model_file({"MLmodel", *files}, lambda name: mlmodel, lambda name: [])


@pytest.mark.integration
def test_an_xgboost_mlflow_model_is_served_over_http(
    classifier: Any, digits: Any, tmp_path: Path
) -> None:
    """`python -m loom.serving` serves an xgboost-flavour folder over V2 and V1."""
    folder = mlflow_xgboost(tmp_path / "m", classifier, "ubj", SIGNATURE_64)
    images = digits[0][:3]
    server = ModelServer(folder, "digits")
    try:
        meta = httpx.get(f"{server.url}/v2/models/digits").json()
        assert meta["platform"] == "xgboost"
        assert meta["inputs"] == [{"name": "input-0", "datatype": "FP32", "shape": [-1, 64]}]
        answer = httpx.post(f"{server.url}/v2/models/digits/infer", json={"inputs": [
            {"name": "input-0", "shape": [3, 64], "datatype": "FP32",
             "data": images.ravel().tolist()}]})  # fmt: skip
        assert answer.status_code == 200, answer.text
        outputs = {o["name"]: o for o in answer.json()["outputs"]}
        assert outputs["label"]["data"] == classifier.predict(images).tolist()
        assert outputs["label"]["datatype"] == "INT64"
        assert outputs["probabilities"]["shape"] == [3, 10]
        np.testing.assert_allclose(
            np.reshape(outputs["probabilities"]["data"], (3, 10)),
            classifier.predict_proba(images),
            rtol=1e-6,
        )
        v1 = httpx.post(f"{server.url}/v1/models/digits:predict",
                        json={"instances": images.tolist()})  # fmt: skip
        assert v1.status_code == 200, v1.text
        assert v1.json() == {"predictions": classifier.predict(images).tolist()}
    finally:
        assert "Traceback" not in server.stop()


def job_zip(folder: Path) -> bytes:
    """A job that registers `folder` as its model (RESULT_DIR/model)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in folder.rglob("*"):
            archive.write(path, f"model/{path.relative_to(folder).as_posix()}")
        archive.writestr("copy.py", COPY)
    return buffer.getvalue()


@pytest.mark.integration
def test_a_deployment_serves_xgboost_and_refuses_what_it_cannot_serve(
    server: Server, classifier: Any, digits: Any, tmp_path: Path
) -> None:
    """Registered versions: an xgboost flavour is deployed and answers; an MLmodel with no
    flavour that serves is refused when deployed (told from the registry's copy)."""
    named = {**SIGNATURE_64, "inputs": [{**SIGNATURE_64["inputs"][0], "name": "pixels"}]}
    boosted = mlflow_xgboost(tmp_path / "xgb", classifier, "json", named)
    unserved = tmp_path / "unserved"
    unserved.mkdir()
    (unserved / "model.pkl").write_bytes(b"")
    write_mlmodel(unserved, {"sklearn": {"pickled_model": "model.pkl"}}, SIGNATURE_64)
    images = digits[0][:4]
    with server.client() as client:
        register(client, job_zip(boosted), name="boosted")
        register(client, job_zip(unserved), name="unserved")
        with pytest.raises(ClientError, match=r"flavours sklearn: none is served"):
            client.deploy("unserved", "unserved")
        client.deploy("boosted", "boosted")
        try:
            found = client.wait_deployment("boosted", timeout=120)
            auth = {"Authorization": f"Bearer {server.admin_token}"}
            v1 = httpx.post(found["urls"]["v1_predict"], json={"instances": images.tolist()},
                            headers=auth, timeout=30)  # fmt: skip
            assert v1.status_code == 200, v1.text
            assert v1.json() == {"predictions": classifier.predict(images).tolist()}
        finally:
            client.delete_deployment("boosted")
