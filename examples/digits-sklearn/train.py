"""A scikit-learn pipeline on `load_digits`, saved for serving as ONNX (never as a pickle).

Its parameters and accuracy go to Loom with the tracking SDK; `tracking.save_sklearn_model`
converts the fitted pipeline with skl2onnx into `$RESULT_DIR/model/`, which Loom registers and
serves over V2 (outputs `label` and `probabilities`).
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from loom import tracking


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--c", type=float, default=0.5, help="inverse regularisation strength")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=args.seed, stratify=digits.target
    )
    tracking.log_params(c=args.c, model="logistic-regression")
    model = make_pipeline(StandardScaler(), LogisticRegression(C=args.c, max_iter=500))
    model.fit(x_train, y_train)
    accuracy = float(model.score(x_test, y_test))
    tracking.log_metrics(step=1, group="test", accuracy=accuracy)
    target = tracking.save_sklearn_model(model, x_test[:4], input_name="pixels")
    print(f"test accuracy: {accuracy:.4f}")
    print(f"model saved to {target}")


if __name__ == "__main__":
    main()
