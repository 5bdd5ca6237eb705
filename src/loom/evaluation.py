"""Evaluations of a model version, run as a pipeline step (or any job) and recorded with the
version: `from loom import evaluation`.

    results = {
        "accuracy": evaluation.accuracy(predict, x_test, y_test),
        "fairness": evaluation.fairness(predict, x_test, y_test, protected=2, privileged=1.0),
        "robustness": evaluation.robustness(predict_proba, x_test, y_test, eps=0.1),
        "explanations": evaluation.explanations(predict_proba, x_test[:50], names),
    }
    evaluation.record("digits@3", results)

`record` writes `$RESULT_DIR/evaluations.json`; when the job completes, the platform stores
each result with that version of the owner's model (its factsheet lists them). The toolkits are
IBM's AIF360 (fairness) and ART (robustness) and SHAP (explanations), imported only by the
function that needs them: install them in the step's environment
(`environment: {pip: [aif360, adversarial-robustness-toolbox, shap]}`), never in Loom's core.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

EVALUATIONS_FILE = "evaluations.json"
KINDS = ("accuracy", "fairness", "robustness", "explanations")

Predict = Callable[[Any], Any]


def accuracy(predict: Predict, x: Any, y: Any) -> dict[str, Any]:
    """The share of held-out samples whose predicted label (argmax of scores) is right."""
    import numpy as np

    labels = _labels(predict(x))
    truth = np.asarray(y)
    return {"accuracy": float((labels == truth).mean()), "samples": len(truth)}


def fairness(
    predict: Predict,
    x: Any,
    y: Any,
    *,
    protected: int,
    privileged: float,
    favorable: int = 1,
    feature_names: list[str] | None = None,
) -> dict[str, Any]:
    """AIF360's group-fairness metrics of the predictions over column `protected` (rows whose
    value equals `privileged` form the privileged group): statistical parity difference,
    disparate impact, equal opportunity and average odds differences."""
    import numpy as np
    import pandas as pd
    from aif360.datasets import BinaryLabelDataset
    from aif360.metrics import ClassificationMetric

    data = np.asarray(x, dtype=float).reshape(len(y), -1)
    names = feature_names or [f"feature_{i}" for i in range(data.shape[1])]
    attribute = names[protected]
    frame = pd.DataFrame(data, columns=names)
    frame[attribute] = (frame[attribute] == privileged).astype(float)
    truth = frame.assign(label=(np.asarray(y) == favorable).astype(float))
    predicted = frame.assign(label=(_labels(predict(x)) == favorable).astype(float))
    kwargs = {"label_names": ["label"], "protected_attribute_names": [attribute]}
    metric = ClassificationMetric(
        BinaryLabelDataset(df=truth, **kwargs),
        BinaryLabelDataset(df=predicted, **kwargs),
        unprivileged_groups=[{attribute: 0.0}],
        privileged_groups=[{attribute: 1.0}],
    )
    return {
        "protected_attribute": attribute,
        "statistical_parity_difference": float(metric.statistical_parity_difference()),
        "disparate_impact": _finite(metric.disparate_impact()),
        "equal_opportunity_difference": float(metric.equal_opportunity_difference()),
        "average_odds_difference": float(metric.average_odds_difference()),
        "toolkit": "aif360",
    }


def robustness(
    predict_proba: Predict, x: Any, y: Any, *, eps: float = 0.1, max_iter: int = 10
) -> dict[str, Any]:
    """Accuracy under ART's HopSkipJump black-box evasion attack within `eps` (L-inf), beside
    the clean accuracy: the model is only called, never differentiated."""
    import numpy as np
    from art.attacks.evasion import HopSkipJump
    from art.estimators.classification import BlackBoxClassifier

    data = np.asarray(x, dtype=np.float32)
    scores = np.asarray(predict_proba(data))
    classes = scores.shape[1]
    low, high = float(data.min()), float(data.max())
    classifier = BlackBoxClassifier(
        lambda batch: np.asarray(predict_proba(np.asarray(batch, dtype=np.float32))),
        input_shape=data.shape[1:],
        nb_classes=classes,
        clip_values=(low, high),
    )
    attack = HopSkipJump(classifier, norm=np.inf, max_iter=max_iter, max_eval=200, init_eval=20,
                         verbose=False)  # fmt: skip
    adversarial = attack.generate(data)
    moved = np.clip(adversarial, data - eps, data + eps)  # the budget the result is stated for
    truth = np.asarray(y)
    clean = float((scores.argmax(1) == truth).mean())
    attacked = float((np.asarray(predict_proba(moved)).argmax(1) == truth).mean())
    return {
        "attack": "HopSkipJump (L-inf)",
        "eps": eps,
        "clean_accuracy": clean,
        "adversarial_accuracy": attacked,
        "toolkit": "adversarial-robustness-toolbox",
    }


def explanations(
    predict_proba: Predict, x: Any, feature_names: list[str] | None = None, background: int = 20
) -> dict[str, Any]:
    """SHAP's mean absolute attribution per feature (KernelExplainer on a small background),
    largest first."""
    import numpy as np
    import shap

    data = np.asarray(x, dtype=float).reshape(len(x), -1)
    names = feature_names or [f"feature_{i}" for i in range(data.shape[1])]
    explainer = shap.KernelExplainer(
        lambda batch: np.asarray(predict_proba(batch.reshape(-1, *np.shape(x)[1:]))),
        data[:background],
    )
    values = np.asarray(explainer.shap_values(data, nsamples=100, silent=True))
    importance = np.abs(values).reshape(-1, data.shape[1]).mean(0) if values.ndim > 1 else values
    ranked = sorted(zip(names, importance.tolist(), strict=True), key=lambda p: -p[1])
    return {"method": "SHAP KernelExplainer", "importance": dict(ranked), "toolkit": "shap"}


def record(model: str, results: dict[str, dict[str, Any]]) -> Path:
    """Keep `results` (kind → values) for `model` (`NAME@VERSION`): written to RESULT_DIR,
    stored with the version when the job completes."""
    name, _, version = model.partition("@")
    if not name or not version.isdigit():
        raise ValueError(f"model: NAME@VERSION with a version number, got {model!r}")
    unknown = sorted(set(results) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown evaluation {unknown[0]!r}; kinds: {', '.join(KINDS)}")
    target = Path(os.environ.get("RESULT_DIR", ".")) / EVALUATIONS_FILE
    document = {"model": name, "version": int(version), "results": results}
    target.write_text(json.dumps(document, indent=2, default=float))
    return target


def _labels(scores: Any) -> Any:
    import numpy as np

    array = np.asarray(scores)
    return array.argmax(1) if array.ndim == 2 else array.astype(int)


def _finite(value: float) -> float | None:
    import math

    return float(value) if math.isfinite(value) else None
