"""Runtimes: a loaded model that knows its inputs and outputs and runs a batch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from loom.serving.devices import check_onnx, onnx_providers, torch_device, torchscript_first
from loom.serving.formats import (
    MAX_MLMODEL,
    OWN,
    Chosen,
    NotServable,
    model_file,
    zip_entries,
)
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
        self.model = self._module(path)
        if signature is None:
            signature = json.loads((path.parent / "signature.json").read_text())
        self.inputs = [self._spec(s) for s in signature["inputs"]]
        self.outputs = [self._spec(s) for s in signature["outputs"]]

    def _module(self, path: Path) -> Any:
        return self._torch.jit.load(str(path), map_location=self.device).eval()  # type: ignore[no-untyped-call]

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


def load(path: Path, device: str = "cpu", runtime: str | None = None) -> Runtime:
    """A runtime for a model file, or a model folder (ONNX preferred, then TorchScript, unless
    `runtime` names one), on `device` (`devices.DEVICES`)."""
    if path.is_dir():
        found = [path / name for name in OWN if (path / name).exists()]
        if runtime is None and len(found) == 2 and torchscript_first(device):
            return load(found[1], device)  # the TorchScript file runs where ONNX cannot
        return _runtime(path, choose(path, runtime), device)
    if path.suffix == ".onnx":
        return OnnxRuntime(path, device=device)
    if path.suffix in (".pt", ".pth", ".torchscript"):
        return TorchScriptRuntime(path, device)
    raise ValueError(f"{path}: not an ONNX (.onnx) or TorchScript (.pt) model")


def choose(folder: Path, runtime: str | None = None) -> Chosen:
    """What `formats.model_file` chooses in a model folder on this disk."""
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    try:
        return model_file(
            names,
            lambda name: (folder / name).read_bytes()[: MAX_MLMODEL + 1],
            lambda n: zip_entries(folder / n),
            runtime,
        )
    except NotServable as exc:
        raise FileNotFoundError(f"{folder}: {exc}") from exc


def _runtime(folder: Path, chosen: Chosen, device: str) -> Runtime:
    """The runtime for what `formats.model_file` chose in a model folder; a format that runs
    its author's code is loaded here, in the replica (its sandbox) only."""
    if chosen.kind in ("xgboost", "xgboost_native"):
        from loom.serving.runtime_xgboost import XGBoostRuntime  # it imports this module

        model_class = chosen.model_class or "xgboost.core.Booster"
        return XGBoostRuntime(folder / chosen.path, model_class, chosen.signature, device)
    if chosen.kind == "torchscript":
        return TorchScriptRuntime(folder / chosen.path, device, chosen.signature)
    if chosen.kind == "onnx":
        return load(folder / chosen.path, device)
    return _code_runtime(folder, chosen, device)


def _code_runtime(folder: Path, chosen: Chosen, device: str) -> Runtime:
    from loom.serving import runtimes_code

    if chosen.kind == "sklearn":
        return runtimes_code.SklearnRuntime(folder / chosen.path)
    if chosen.kind == "torch":
        return runtimes_code.TorchPickleRuntime(folder / chosen.path, device)
    if chosen.kind == "pyfunc":
        return runtimes_code.PyfuncRuntime(folder, chosen.signature)
    if chosen.kind == "lightgbm":
        return runtimes_code.LightGBMRuntime(folder / chosen.path)
    if chosen.kind in ("tensorflow", "keras"):
        from loom.serving.runtime_tensorflow import load_tensorflow

        return load_tensorflow(folder / chosen.path, chosen.kind, device)
    if chosen.kind == "huggingface":
        from loom.serving.runtime_hf import PipelineRuntime

        return PipelineRuntime(folder, device)
    raise ValueError(f"{folder}: a {chosen.kind} model is served by its own handler")
