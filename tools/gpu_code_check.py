"""On a GPU machine: a module saved whole with `torch.save` (its class in net.py beside it, a
format whose loading runs its author's code) is loaded by the `torch` runtime on the GPU it is
given, answers as on the CPU, and is refused with why when no GPU is visible (a replica pinned
to no GPU). Needs only torch, numpy and PyYAML (no HTTP server): run from the repository root
with `PYTHONPATH=src python3 tools/gpu_code_check.py`."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

NET = """
import torch


class Digits(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.layer(x.reshape(x.shape[0], -1))
"""

CHECK = """
import sys
import numpy as np
from pathlib import Path
from loom.serving.devices import NoDevice
from loom.serving.runtimes_code import TorchPickleRuntime
folder, device = Path(sys.argv[1]), sys.argv[2]
try:
    runtime = TorchPickleRuntime(folder / "model.pt", device)
except NoDevice as exc:
    print("refused:", exc)
    raise SystemExit(0)
x = np.random.default_rng(0).random((4, 8, 8), dtype=np.float32)
out = runtime.infer({"image": x})["logits"]
np.save(folder / f"out-{device}.npy", out)
import torch
print(device, runtime.device, torch.cuda.device_count(), "visible GPU(s)")
"""


def main() -> None:
    import torch

    folder = Path(tempfile.mkdtemp(prefix="loom-gpu-code-"))
    (folder / "net.py").write_text(NET)
    sys.path.insert(0, str(folder))
    from net import Digits  # type: ignore[import-not-found]

    torch.save(Digits().eval(), folder / "model.pt")
    (folder / "signature.json").write_text(json.dumps({
        "inputs": [{"name": "image", "datatype": "float32", "shape": [-1, 8, 8]}],
        "outputs": [{"name": "logits", "datatype": "float32", "shape": [-1, 10]}]}))  # fmt: skip
    for device, visible in (("cpu", "0"), ("cuda", "0"), ("cuda", "")):
        env = {"PYTHONPATH": "src", "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": visible}
        done = subprocess.run([sys.executable, "-c", CHECK, str(folder), device], env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        print(f"CUDA_VISIBLE_DEVICES={visible!r} --device {device}:",
              (done.stdout + done.stderr).strip()[-400:])  # fmt: skip
    import numpy as np

    if not (folder / "out-cuda.npy").exists():
        print("no answer on a GPU: none is visible here")
        return
    cpu, gpu = np.load(folder / "out-cpu.npy"), np.load(folder / "out-cuda.npy")
    print("GPU answers as the CPU:", bool(np.allclose(cpu, gpu, rtol=1e-3, atol=1e-3)))


if __name__ == "__main__":
    main()
