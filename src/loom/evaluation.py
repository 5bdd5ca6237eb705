"""Evaluations of a model version, run as a pipeline step (or any job) and recorded with the
version: `from loom import evaluation`, or the ready-made step `python -m loom.evaluation`.

    model = evaluation.load("inputs/train/model")      # a saved model, as Loom serves it
    results = {
        "accuracy": evaluation.accuracy(model.predict_proba, x_test, y_test),
        "fairness": evaluation.fairness(model.predict_proba, x_test, y_test, protected=2,
                                        privileged=1.0),
        "robustness": evaluation.robustness(model.predict_proba, x_test, y_test, eps=0.1),
        "explanations": evaluation.explanations(model.predict_proba, x_test[:50], names),
    }
    evaluation.record("credit@3", results)

`record` writes `$RESULT_DIR/evaluations.json`; when the job completes, the platform stores
each result with that version of the owner's model (its factsheet lists them). The toolkits are
IBM's AIF360 (fairness) and ART (robustness), SHAP, and Captum (the explainer deployments use),
each imported only by the function that needs it: install them in the step's environment
(`environment: {pip: [aif360, adversarial-robustness-toolbox, shap]}`), never in Loom's core.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EVALUATIONS_FILE = "evaluations.json"
KINDS = ("accuracy", "fairness", "robustness", "explanations")

Predict = Callable[[Any], Any]


class Model:
    """A saved model folder (`tracking.save_model`, or any format Loom serves) run by the
    runtime a deployment would use, for evaluations: `predict_proba(x)` its scores."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        from loom.serving.runtimes import load as load_runtime

        self.runtime = load_runtime(Path(folder))
        if len(self.runtime.inputs) != 1:
            raise ValueError(f"{folder}: evaluations take a model of one input")
        self.input = self.runtime.inputs[0]
        self.output = self.runtime.outputs[0].name

    def predict_proba(self, x: Any) -> Any:
        import numpy as np

        dtype = np.int64 if self.input.datatype.startswith("INT") else np.float32
        batch = np.asarray(x, dtype=dtype)
        return np.asarray(self.runtime.infer({self.input.name: batch})[self.output])


def load(folder: str | os.PathLike[str]) -> Model:
    return Model(folder)


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
        "privileged_share": float(frame[attribute].mean()),
        "statistical_parity_difference": _finite(metric.statistical_parity_difference()),
        "disparate_impact": _finite(metric.disparate_impact()),
        "equal_opportunity_difference": _finite(metric.equal_opportunity_difference()),
        "average_odds_difference": _finite(metric.average_odds_difference()),
        "samples": len(data),
        "toolkit": "aif360",
    }


def robustness(
    predict_proba: Predict, x: Any, y: Any, *, eps: float = 0.1, max_iter: int = 10
) -> dict[str, Any]:
    """Accuracy under ART's HopSkipJump black-box evasion attack within `eps` (L-inf), beside
    the clean accuracy: the model is only called, never differentiated. A sample counts as
    robust when it is classified right both as given and as attacked."""
    import numpy as np
    from art.attacks.evasion import HopSkipJump
    from art.estimators.classification import BlackBoxClassifier

    data = np.asarray(x, dtype=np.float32)
    scores = np.asarray(predict_proba(data))
    low, high = float(data.min()), float(data.max())
    classifier = BlackBoxClassifier(
        lambda batch: np.asarray(predict_proba(np.asarray(batch, dtype=np.float32))),
        input_shape=data.shape[1:],
        nb_classes=scores.shape[1],
        clip_values=(low, high),
    )
    attack = HopSkipJump(
        classifier, norm=np.inf, max_iter=max_iter, max_eval=200, init_eval=20, verbose=False
    )
    adversarial = attack.generate(data)
    moved = np.clip(adversarial, data - eps, data + eps)  # the budget the result is stated for
    truth = np.asarray(y)
    clean = scores.argmax(1) == truth
    attacked = np.asarray(predict_proba(moved)).argmax(1) == truth
    return {
        "attack": "HopSkipJump (L-inf)",
        "eps": eps,
        "clean_accuracy": float(clean.mean()),
        "adversarial_accuracy": float((clean & attacked).mean()),
        "samples": len(data),
        "toolkit": "adversarial-robustness-toolbox",
    }


def explanations(
    predict_proba: Predict,
    x: Any,
    feature_names: list[str] | None = None,
    *,
    method: str = "shap",
    background: int = 20,
) -> dict[str, Any]:
    """Each feature's mean absolute attribution over `x`, largest first: SHAP's
    KernelExplainer on a small background (`method="shap"`), or Captum's feature ablation,
    the explainer deployments answer `:explain` with (`method="captum"`)."""
    import numpy as np

    data = np.asarray(x, dtype=np.float32)
    names = feature_names or [f"feature_{i}" for i in range(int(np.prod(data.shape[1:])))]
    if method == "captum":
        from loom.serving.explainers import METHOD, ablation

        found = ablation(predict_proba, data)
        importance = np.abs(found.attributions.reshape(len(data), -1)).mean(0)
        described = METHOD
    elif method == "shap":
        importance = _shap_importance(predict_proba, data, background)
        described = "SHAP KernelExplainer"
    else:
        raise ValueError(f"method: 'shap' or 'captum', got {method!r}")
    ranked = sorted(zip(names, importance.tolist(), strict=True), key=lambda p: -p[1])
    return {
        "method": described,
        "importance": dict(ranked),
        "samples": len(data),
        "toolkit": method,
    }


def _shap_importance(predict_proba: Predict, data: Any, background: int) -> Any:
    import numpy as np
    import shap

    flat = data.reshape(len(data), -1)
    explainer = shap.KernelExplainer(
        lambda batch: np.asarray(predict_proba(batch.reshape(-1, *data.shape[1:]))),
        flat[:background],
    )
    values = explainer.shap_values(flat, nsamples=100, silent=True)
    # (samples, features), (samples, features, outputs), or a list of the first per output
    found = np.stack(values, -1) if isinstance(values, list) else np.asarray(values)
    return np.abs(found).mean(axis=(0, 2) if found.ndim == 3 else 0)


def record(model: str, results: dict[str, dict[str, Any]]) -> Path:
    """Keep `results` (kind → values) for `model` (`NAME@VERSION`): written to RESULT_DIR,
    stored with the version when the job completes."""
    name, _, version = model.partition("@")
    if not name or not version.isdecimal():
        raise ValueError(f"model: NAME@VERSION with a version number, got {model!r}")
    unknown = sorted(set(results) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown evaluation {unknown[0]!r}; kinds: {', '.join(KINDS)}")
    target = Path(os.environ.get("RESULT_DIR", ".")) / EVALUATIONS_FILE
    document = {"model": name, "version": int(version), "results": results}
    target.write_text(json.dumps(document, indent=2, default=float))
    return target


def evaluate(
    model: Model,
    x: Any,
    y: Any,
    *,
    kinds: Sequence[str] = KINDS,
    protected: int | None = None,
    privileged: float = 1.0,
    feature_names: list[str] | None = None,
    eps: float = 0.1,
    samples: int = 50,
) -> dict[str, dict[str, Any]]:
    """The evaluations `kinds` of `model` on a held-out set; the attack and the explainers,
    which call the model thousands of times, on its first `samples` rows."""
    predict = model.predict_proba
    few_x, few_y = x[:samples], y[:samples]
    results: dict[str, dict[str, Any]] = {}
    if "accuracy" in kinds:
        results["accuracy"] = accuracy(predict, x, y)
    if "fairness" in kinds:
        if protected is None:
            raise ValueError("fairness: name the protected attribute's column (--protected)")
        results["fairness"] = fairness(
            predict, x, y, protected=protected, privileged=privileged, feature_names=feature_names
        )
    if "robustness" in kinds:
        results["robustness"] = robustness(predict, few_x, few_y, eps=eps)
    if "explanations" in kinds:
        shap_found = explanations(predict, few_x, feature_names, method="shap")
        captum_found = explanations(predict, few_x, feature_names, method="captum")
        results["explanations"] = {**shap_found, "captum": captum_found}
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """The evaluation step: `python -m loom.evaluation --model-dir DIR --data test.npz
    --record NAME@VERSION [--protected COLUMN] ...`."""
    args = _parser().parse_args(argv)
    import numpy as np

    with np.load(args.data, allow_pickle=False) as data:
        x, y = data[args.x], data[args.y]
    names = args.features.split(",") if args.features else None
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"--kinds: unknown {unknown[0]!r}; kinds: {', '.join(KINDS)}")
    results = evaluate(
        load(args.model_dir),
        x,
        y,
        kinds=kinds,
        protected=args.protected,
        privileged=args.privileged,
        feature_names=names,
        eps=args.eps,
        samples=args.samples,
    )
    print(json.dumps(results, indent=1, default=float))
    if args.record:
        record(args.record, results)
        print(f"recorded evaluations of {args.record}: {', '.join(results)}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loom.evaluation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model-dir", required=True, help="the saved model's folder")
    parser.add_argument("--data", required=True, help="an .npz file of the held-out set")
    parser.add_argument("--x", default="x_test", help="its inputs' array (default x_test)")
    parser.add_argument("--y", default="y_test", help="its labels' array (default y_test)")
    parser.add_argument("--record", default="", help="NAME@VERSION the results are stored with")
    parser.add_argument("--kinds", default=",".join(KINDS), help="which evaluations to run")
    parser.add_argument("--protected", type=int, help="the protected attribute's column")
    parser.add_argument(
        "--privileged", type=float, default=1.0, help="its value for the privileged group"
    )
    parser.add_argument("--features", default="", help="the features' names, comma-separated")
    parser.add_argument("--eps", type=float, default=0.1, help="the attack's L-inf budget")
    parser.add_argument(
        "--samples",
        type=int,
        default=50,
        help="rows attacked and explained (each costs many model calls)",
    )
    return parser


def _labels(scores: Any) -> Any:
    import numpy as np

    array = np.asarray(scores)
    return array.argmax(1) if array.ndim == 2 else array.astype(int)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


if __name__ == "__main__":
    main()
