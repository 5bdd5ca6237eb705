"""Which file of a model version is served, and by which runtime, told from the files' names
(and an MLmodel's YAML) alone: nothing here loads a model.

Two families. Loom's own runtimes read their files as data, in any process: ONNX (`model.onnx`),
TorchScript (`model.pt` when it is a TorchScript archive), and MLflow's `onnx`, `xgboost` and
TorchScript `pytorch` flavours. Every other format runs its author's code when it is loaded — a
`kserve.Model` in `predictor.py`, a pickle (scikit-learn, `torch.save`), an MLflow pyfunc, a
TensorFlow SavedModel or Keras file, LightGBM and XGBoost natives, a Hugging Face folder — and
is only ever loaded by a replica, inside its sandbox, in an environment built for it
(`replica_env`); the platform and the gateway choose it here by name and never open it.

A TorchScript archive is told from a `torch.save` pickle by its zip entries' names alone.
"""

from __future__ import annotations

import json
import re
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
PREDICTOR = "predictor.py"
TRANSFORMER = "transformer.py"
REQUIREMENTS = "requirements.txt"
SCRIPTED = (
    "log a scripted model (mlflow.pytorch.log_model(torch.jit.script(model), …)) or save it "
    "as ONNX (mlflow.onnx.save_model)"
)
XGBOOST_SUFFIXES = (".json", ".ubj", ".xgb", ".deprecated")
PICKLES = ("model.joblib", "model.pkl", "model.pickle")  # KServe's sklearn server's names
SAVED_MODELS = ("saved_model.pb", "saved_model/saved_model.pb")
HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
XGBOOST_NATIVE = ("model.json", "model.ubj")
LIGHTGBM_NATIVE = ("model.lgb", "model.txt")
BOOSTED = "model.bst"  # KServe's name for both XGBoost and LightGBM: told by requirements.txt

Kind = Literal[
    "onnx", "torchscript", "xgboost",  # read as data by Loom's own runtimes
    "kserve", "pyfunc", "sklearn", "torch", "tensorflow", "keras", "lightgbm",
    "xgboost_native", "huggingface",  # loaded by running their author's code: sandbox only
]  # fmt: skip
NATIVE: frozenset[str] = frozenset({"onnx", "torchscript", "xgboost", "xgboost_native"})
RUNTIME_NAMES = (
    "kserve", "onnx", "torchscript", "pyfunc", "tensorflow", "keras", "sklearn", "torch",
    "lightgbm", "xgboost", "huggingface",
)  # fmt: skip  # what a deployment may ask for (`runtime`), in the order they are tried


class NotServable(ValueError):
    """Why a model version cannot be served."""


@dataclass(frozen=True)
class Chosen:
    """The file (or folder) to serve and the runtime that reads it; from an MLmodel, also its
    tensor signature (in `signature.json`'s form) and the class the model was saved from."""

    path: str
    kind: Kind
    signature: dict[str, Any] | None = None
    model_class: str = ""

    @property
    def runs_code(self) -> bool:
        """Whether loading it runs its author's code (so only a sandboxed replica loads it)."""
        return self.kind not in NATIVE


def model_file(
    names: Collection[str],
    read: Callable[[str], bytes],
    entries: Callable[[str], Collection[str]],
    runtime: str | None = None,
) -> Chosen:
    """What to serve among `names` (the version's files); `read` gives a small file's bytes
    (the MLmodel, requirements.txt), `entries` a file's zip entry names (empty when it is not a
    zip). `runtime` (one of `RUNTIME_NAMES`) asks for one runtime; else the first that fits."""
    if runtime is not None and runtime not in RUNTIME_NAMES:
        raise NotServable(f"runtime {runtime!r}: not one of {', '.join(RUNTIME_NAMES)}")
    for name in [runtime] if runtime else RUNTIME_NAMES:
        found = _CHOOSERS[name](names, read, entries)
        if found is not None:
            return found
    if runtime:
        raise NotServable(f"runtime {runtime!r}: the model has no file it serves ({_shown(names)})")
    raise NotServable(
        "no model file this platform serves: a predictor.py (kserve.Model), model.onnx, "
        "model.pt, an MLflow model (MLmodel), a SavedModel, model.keras, model.joblib/.pkl, "
        f"model.lgb/.txt/.bst/.json/.ubj or a Hugging Face folder (has: {_shown(names)})"
    )


Read = Callable[[str], bytes]
Entries = Callable[[str], Collection[str]]


def _shown(names: Collection[str]) -> str:
    return ", ".join(sorted(names))[:200]


def _kserve(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    return Chosen(PREDICTOR, "kserve") if PREDICTOR in names else None


def _onnx(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    if OWN[0] in names:
        return Chosen(OWN[0], "onnx")
    found = _mlflow_of(names, read, entries)
    return found if found is not None and found.kind == "onnx" else None


def _torchscript(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    if OWN[1] in names and _torchscript_file(OWN[1], entries):
        return Chosen(OWN[1], "torchscript")
    found = _mlflow_of(names, read, entries)
    return found if found is not None and found.kind == "torchscript" else None


def _torchscript_file(name: str, entries: Entries) -> bool:
    """`torch.jit.save` always writes a zip with TorchScript's entries; anything else of that
    name is a `torch.save` pickle (zip, or the legacy format)."""
    return _is_torchscript(entries(name))


def _pyfunc(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    """An MLflow model that Loom does not read natively, by its `python_function` flavour."""
    if MLMODEL not in names:
        return None
    document = _mlmodel(read(MLMODEL))
    flavors = document["flavors"]
    if _mlflow_of(names, read, entries) is not None:
        return None
    if not isinstance(flavors.get("python_function"), dict):
        found = ", ".join(sorted(str(f) for f in flavors))
        raise NotServable(
            f"an MLflow model with flavours {found}: none is served (it needs a python_function "
            "flavour, or onnx, xgboost or a TorchScript pytorch flavour)"
        )
    return Chosen(".", "pyfunc", _signature(document))


def _sklearn(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    found = next((name for name in PICKLES if name in names), None)
    return Chosen(found, "sklearn") if found else None


def _torch(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    """`torch.save(module)`: a pickle that needs the module's code (beside it in the model)."""
    if OWN[1] in names and not _torchscript_file(OWN[1], entries):
        return Chosen(OWN[1], "torch")
    return Chosen("model.pth", "torch") if "model.pth" in names else None


def _tensorflow(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    found = next((name for name in SAVED_MODELS if name in names), None)
    return Chosen(str(PurePosixPath(found).parent), "tensorflow") if found else None


def _keras(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    return Chosen("model.keras", "keras") if "model.keras" in names else None


def _lightgbm(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    found = next((name for name in LIGHTGBM_NATIVE if name in names), None)
    if found is None and BOOSTED in names and "lightgbm" in _required(names, read):
        found = BOOSTED
    return Chosen(found, "lightgbm") if found else None


def _xgboost(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    found = _mlflow_of(names, read, entries)
    if found is not None and found.kind == "xgboost":
        return found
    native = next((name for name in (*XGBOOST_NATIVE, BOOSTED) if name in names), None)
    if native == BOOSTED and "lightgbm" in _required(names, read):
        return None
    return Chosen(native, "xgboost_native") if native else None


def _huggingface(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    if "config.json" in names and any(weights in names for weights in HF_WEIGHTS):
        return Chosen(".", "huggingface")
    return None


def _required(names: Collection[str], read: Read) -> set[str]:
    """The distributions the model's requirements.txt names (lower case), or none."""
    if REQUIREMENTS not in names:
        return set()
    text = read(REQUIREMENTS).decode("utf-8", "replace")
    words = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return {re.split(r"[\s\[<>=!~;]", word, maxsplit=1)[0].lower() for word in words if word}


def _mlflow_of(names: Collection[str], read: Read, entries: Entries) -> Chosen | None:
    """An MLmodel's flavour that Loom's own runtimes read, or None."""
    if MLMODEL not in names:
        return None
    return _mlflow(_mlmodel(read(MLMODEL)), names, entries)


_CHOOSERS: dict[str, Callable[[Collection[str], Read, Entries], Chosen | None]] = {
    "kserve": _kserve,
    "onnx": _onnx,
    "torchscript": _torchscript,
    "pyfunc": _pyfunc,
    "sklearn": _sklearn,
    "torch": _torch,
    "tensorflow": _tensorflow,
    "keras": _keras,
    "lightgbm": _lightgbm,
    "xgboost": _xgboost,
    "huggingface": _huggingface,
}


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
) -> Chosen | None:
    """The flavour Loom reads natively, or None (then its pyfunc flavour serves it)."""
    flavors = document["flavors"]
    if isinstance(flavors.get("onnx"), dict):
        data = flavors["onnx"].get("data", "model.onnx")
        return Chosen(_data_file("onnx", data, names, (".onnx",)), "onnx")
    if isinstance(flavors.get("xgboost"), dict):
        return _xgboost_flavour(flavors["xgboost"], document, names)
    if isinstance(flavors.get("pytorch"), dict):
        return _pytorch(flavors["pytorch"], document, names, entries)
    return None


def _xgboost_flavour(
    flavour: dict[str, Any], document: dict[str, Any], names: Collection[str]
) -> Chosen:
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
) -> Chosen | None:
    """`mlflow.pytorch.save_model`: `<model_data>/model.pth`, written by `torch.jit.save` for
    a ScriptModule (read natively, given a tensor signature) and by `torch.save` (a pickle) for
    any other module, or a `torch.export` program: those, by the pyfunc flavour (None)."""
    folder = flavour.get("model_data", "data")
    if not isinstance(folder, str) or len(folder) > 200:
        raise NotServable("its MLmodel's pytorch flavour names no folder (`model_data`)")
    scripted = str(PurePosixPath(folder) / "model.pth")
    if scripted not in names:
        return None
    path = _data_file("pytorch", scripted, names, (".pth",))
    signature = _signature(document)
    if not _is_torchscript(entries(path)) or signature is None:
        return None
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
