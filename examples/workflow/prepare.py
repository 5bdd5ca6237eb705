"""The workflow's data step: scikit-learn's digits (shipped with it, nothing downloaded), split
into training and test images by the seed and written to $RESULT_DIR/digits.npz, which later
steps name in their `inputs` (the platform copies it into their code folder); its size and
digest go to $RESULT_DIR/outputs.json, so the run records which data it trained on."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=args.seed, stratify=digits.target
    )
    digest = hashlib.sha256(x_train.tobytes() + y_train.tobytes()).hexdigest()[:16]
    counts = np.bincount(y_train, minlength=10).tolist()
    print(f"{len(x_train)} training and {len(x_test)} test images, split by seed {args.seed}")
    print(f"training images per digit: {counts}; digest {digest}")
    outputs = {"seed": args.seed, "train": len(x_train), "test": len(x_test), "digest": digest}
    results = Path(os.environ.get("RESULT_DIR", "results"))
    results.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        results / "digits.npz", x_train=x_train, x_test=x_test, y_train=y_train, y_test=y_test
    )
    (results / "outputs.json").write_text(json.dumps(outputs))


if __name__ == "__main__":
    main()
