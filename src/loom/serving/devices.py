"""Where a model server runs its model: the CPU, or a GPU.

`cuda` is the first GPU this process sees: a replica sees only the GPUs it was pinned to
(`CUDA_VISIBLE_DEVICES`), so its `cuda:0` is its own. `auto` takes a GPU when one is visible
and the runtime can use it, else the CPU. A runtime told `cuda` that cannot run there is an
error, never a quiet fall back to the CPU: a deployment asked for a GPU is told why it has none.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

DEVICES = ("auto", "cpu", "cuda")
CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"


class NoDevice(RuntimeError):
    """The model cannot run on the device it was told to run on."""


def hidden() -> bool:
    """Whether this process was told to see no GPU at all."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and visible.strip() in ("", "-1", "void", "none")


def gpu_present() -> bool:
    """Whether a GPU is visible here at all (its device node; a sandbox shows only its own)."""
    return not hidden() and any(Path("/dev").glob("nvidia[0-9]*"))


def torchscript_first(device: str) -> bool:
    """Whether a folder with both files should serve its TorchScript one on `device`: where
    ONNX Runtime is not installed, or a GPU is wanted that only PyTorch can use."""
    if importlib.util.find_spec("onnxruntime") is None:
        return True
    if device == "cpu" or not gpu_present() or importlib.util.find_spec("torch") is None:
        return False
    try:
        onnx_providers("cuda")
    except NoDevice:
        try:
            torch_device("cuda")
        except NoDevice:
            return False
        return True
    return False


def onnx_providers(device: str) -> list[str]:
    """ONNX Runtime's execution providers for `device`."""
    if device == "cpu":
        return [CPU_PROVIDER]
    import onnxruntime

    has_provider = CUDA_PROVIDER in onnxruntime.get_available_providers()
    if has_provider and not hidden():
        return [CUDA_PROVIDER, CPU_PROVIDER]
    if device == "auto":
        return [CPU_PROVIDER]
    if not has_provider:
        raise NoDevice(
            "told to run on a GPU, but this ONNX Runtime has no CUDA provider: install "
            "onnxruntime-gpu in place of onnxruntime"
        )
    raise NoDevice("told to run on a GPU, but none is visible (CUDA_VISIBLE_DEVICES)")


def check_onnx(session: Any, providers: list[str]) -> str:
    """The device an ONNX Runtime session runs on; NoDevice when it was asked for CUDA and
    did not get it (ONNX Runtime falls back to the CPU when a CUDA library fails to load)."""
    if providers[0] != CUDA_PROVIDER:
        return "cpu"
    if session.get_providers()[0] != CUDA_PROVIDER:
        raise NoDevice(
            "ONNX Runtime could not start its CUDA provider (a CUDA or cuDNN library it "
            "needs is missing: see the lines above)"
        )
    return "cuda:0"


def torch_device(device: str) -> str:
    """PyTorch's name for `device`."""
    if device == "cpu":
        return "cpu"
    import torch

    if not hidden() and torch.cuda.is_available():
        return "cuda:0"
    if device == "auto":
        return "cpu"
    raise NoDevice(
        "told to run on a GPU, but PyTorch here sees none (a CPU build of torch, or no GPU "
        "visible: CUDA_VISIBLE_DEVICES)"
    )


def describe(device: str) -> str:
    """`device` with the GPU's name, for the server's first line."""
    if not device.startswith("cuda"):
        return device
    try:
        import torch

        return f"{device} ({torch.cuda.get_device_name(0)})"
    except Exception:  # no torch, or it cannot name it: the device alone says enough
        return device
