"""Gradient-boosted trees on `load_digits`, with XGBoost or LightGBM through their scikit-learn
API, saved for serving as ONNX (never as a pickle or a booster's own file).

`tracking.save_sklearn_model` converts the fitted model with skl2onnx and onnxmltools'
converters into `$RESULT_DIR/model/`, which Loom registers and serves over V2 (outputs `label`
and `probabilities`) and V1.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from loom import tracking


def booster(name: str, trees: int, depth: int, seed: int) -> Any:
    if name == "xgboost":
        from xgboost import XGBClassifier

        return XGBClassifier(n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1)
    from lightgbm import LGBMClassifier

    return LGBMClassifier(
        n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1, verbose=-1
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--booster", choices=["xgboost", "lightgbm"], default="xgboost")
    parser.add_argument("--trees", type=int, default=60)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=args.seed, stratify=digits.target
    )
    tracking.log_params(model=args.booster, trees=args.trees, depth=args.depth)
    model = booster(args.booster, args.trees, args.depth, args.seed)
    model.fit(x_train, y_train)
    accuracy = float(np.mean(model.predict(x_test) == y_test))
    tracking.log_metrics(step=1, group="test", accuracy=accuracy)
    target = tracking.save_sklearn_model(model, x_test[:4], input_name="pixels")
    print(f"{args.booster} test accuracy: {accuracy:.4f}")
    print(f"model saved to {target}")


if __name__ == "__main__":
    main()
