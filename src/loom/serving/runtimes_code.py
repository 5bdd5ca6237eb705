"""Runtimes for formats whose loading runs their author's code: scikit-learn pickles, modules
saved with `torch.save`, MLflow models by their `python_function` flavour, and LightGBM's own
files. Only a replica loads them — inside its sandbox, in an environment built from the model's
requirements (`replica_env`) — never the platform or the gateway.

Each takes its inputs' names, types and shapes from what the model carries (its fitted number
of features, an MLflow signature) or from `signature.json` beside it (`tracking.save_model`'s),
so that V2 metadata describes it and requests are checked against it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from loom.serving.runtimes import TensorSpec, TorchScriptRuntime
from loom.serving.tensors import TORCH_TYPES, datatype_of


def _signature_file(folder: Path) -> dict[str, Any] | None:
    path = folder / "signature.json"
    if not path.is_file():
        return None
    found = json.loads(path.read_text())
    return found if isinstance(found, dict) else None


def _specs(listed: list[dict[str, Any]]) -> list[TensorSpec]:
    return [
        TensorSpec(
            str(s["name"]),
            TORCH_TYPES.get(str(s["datatype"]), str(s["datatype"])),
            [int(d) for d in s["shape"]],
        )
        for s in listed
    ]


def _on_path(folder: Path) -> None:
    """The model's folder first on the path: the classes its pickle names import from it."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


class SklearnRuntime:
    """A scikit-learn estimator or pipeline saved with joblib or pickle. One input, FP64
    [-1, features] (or as `signature.json` says); a classifier answers `predictions` (its
    classes) and `probabilities`, anything else `predictions`."""

    platform = "sklearn"
    device = "cpu"

    def __init__(self, path: Path) -> None:
        import joblib

        _on_path(path.parent)
        self.model = joblib.load(path)
        signature = _signature_file(path.parent)
        if signature is not None:
            self.inputs = _specs(signature["inputs"])
        else:
            features = int(getattr(self.model, "n_features_in_", -1) or -1)
            self.inputs = [TensorSpec("input-0", "FP64", [-1, features])]
        self.probabilities = hasattr(self.model, "predict_proba")
        classes = getattr(self.model, "classes_", None)
        kind = datatype_of(np.asarray(classes)) if classes is not None else "FP64"
        self.outputs = [TensorSpec("predictions", kind, [-1])]
        if self.probabilities:
            count = len(classes) if classes is not None else -1
            self.outputs.append(TensorSpec("probabilities", "FP64", [-1, count]))

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        x = inputs[self.inputs[0].name]
        answer = {"predictions": np.asarray(self.model.predict(x))}
        if self.probabilities:
            answer["probabilities"] = np.asarray(self.model.predict_proba(x), dtype=np.float64)
        return answer


class TorchPickleRuntime(TorchScriptRuntime):
    """A module saved whole with `torch.save`, whose classes import from the model's folder;
    its inputs and outputs from `signature.json` (pickles do not carry them)."""

    platform = "pytorch"

    def _module(self, path: Path) -> Any:
        import torch

        _on_path(path.parent)
        if not (path.parent / "signature.json").is_file():
            raise ValueError(
                f"{path.name} is a torch.save pickle, which does not carry its inputs' names "
                "and shapes: save signature.json beside it (tracking.save_model writes one)"
            )
        module = torch.load(str(path), map_location=self.device, weights_only=False)
        if not isinstance(module, torch.nn.Module):
            raise ValueError(
                f"{path.name} holds a {type(module).__name__}, not a module: save the module "
                "itself (torch.save(model)), or its weights with the code that builds it in a "
                "predictor.py"
            )
        return module.eval()


class PyfuncRuntime:
    """An MLflow model by its `python_function` flavour (`mlflow.pyfunc.load_model`): every
    MLflow flavour that has one serves. Its tensor signature names the inputs (one tensor: an
    array; several: a dict of arrays); a column signature makes each column an input of one
    value per row (a DataFrame); no signature, one FP64 input of any shape."""

    platform = "mlflow_pyfunc"
    device = "cpu"

    def __init__(self, folder: Path, signature: dict[str, Any] | None) -> None:
        import mlflow.pyfunc

        _on_path(folder)
        self.model = mlflow.pyfunc.load_model(str(folder))
        self.columns = False
        if signature is not None:
            self.inputs = _specs(signature["inputs"])
            self.outputs = _specs(signature["outputs"])
        else:
            self.inputs, self.columns = self._from_schema()
            self.outputs = [TensorSpec("predictions", "FP64", [-1])]

    def _from_schema(self) -> tuple[list[TensorSpec], bool]:
        schema = self.model.metadata.get_input_schema()
        if schema is None or not schema.has_input_names() or schema.is_tensor_spec():
            return [TensorSpec("input-0", "FP64", [])], False
        types = {"double": "FP64", "float": "FP32", "long": "INT64", "integer": "INT32",
                 "boolean": "BOOL", "string": "BYTES", "binary": "BYTES"}  # fmt: skip
        specs = [
            TensorSpec(str(col.name), types.get(str(col.type.name), "FP64"), [-1])
            for col in schema.inputs
        ]
        return specs, True

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        if self.columns:
            import pandas

            data: Any = pandas.DataFrame({s.name: inputs[s.name] for s in self.inputs})
        elif len(self.inputs) == 1:
            data = inputs[self.inputs[0].name]
        else:
            data = {s.name: inputs[s.name] for s in self.inputs}
        result = self.model.predict(data)
        return _outputs(result, [s.name for s in self.outputs])


def _outputs(result: Any, names: list[str]) -> dict[str, np.ndarray[Any, Any]]:
    """A pyfunc's answer (array, DataFrame, Series, dict or list) as named arrays."""
    if isinstance(result, dict):
        return {str(k): np.asarray(v) for k, v in result.items()}
    if hasattr(result, "columns") and len(names) > 1:
        return {name: np.asarray(result[name]) for name in names if name in result.columns}
    array = np.asarray(result.to_numpy() if hasattr(result, "to_numpy") else result)
    return {names[0] if names else "predictions": array}


class LightGBMRuntime:
    """A LightGBM Booster from its own text file (`booster.save_model`). One FP64 input
    [-1, features]; `predictions` are what `Booster.predict` answers (a probability per class
    for a multi-class model)."""

    platform = "lightgbm"
    device = "cpu"

    def __init__(self, path: Path) -> None:
        import lightgbm

        self.booster = lightgbm.Booster(model_file=str(path), params={"num_threads": 1})
        self.inputs = [TensorSpec("input-0", "FP64", [-1, self.booster.num_feature()])]
        classes = int(self.booster.params.get("num_class", 1) or 1)
        shape = [-1] if classes <= 1 else [-1, classes]
        self.outputs = [TensorSpec("predictions", "FP64", shape)]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        values = self.booster.predict(inputs["input-0"], num_threads=1)
        return {"predictions": np.asarray(values, dtype=np.float64)}
