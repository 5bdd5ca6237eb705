"""The workflow's last step: asks the deployment (V2, JSON) about test images no variant
trained on, prints each prediction beside the true label, and records the score in
$RESULT_DIR/outputs.json."""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=12)
    args = parser.parse_args()
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    _, x_test, _, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=args.seed, stratify=digits.target
    )
    images, labels = x_test[: args.count], y_test[: args.count]
    body = {
        "inputs": [
            {
                "name": "image",
                "shape": list(images.shape),
                "datatype": "FP32",
                "data": images.ravel().tolist(),
            }
        ]
    }
    request = urllib.request.Request(
        args.url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        logits = json.load(response)["outputs"][0]["data"]
    right = 0
    for i, label in enumerate(labels):
        row = logits[i * 10 : (i + 1) * 10]
        predicted = max(range(10), key=row.__getitem__)
        right += int(predicted == label)
        mark = "right" if predicted == label else "wrong"
        print(f"test image {i:2d}: predicted {predicted}, true label {label} ({mark})", flush=True)
    print(f"{right} of {len(labels)} right", flush=True)
    results = Path(os.environ.get("RESULT_DIR", "results"))
    results.mkdir(parents=True, exist_ok=True)
    (results / "outputs.json").write_text(json.dumps({"right": right, "asked": len(labels)}))


if __name__ == "__main__":
    main()
