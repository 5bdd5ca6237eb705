"""A model's rate (the digits CNN's, say) on the CPU and on the GPU through Loom's runtimes,
per batch size: what a replica pinned to a GPU gains (run by tools/gpu_check.sh; not a
benchmark with a peer)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from loom.serving.runtimes import Runtime, load


def rate(runtime: Runtime, batch: np.ndarray[Any, Any], seconds: float = 1.5) -> float:
    infer = runtime.infer
    for _ in range(20):
        infer({"image": batch})
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        infer({"image": batch})
        done += 1
    return done * len(batch) / (time.perf_counter() - start)


def main() -> None:
    """`python tools/gpu_serving_timing.py FOLDER`: FOLDER holds model.onnx and model.pt."""
    folder = Path(sys.argv[1])
    runtimes = {
        "cpu onnxruntime": load(folder / "model.onnx", "cpu"),
        "cpu torchscript": load(folder / "model.pt", "cpu"),
        f"{load(folder, 'cuda').device} {load(folder, 'cuda').platform}": load(folder, "cuda"),
    }
    print(f"{'batch':>6}" + "".join(f"  {name:>28}" for name in runtimes) + "  (samples/s)")
    for size in (1, 64, 1024, 8192):
        batch = np.random.default_rng(0).random((size, 1, 8, 8), dtype=np.float32)
        print(f"{size:>6}" + "".join(f"  {rate(r, batch):>28,.0f}" for r in runtimes.values()))


if __name__ == "__main__":
    main()
