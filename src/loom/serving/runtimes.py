"""Runtimes: a loaded model that knows its inputs and outputs and runs a batch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from loom.serving.devices import check_onnx, onnx_providers, torch_device, torchscript_first
from loom.serving.formats import OWN, Chosen, NotServable, model_file, zip_entries
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
    device: str  # where the model runs: cpu, cuda:0
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]: ...


def _dims(shape: list[Any]) -> list[int]:
    return [d if isinstance(d, int) and d > 0 else -1 for d in shape]


class OnnxRuntime:
    """An ONNX model in ONNX Runtime; names, types and shapes come from the model itself."""

    platform = "onnxruntime_onnx"

    def __init__(self, path: Path, threads: int = 1, device: str = "cpu") -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        providers = onnx_providers(device)
        self.session = onnxruntime.InferenceSession(str(path), options, providers=providers)
        self.device = check_onnx(self.session, providers)
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
    """A TorchScript model; its signature is given (an MLmodel's) or comes from the
    `signature.json` beside it (what `tracking.save_model` writes), as TorchScript files do not
    carry names and shapes."""

    platform = "pytorch_torchscript"

    def __init__(
        self, path: Path, device: str = "cpu", signature: dict[str, Any] | None = None
    ) -> None:
        import torch

        self._torch = torch
        self.device = torch_device(device)
        self.model = torch.jit.load(str(path), map_location=self.device).eval()  # type: ignore[no-untyped-call]
        if signature is None:
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
            args = [
                torch.from_numpy(np.ascontiguousarray(inputs[s.name])).to(self.device)
                for s in self.inputs
            ]
            result = self.model(*args)
        results = result if isinstance(result, tuple | list) else (result,)
        return {s.name: r.cpu().numpy() for s, r in zip(self.outputs, results, strict=False)}


def load(path: Path, device: str = "cpu") -> Runtime:
    """A runtime for a model file, or a model folder (ONNX preferred, then TorchScript), on
    `device` (`devices.DEVICES`)."""
    if path.is_dir():
        found = [path / name for name in OWN if (path / name).exists()]
        if len(found) == 2 and torchscript_first(device):
            return load(found[1], device)  # the TorchScript file runs where ONNX cannot
        names = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}
        try:
            chosen = model_file(
                names, lambda name: (path / name).read_bytes(), lambda n: zip_entries(path / n)
            )
        except NotServable as exc:
            raise FileNotFoundError(f"{path}: {exc}") from exc
        return _runtime(path, chosen, device)
    if path.suffix == ".onnx":
        return OnnxRuntime(path, device=device)
    if path.suffix in (".pt", ".pth", ".torchscript"):
        return TorchScriptRuntime(path, device)
    raise ValueError(f"{path}: not an ONNX (.onnx) or TorchScript (.pt) model")


def _runtime(folder: Path, chosen: Chosen, device: str) -> Runtime:
    """The runtime for what `formats.model_file` chose in a model folder."""
    if chosen.kind == "xgboost":
        from loom.serving.runtime_xgboost import XGBoostRuntime  # it imports this module

        return XGBoostRuntime(folder / chosen.path, chosen.model_class, chosen.signature, device)
    if chosen.kind == "torchscript":
        return TorchScriptRuntime(folder / chosen.path, device, chosen.signature)
    return load(folder / chosen.path, device)
