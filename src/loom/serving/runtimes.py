"""Runtimes: a loaded model that knows its inputs and outputs and runs a batch."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from loom.serving.formats import OWN, NotServable, model_file
from loom.serving.tensors import ONNX_TYPES, TORCH_TYPES


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    shape: list[int]  # -1 where any size goes

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": self.shape}


class Runtime(Protocol):
    platform: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]: ...


def _dims(shape: list[Any]) -> list[int]:
    return [d if isinstance(d, int) and d > 0 else -1 for d in shape]


class OnnxRuntime:
    """An ONNX model in ONNX Runtime; names, types and shapes come from the model itself."""

    platform = "onnxruntime_onnx"

    def __init__(self, path: Path, threads: int = 1) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [
            TensorSpec(i.name, ONNX_TYPES.get(i.type, "FP32"), _dims(i.shape))
            for i in self.session.get_inputs()
        ]
        self.outputs = [
            TensorSpec(o.name, ONNX_TYPES.get(o.type, "FP32"), _dims(o.shape))
            for o in self.session.get_outputs()
        ]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        names = [o.name for o in self.outputs]
        return dict(zip(names, self.session.run(names, inputs), strict=True))


class TorchScriptRuntime:
    """A TorchScript model; its signature comes from the `signature.json` beside it (what
    `tracking.save_model` writes), as TorchScript files do not carry names and shapes."""

    platform = "pytorch_torchscript"

    def __init__(self, path: Path) -> None:
        import torch

        self._torch = torch
        self.model = torch.jit.load(str(path)).eval()  # type: ignore[no-untyped-call]
        signature = json.loads((path.parent / "signature.json").read_text())
        self.inputs = [self._spec(s) for s in signature["inputs"]]
        self.outputs = [self._spec(s) for s in signature["outputs"]]

    @staticmethod
    def _spec(spec: dict[str, Any]) -> TensorSpec:
        datatype = TORCH_TYPES.get(str(spec["datatype"]), str(spec["datatype"]))
        return TensorSpec(spec["name"], datatype, [int(d) for d in spec["shape"]])

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        torch = self._torch
        with torch.no_grad():
            args = [torch.from_numpy(np.ascontiguousarray(inputs[s.name])) for s in self.inputs]
            result = self.model(*args)
        results = result if isinstance(result, tuple | list) else (result,)
        return {s.name: r.numpy() for s, r in zip(self.outputs, results, strict=False)}


def load(path: Path) -> Runtime:
    """A runtime for a model file, or a model folder (ONNX preferred, then TorchScript)."""
    if path.is_dir():
        found = [path / name for name in OWN if (path / name).exists()]
        if len(found) == 2 and importlib.util.find_spec("onnxruntime") is None:
            return load(found[1])  # no ONNX Runtime installed: the TorchScript file
        names = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}
        try:
            chosen = model_file(names, lambda name: (path / name).read_bytes())
        except NotServable as exc:
            raise FileNotFoundError(f"{path}: {exc}") from exc
        return load(path / chosen)
    if path.suffix == ".onnx":
        return OnnxRuntime(path)
    if path.suffix in (".pt", ".pth", ".torchscript"):
        return TorchScriptRuntime(path)
    raise ValueError(f"{path}: not an ONNX (.onnx) or TorchScript (.pt) model")
