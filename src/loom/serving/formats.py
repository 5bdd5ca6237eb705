"""Which file of a model version is served, and by which runtime: Loom's own (`model.onnx`,
else `model.pt`), or an MLflow model folder (`MLmodel`) with an `onnx`, `xgboost` or `pytorch`
flavour.

Never a pickle: MLflow's sklearn flavour, pyfunc models and a pytorch flavour saved with
`torch.save` are pickles that run their author's code when loaded, so they are refused with
what to save instead. XGBoost's own formats (JSON, UBJSON) are data, and a TorchScript archive
is told from a `torch.save` pickle by its zip entries' names alone, without unpickling it.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml

from loom.serving.tensors import TORCH_TYPES

MLMODEL = "MLmodel"
MAX_MLMODEL = 64 * 1024
OWN = ("model.onnx", "model.pt")
SERVED = "only the onnx, xgboost and pytorch (TorchScript) flavours are served"
INSTEAD = (
    "save it as ONNX (tracking.save_model, save_keras_model, save_sklearn_model, or "
    "mlflow.onnx.save_model) or as TorchScript"
)
SCRIPTED = (
    "log a scripted model (mlflow.pytorch.log_model(torch.jit.script(model), …)) or save it "
    "as ONNX (mlflow.onnx.save_model)"
)
XGBOOST_SUFFIXES = (".json", ".ubj", ".xgb", ".deprecated")

Kind = Literal["onnx", "torchscript", "xgboost"]


class NotServable(ValueError):
    """Why a model version cannot be served."""


@dataclass(frozen=True)
class Chosen:
    """The file to serve and the runtime that reads it; from an MLmodel, also its tensor
    signature (in `signature.json`'s form) and the class the model was saved from."""

    path: str
    kind: Kind
    signature: dict[str, Any] | None = None
    model_class: str = ""


def model_file(
    names: Collection[str],
    read: Callable[[str], bytes],
    entries: Callable[[str], Collection[str]],
) -> Chosen:
    """What to serve among `names` (the version's files); `read` gives a small file's bytes
    (the MLmodel), `entries` a file's zip entry names (empty when it is not a zip)."""
    if OWN[0] in names:
        return Chosen(OWN[0], "onnx")
    if OWN[1] in names:
        return Chosen(OWN[1], "torchscript")
    if MLMODEL in names:
        return _mlflow(_mlmodel(read(MLMODEL)), names, entries)
    shown = ", ".join(sorted(names))[:200]
    raise NotServable(f"no model.onnx, model.pt or MLflow model (MLmodel) to serve (has: {shown})")


def zip_entries(path: Path) -> list[str]:
    """The names in a zip file's directory (nothing is unpacked); none when it is not a zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except zipfile.BadZipFile:
        return []


def _mlmodel(text: bytes) -> dict[str, Any]:
    if len(text) > MAX_MLMODEL:
        raise NotServable(f"its MLmodel file is larger than {MAX_MLMODEL // 1024} KiB")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NotServable(f"its MLmodel file is not YAML: {exc}") from exc
    flavors = document.get("flavors") if isinstance(document, dict) else None
    if not isinstance(flavors, dict) or not flavors:
        raise NotServable("its MLmodel file names no flavour")
    return {**document, "flavors": flavors}


def _mlflow(
    document: dict[str, Any], names: Collection[str], entries: Callable[[str], Collection[str]]
) -> Chosen:
    flavors = document["flavors"]
    if isinstance(flavors.get("onnx"), dict):
        data = flavors["onnx"].get("data", "model.onnx")
        return Chosen(_data_file("onnx", data, names, (".onnx",)), "onnx")
    if isinstance(flavors.get("xgboost"), dict):
        return _xgboost(flavors["xgboost"], document, names)
    if isinstance(flavors.get("pytorch"), dict):
        return _pytorch(flavors["pytorch"], document, names, entries)
    found = ", ".join(sorted(str(f) for f in flavors))
    raise NotServable(
        f"an MLflow model with flavours {found}: {SERVED} (the others load pickles, which "
        f"would run their author's code); {INSTEAD}"
    )


def _xgboost(flavour: dict[str, Any], document: dict[str, Any], names: Collection[str]) -> Chosen:
    """`mlflow.xgboost.save_model`: `model.<model_format>` in XGBoost's own format. Its
    `model_class` is only read as a name, never imported."""
    data = flavour.get("data", f"model.{flavour.get('model_format', 'xgb')}")
    path = _data_file("xgboost", data, names, XGBOOST_SUFFIXES)
    model_class = flavour.get("model_class", "xgboost.core.Booster")
    if not isinstance(model_class, str) or len(model_class) > 200:
        raise NotServable("its MLmodel's xgboost flavour has no class name (`model_class`)")
    return Chosen(path, "xgboost", _signature(document), model_class)


def _pytorch(
    flavour: dict[str, Any],
    document: dict[str, Any],
    names: Collection[str],
    entries: Callable[[str], Collection[str]],
) -> Chosen:
    """`mlflow.pytorch.save_model`: `<model_data>/model.pth`, written by `torch.jit.save` for
    a ScriptModule and by `torch.save` (a pickle) for any other module."""
    folder = flavour.get("model_data", "data")
    if not isinstance(folder, str) or len(folder) > 200:
        raise NotServable("its MLmodel's pytorch flavour names no folder (`model_data`)")
    exported = str(PurePosixPath(folder) / "model.pt2")
    if exported in names and str(PurePosixPath(folder) / "model.pth") not in names:
        raise NotServable(f"its pytorch flavour is a torch.export program ({exported}), which "
                          f"is not served: {SCRIPTED}")  # fmt: skip
    path = _data_file("pytorch", str(PurePosixPath(folder) / "model.pth"), names, (".pth",))
    if not _is_torchscript(entries(path)):
        raise NotServable(
            f"its pytorch flavour's {path} is a torch.save pickle (loading it would run its "
            f"author's code): {SCRIPTED}"
        )
    signature = _signature(document)
    if signature is None:
        raise NotServable(
            "its pytorch flavour has no tensor signature, and TorchScript does not carry its "
            "inputs' names and shapes: log it with signature=infer_signature(x.numpy(), "
            "model(x).detach().numpy())"
        )
    return Chosen(path, "torchscript", signature)


def _data_file(flavour: str, data: Any, names: Collection[str], suffixes: tuple[str, ...]) -> str:
    """The flavour's file: a file of the model, inside its folder, of a kind it serves."""
    if not isinstance(data, str) or len(data) > 300:
        raise NotServable(f"its MLmodel's {flavour} flavour names no file (`data`)")
    path = PurePosixPath(data)
    if path.is_absolute() or ".." in path.parts or data not in names:
        raise NotServable(
            f"its MLmodel's {flavour} flavour names {data!r}, not a file of the model"
        )
    if path.suffix not in suffixes:
        kinds = ", ".join(suffixes)
        raise NotServable(f"its MLmodel's {flavour} flavour names {data!r}, not a {kinds} file")
    return data


def _is_torchscript(entries: Collection[str]) -> bool:
    """`torch.jit.save` writes `<archive>/code/…` (the model's TorchScript) and
    `<archive>/constants.pkl`; `torch.save` writes neither."""
    parts = [PurePosixPath(name).parts for name in entries]
    tops = {p[0] for p in parts if len(p) > 2 and p[1] == "code"}
    return any(len(p) == 2 and p[0] in tops and p[1] == "constants.pkl" for p in parts)


def _signature(document: dict[str, Any]) -> dict[str, Any] | None:
    """The MLmodel's signature when its inputs and outputs are tensors (MLflow's tensor
    specs), as `signature.json` has it; None when it has none, or columns."""
    section = document.get("signature")
    if not isinstance(section, dict):
        return None
    inputs = _tensors(section.get("inputs"), "input")
    outputs = _tensors(section.get("outputs"), "output")
    if inputs is None or outputs is None:
        return None
    return {"inputs": inputs, "outputs": outputs}


def _tensors(text: Any, prefix: str) -> list[dict[str, Any]] | None:
    try:
        specs = json.loads(text) if isinstance(text, str) else text
    except ValueError as exc:
        raise NotServable(f"its MLmodel's signature {prefix}s are not JSON: {exc}") from exc
    if not isinstance(specs, list) or not specs:
        return None
    if not all(isinstance(s, dict) and s.get("type") == "tensor" for s in specs):
        return None
    return [_tensor(spec, f"{prefix}-{i}") for i, spec in enumerate(specs)]


def _tensor(spec: dict[str, Any], default: str) -> dict[str, Any]:
    name = str(spec.get("name") or default)
    tensor = spec.get("tensor-spec")
    dtype = tensor.get("dtype") if isinstance(tensor, dict) else None
    shape = tensor.get("shape") if isinstance(tensor, dict) else None
    datatype = TORCH_TYPES.get(str(dtype))
    if datatype is None:
        raise NotServable(f"its signature's tensor {name!r} has dtype {dtype!r}, not served")
    if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
        raise NotServable(f"its signature's tensor {name!r} has no shape (a list of sizes)")
    return {"name": name, "datatype": datatype, "shape": shape}
