"""TensorFlow models served natively, in the replica's environment (which holds TensorFlow):
a SavedModel by its serving signature, with its inputs' and outputs' names, types and shapes —
string inputs too, so a signature that takes encoded images (TF Serving's `{"b64": …}` in V1,
BYTES in V2) serves as it was exported — and a Keras `.keras` file by its inputs and outputs.

Loading either runs its author's code (a SavedModel's functions, a Keras file's layers): only a
replica does it, inside its sandbox.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from loom.serving.devices import NoDevice
from loom.serving.runtimes import Runtime, TensorSpec

TF_TYPES = {
    "bool": "BOOL", "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
    "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "float16": "FP16", "float32": "FP32", "float64": "FP64", "string": "BYTES",
}  # fmt: skip
SIGNATURE = "serving_default"


def load_tensorflow(path: Path, kind: str, device: str) -> Runtime:
    """A SavedModel folder (`kind` tensorflow) or a `.keras` file (`kind` keras)."""
    placed = _device(device)
    if kind == "keras":
        return KerasRuntime(path, placed)
    return SavedModelRuntime(path, placed)


def _device(device: str) -> str:
    """Where TensorFlow runs: its GPUs are hidden for the CPU, and a GPU asked for must be
    there (never a quiet fall back to the CPU)."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if device == "cuda" and not gpus:
        raise NoDevice("TensorFlow sees no GPU (is tensorflow[and-cuda] installed?)")
    if device == "cpu" or not gpus:
        tf.config.set_visible_devices([], "GPU")
        return "cpu"
    return "cuda:0"


def _dims(shape: Any) -> list[int]:
    return [int(d) if d is not None and int(d) > 0 else -1 for d in list(shape)]


def _spec(name: str, dtype: Any, shape: Any) -> TensorSpec:
    kind = getattr(dtype, "name", str(dtype))
    return TensorSpec(name, TF_TYPES.get(kind, "FP32"), _dims(shape))


def _tensor(array: np.ndarray[Any, Any], spec: TensorSpec) -> Any:
    import tensorflow as tf

    if spec.datatype == "BYTES":  # text arrives as str, binary as bytes: TF wants bytes
        flat = [v.encode() if isinstance(v, str) else bytes(v) for v in array.reshape(-1)]
        return tf.constant(np.array(flat, dtype=object).reshape(array.shape), dtype=tf.string)
    return tf.constant(array)


class SavedModelRuntime:
    """A SavedModel's `serving_default` signature (or its only one)."""

    platform = "tensorflow_savedmodel"
    v1_rows = True  # V1 answers every output per instance, as TF Serving does

    def __init__(self, folder: Path, device: str) -> None:
        import tensorflow as tf

        self.device = device
        self.loaded = tf.saved_model.load(str(folder))
        signatures = dict(self.loaded.signatures)
        if SIGNATURE in signatures:
            self.function = signatures[SIGNATURE]
        elif len(signatures) == 1:
            self.function = next(iter(signatures.values()))
        else:
            found = ", ".join(sorted(signatures)) or "none"
            raise ValueError(f"{folder.name}: no {SIGNATURE} signature to serve (has: {found})")
        _, named = self.function.structured_input_signature
        self.inputs = [_spec(k, v.dtype, v.shape) for k, v in sorted(named.items())]
        outputs = self.function.structured_outputs
        self.outputs = [_spec(k, v.dtype, v.shape) for k, v in sorted(outputs.items())]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        args = {spec.name: _tensor(inputs[spec.name], spec) for spec in self.inputs}
        result = self.function(**args)
        return {str(name): value.numpy() for name, value in result.items()}


class KerasRuntime:
    """A Keras 3 model saved as `model.keras`."""

    platform = "keras"
    v1_rows = True

    def __init__(self, path: Path, device: str) -> None:
        import keras

        self.device = device
        self.model = keras.saving.load_model(str(path))
        self.inputs = [_spec(t.name, t.dtype, t.shape) for t in self.model.inputs]
        names = list(getattr(self.model, "output_names", None) or [])
        outputs = self.model.outputs
        if len(names) != len(outputs):
            names = [f"output-{i}" for i in range(len(outputs))]
        self.outputs = [_spec(n, t.dtype, t.shape) for n, t in zip(names, outputs, strict=True)]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        args = [inputs[spec.name] for spec in self.inputs]
        result = self.model.predict_on_batch(args[0] if len(args) == 1 else args)
        results = result if isinstance(result, list | tuple) else [result]
        return {spec.name: np.asarray(r) for spec, r in zip(self.outputs, results, strict=True)}
