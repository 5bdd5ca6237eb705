"""XGBoost models in XGBoost's own formats (MLflow's `xgboost` flavour), run by
`Booster.inplace_predict` on one thread.

A model file is read by `Booster.load_model` as data (JSON or UBJSON); the class it was saved
from (`model_class` in the MLmodel) is only a name here, never imported. One FP32 input of
[-1, features]; a classifier answers `label` and `probabilities`, anything else `predictions`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from loom.serving.devices import NoDevice
from loom.serving.runtimes import TensorSpec

if TYPE_CHECKING:
    import xgboost

NEEDS = "the xgboost flavour needs XGBoost in the platform's Python: pip install 'loom-dl[xgboost]'"
PROBABILITIES = ("binary:logistic", "multi:softprob")  # a probability per class
LABELS = ("binary:hinge", "multi:softmax")  # the class itself
CLASSES = PROBABILITIES + LABELS
BOOSTER = "xgboost.core.Booster"


class XGBoostRuntime:
    """A Booster from `path`; `model_class` says whether it was a classifier, and `signature`
    (an MLmodel's tensor signature) may name its input."""

    platform = "xgboost"

    def __init__(
        self,
        path: Path,
        model_class: str = BOOSTER,
        signature: dict[str, Any] | None = None,
        device: str = "cpu",
    ) -> None:
        if device == "cuda":
            raise NoDevice("the xgboost flavour runs on the CPU only (xgboost-cpu)")
        self.device = "cpu"
        self.booster = _booster(path)
        params = json.loads(self.booster.save_config())["learner"]
        self.objective = str(params["objective"]["name"])
        self.classifier = _is_classifier(path, model_class, self.objective)
        self.iterations = _iterations(self.booster, model_class)
        model = params["learner_model_param"]
        self.inputs = [
            TensorSpec(_input_name(signature), "FP32", [-1, self.booster.num_features()])
        ]
        self.outputs = self._outputs(int(model["num_class"]), int(model.get("num_target", 1)))

    def _outputs(self, classes: int, targets: int) -> list[TensorSpec]:
        if not self.classifier:
            return [TensorSpec("predictions", "FP32", [-1] if targets <= 1 else [-1, targets])]
        label = TensorSpec("label", "INT64", [-1])
        if self.objective in LABELS:
            return [label]
        return [label, TensorSpec("probabilities", "FP32", [-1, max(classes, 2)])]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        values = self.booster.inplace_predict(
            inputs[self.inputs[0].name], iteration_range=self.iterations, validate_features=False
        )
        answer = np.asarray(values, dtype=np.float32)
        if not self.classifier:
            return {"predictions": answer}
        if self.objective in LABELS:
            return {"label": answer.astype(np.int64)}
        if answer.ndim == 1:  # binary:logistic: the second class's probability
            answer = np.stack([1 - answer, answer], axis=1)
            labels = (answer[:, 1] > 0.5).astype(np.int64)
        else:
            labels = answer.argmax(axis=1).astype(np.int64)
        return {"label": labels, "probabilities": answer}


def _booster(path: Path) -> xgboost.Booster:
    try:
        import xgboost
    except ImportError as exc:
        raise ImportError(NEEDS) from exc
    booster = xgboost.Booster()
    try:  # from memory: the format is told by the bytes, not the file's suffix
        booster.load_model(bytearray(path.read_bytes()))
    except xgboost.core.XGBoostError as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "unreadable"
        raise ValueError(f"{path}: XGBoost {xgboost.__version__} cannot read it ({first}); "
                         f"save it with model_format='json' or 'ubj'") from exc  # fmt: skip
    booster.set_param({"nthread": 1})
    return booster


def _is_classifier(path: Path, model_class: str, objective: str) -> bool:
    if objective in CLASSES:
        return True
    if model_class.endswith("Classifier"):
        raise ValueError(f"{path}: a classifier with objective {objective!r}, whose answers "
                         f"are neither classes nor probabilities")  # fmt: skip
    return False


def _iterations(booster: xgboost.Booster, model_class: str) -> tuple[int, int]:
    """The trees that answer: all of them for a Booster (as `Booster.predict`), those up to
    the best iteration for a scikit-learn model fitted with early stopping (as its `predict`)."""
    best = booster.attr("best_iteration")
    if model_class == BOOSTER or best is None:
        return (0, 0)
    return (0, int(best) + 1)


def _input_name(signature: dict[str, Any] | None) -> str:
    """The signature's name for the input when it has one tensor, else `input-0`."""
    inputs = (signature or {}).get("inputs") or []
    return str(inputs[0]["name"]) if len(inputs) == 1 else "input-0"
