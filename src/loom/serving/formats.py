"""Which file of a model version is served: Loom's own (`model.onnx`, else `model.pt`), or the
ONNX file of an MLflow model folder (`MLmodel` with an `onnx` flavour).

Never a pickle: MLflow's sklearn and pytorch flavours, and pyfunc models, are pickles that run
their author's code when loaded, so they are refused with what to save instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import PurePosixPath

import yaml

MLMODEL = "MLmodel"
MAX_MLMODEL = 64 * 1024
OWN = ("model.onnx", "model.pt")
INSTEAD = (
    "save it as ONNX (tracking.save_model, save_keras_model, save_sklearn_model, or "
    "mlflow.onnx.save_model) or as TorchScript"
)


class NotServable(ValueError):
    """Why a model version cannot be served."""


def model_file(names: Collection[str], read: Callable[[str], bytes]) -> str:
    """The path, among `names` (the version's files), of the model to serve."""
    for name in OWN:
        if name in names:
            return name
    if MLMODEL in names:
        return _mlflow_onnx(read(MLMODEL), names)
    shown = ", ".join(sorted(names))[:200]
    raise NotServable(f"no model.onnx, model.pt or MLflow model (MLmodel) to serve (has: {shown})")


def _mlflow_onnx(text: bytes, names: Collection[str]) -> str:
    if len(text) > MAX_MLMODEL:
        raise NotServable(f"its MLmodel file is larger than {MAX_MLMODEL // 1024} KiB")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NotServable(f"its MLmodel file is not YAML: {exc}") from exc
    flavors = document.get("flavors") if isinstance(document, dict) else None
    if not isinstance(flavors, dict) or not flavors:
        raise NotServable("its MLmodel file names no flavour")
    onnx = flavors.get("onnx")
    if not isinstance(onnx, dict):
        found = ", ".join(sorted(str(f) for f in flavors))
        raise NotServable(
            f"an MLflow model with flavours {found}: only the onnx flavour is served (the "
            f"others load pickles, which would run their author's code); {INSTEAD}"
        )
    data = onnx.get("data", "model.onnx")
    if not isinstance(data, str) or len(data) > 300:
        raise NotServable("its MLmodel's onnx flavour names no file (`data`)")
    path = PurePosixPath(data)
    if path.is_absolute() or ".." in path.parts or data not in names:
        raise NotServable(f"its MLmodel's onnx flavour names {data!r}, not a file of the model")
    if path.suffix != ".onnx":
        raise NotServable(f"its MLmodel's onnx flavour names {data!r}, not an .onnx file")
    return data
