"""The workflow's last step: asks the deployment (V2, JSON) about test images of the data
step's split, which no variant trained on; prints each prediction beside the true label and
records the score in $RESULT_DIR/outputs.json."""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--data", required=True, help="the data step's digits.npz")
    parser.add_argument("--count", type=int, default=12)
    args = parser.parse_args()
    split = np.load(args.data)
    images = split["x_test"][: args.count][:, None].astype(np.float32)
    labels = split["y_test"][: args.count]
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
