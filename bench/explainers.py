"""The built-in explainer's choice: Captum's perturbation methods over the digits CNN in ONNX
Runtime (the way a replica runs them, through the runtime's answers, no gradients), timed per
instance and scored by a deletion test — blank the 8 pixels each method ranks highest and see
how far the picked class's score falls (further: a more faithful ranking).

    python bench/explainers.py [--instances 16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import table

import serving as base


def main() -> None:
    import torch
    from captum.attr import FeatureAblation, KernelShap, ShapleyValueSampling

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=16)
    args = parser.parse_args()
    model = base.digits_model()
    session = base.session(model)
    name = session.get_inputs()[0].name
    images = base.test_images()[: args.instances]

    def run(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        result: np.ndarray[Any, Any] = session.run(None, {name: x.astype(np.float32)})[0]
        return result

    def forward(batch: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(run(batch.numpy()).astype(np.float64))

    targets = run(images).argmax(axis=1)
    methods: dict[str, Any] = {
        "FeatureAblation": lambda x, t: FeatureAblation(forward).attribute(
            x, target=t, baselines=0.0, perturbations_per_eval=64),
        "ShapleyValueSampling (5 samples)": lambda x, t: ShapleyValueSampling(forward).attribute(
            x, target=t, baselines=0.0, n_samples=5, perturbations_per_eval=64),
        "KernelShap (200 samples)": lambda x, t: KernelShap(forward).attribute(
            x, target=t, baselines=0.0, n_samples=200, perturbations_per_eval=64),
    }  # fmt: skip
    rows = []
    for label, method in methods.items():
        drops, began = [], time.perf_counter()
        for image, target in zip(images, targets, strict=True):
            x = torch.from_numpy(image[None].astype(np.float64))
            attributions = method(x, int(target)).numpy()[0]
            top = np.argsort(attributions.ravel())[-8:]
            blanked = image.copy().ravel()
            blanked[top] = 0.0
            before = run(image[None])[0, target]
            after = run(blanked.reshape(image.shape)[None])[0, target]
            drops.append(float(before - after))
        each = (time.perf_counter() - began) / len(images) * 1000
        rows.append([label, f"{each:.1f}", f"{np.mean(drops):.2f}"])
    print(table(f"explaining {len(images)} digits (ONNX Runtime, 1 thread)",
                ["method", "ms per instance", "score drop, top 8 blanked"], rows))  # fmt: skip


if __name__ == "__main__":
    main()
