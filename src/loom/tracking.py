"""What training code imports to report its metrics: `from loom import tracking`.

    tracking.log_params(lr=0.01, layers=3)
    tracking.set_tags(dataset="digits-v2")
    tracking.log_metrics(step=epoch, group="train", loss=0.12, accuracy=0.97)
    tracking.log_artifact("confusion.png")

Under Loom, each call appends one of FfDL's EMetrics records to `$LOG_DIR/evaluation-metrics.txt`,
which the learner's wrapper ships to the platform as metric points. With no platform around it
prints the values instead, so the same script runs anywhere. Only the standard library is used.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import IO, Any

from loom.domain.run_info import problem

EMETRICS_FILE = "evaluation-metrics.txt"


class _Recorder:
    """The emetrics file when running under Loom, opened on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.file: IO[str] | None = None
        self.rindex = 0

    def sink(self) -> IO[str] | None:
        log_dir = os.environ.get("LOG_DIR")
        if not (log_dir and os.environ.get("TRAINING_ID")):
            return None
        if self.file is None:
            Path(log_dir).mkdir(parents=True, exist_ok=True)
            self.file = (Path(log_dir) / EMETRICS_FILE).open("a", buffering=1, encoding="utf-8")
        return self.file


_recorder = _Recorder()


def _typed(value: float | int) -> dict[str, str]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"metric values must be numbers, got {value!r}")
    if isinstance(value, int):
        return {"type": "INT", "value": str(value)}
    return {"type": "FLOAT", "value": repr(float(value))}


def log_metrics(
    step: int | None = None,
    group: str = "train",
    *,
    etimes: dict[str, int | float] | None = None,
    **values: float,
) -> None:
    """Record named values for a group (`train`, `test`, …) at a step.

    `etimes` holds other x-axis values (an epoch beside the step, say). Values must be numbers;
    NaN and infinities are recorded as missing.
    """
    if not values:
        raise ValueError("log_metrics needs at least one named value, e.g. loss=0.1")
    times = dict(etimes or {})
    if step is not None:
        times["step"] = int(step)
    with _recorder.lock:
        sink = _recorder.sink()
        if sink is None:
            shown = " ".join(f"{k}={_short(v)}" for k, v in values.items())
            at = f" step {step}" if step is not None else ""
            print(f"[metrics] {group}{at}: {shown}", flush=True)
            return
        _recorder.rindex += 1
        record = {
            "meta": {
                "training_id": os.environ.get("TRAINING_ID"),
                "time": int(time.time() * 1000),
                "rindex": _recorder.rindex,
            },
            "grouplabel": group,
            "etimes": {k: _typed(v) for k, v in times.items()},
            "values": {k: _typed(v) for k, v in values.items() if _finite(v)},
        }
        sink.write(json.dumps(record) + "\n")


# -- parameters, tags and artifacts -----------------------------------------------------------

_params: dict[str, str] = {}


def log_param(key: str, value: Any) -> None:
    """Record one of the run's parameters (a learning rate, a layer count); shown with the job
    and kept in its model's provenance. As in MLflow, a parameter keeps its first value:
    logging another value for it raises `ValueError`."""
    log_params({key: value})


def log_params(params: dict[str, Any] | None = None, **more: Any) -> None:
    """Record several parameters: `log_params({"lr": 0.01}, epochs=10)`."""
    given = {str(k): str(v) for k, v in {**(params or {}), **more}.items()}
    for key, value in given.items():
        _check("param", key, value)
        if _params.get(key, value) != value:
            raise ValueError(
                f"param {key!r} was already logged as {_params[key]!r}; parameters keep their "
                f"first value (log {value!r} under another name, or as a tag)"
            )
    _info("param", given)
    _params.update(given)


def set_tag(key: str, value: Any) -> None:
    """Set one of the run's tags (a note, a dataset version); a later value replaces it."""
    set_tags({key: value})


def set_tags(tags: dict[str, Any] | None = None, **more: Any) -> None:
    given = {str(k): str(v) for k, v in {**(tags or {}), **more}.items()}
    for key, value in given.items():
        _check("tag", key, value)
    _info("tag", given)


def log_artifact(path: str | os.PathLike[str], name: str | None = None) -> Path:
    """Keep a file or folder with the job's results, under `artifacts/` in RESULT_DIR (it
    comes with `loom download JOB --results`); elsewhere under `./artifacts`. Returns where."""
    source = Path(path)
    if not source.exists():
        raise FileNotFoundError(f"log_artifact: {source} does not exist")
    target = Path(os.environ.get("RESULT_DIR", ".")) / "artifacts" / (name or source.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
    else:
        shutil.copy2(source, target)
    return target


def _check(kind: str, key: str, value: str) -> None:
    said = problem(kind, key, value)
    if said:
        raise ValueError(said)


def _info(kind: str, entries: dict[str, str]) -> None:
    with _recorder.lock:
        sink = _recorder.sink()
        for key, value in entries.items():
            if sink is None:
                print(f"[{kind}] {key} = {value}", flush=True)
            else:
                record = {"loom_info": {"kind": kind, "key": key, "value": value}}
                sink.write(json.dumps(record) + "\n")


def _finite(value: float) -> bool:
    return not (isinstance(value, float) and not math.isfinite(value))


def _short(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


REFERENCE_FILE = "reference.npz"
MAX_REFERENCE_ROWS = 5000
MAX_REFERENCE_BYTES = 32 * 2**20


def save_reference(
    x: Any,
    y: Any = None,
    *,
    feature_names: list[str] | None = None,
    max_rows: int = 2000,
    directory: str | os.PathLike[str] | None = None,
    seed: int = 0,
) -> Path:
    """Keep a sample of the training inputs `x` (and labels `y`) with the model: the version's
    reference data, against which a deployment's drift and outlier detectors judge requests.

    At most `max_rows` rows (drawn at random, the same with the same `seed`; never more than
    5,000) and 32 MiB are kept, as `reference.npz` beside the model (`$RESULT_DIR/model/`
    under Loom, so it is registered with the version; elsewhere `directory` or `./model`).
    Rows are samples shaped as the model's input (a 2-D table, or images of any shape).
    """
    import numpy as np

    inputs = np.asarray(x, dtype=np.float32)
    if inputs.ndim == 0 or len(inputs) == 0:
        raise ValueError("save_reference: x must hold at least one sample")
    labels = None if y is None else np.asarray(y)
    if labels is not None and len(labels) != len(inputs):
        raise ValueError(f"save_reference: {len(inputs)} samples but {len(labels)} labels")
    if feature_names is not None and (inputs.ndim != 2 or len(feature_names) != inputs.shape[1]):
        raise ValueError("save_reference: feature_names needs a 2-D x, one name per column")
    rows = min(len(inputs), max(1, min(max_rows, MAX_REFERENCE_ROWS)))
    per_row = max(inputs[0].nbytes, 1)
    rows = max(1, min(rows, MAX_REFERENCE_BYTES // per_row))
    chosen = np.sort(np.random.default_rng(seed).permutation(len(inputs))[:rows])
    arrays: dict[str, Any] = {"x": inputs[chosen]}
    if labels is not None:
        arrays["y"] = labels[chosen]
    if feature_names is not None:
        arrays["feature_names"] = np.asarray([str(n) for n in feature_names])
    target = Path(directory or Path(os.environ.get("RESULT_DIR", ".")) / "model")
    target.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(target / REFERENCE_FILE, **arrays)
    return target / REFERENCE_FILE


def save_model(
    model: Any,
    example_input: Any,
    *,
    directory: str | os.PathLike[str] | None = None,
    input_names: tuple[str, ...] = ("input",),
    output_names: tuple[str, ...] = ("output",),
) -> Path:
    """Save a PyTorch model as TorchScript (`model.pt`) and ONNX (`model.onnx`), with a
    `signature.json` of input and output names, shapes (batch first, variable) and types.

    Under Loom it goes to `$RESULT_DIR/model/`, where the platform registers it as a new version
    of the job's model when the job completes; elsewhere to `directory` or `./model`.
    """
    import warnings

    import torch

    target = Path(directory or Path(os.environ.get("RESULT_DIR", ".")) / "model")
    target.mkdir(parents=True, exist_ok=True)
    model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchScript's and the exporter's deprecation notes
        output = model(example_input)
        traced = torch.jit.trace(model, example_input)  # type: ignore[no-untyped-call]
        traced.save(str(target / "model.pt"))
        axes = {name: {0: "batch"} for name in (*input_names, *output_names)}
        torch.onnx.export(
            model,
            (example_input,),
            str(target / "model.onnx"),
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_axes=axes,
            dynamo=False,
        )
    signature = {
        "inputs": [_tensor_spec(n, example_input) for n in input_names],
        "outputs": [_tensor_spec(n, output) for n in output_names],
        "files": {"torchscript": "model.pt", "onnx": "model.onnx"},
    }
    (target / "signature.json").write_text(json.dumps(signature, indent=2))
    return target


def _tensor_spec(name: str, tensor: Any) -> dict[str, Any]:
    dtype = str(tensor.dtype).removeprefix("torch.")
    return {"name": name, "shape": [-1, *list(tensor.shape[1:])], "datatype": dtype}


def save_keras_model(
    model: Any,
    example_input: Any,
    *,
    directory: str | os.PathLike[str] | None = None,
    input_names: tuple[str, ...] = ("input",),
    output_names: tuple[str, ...] = ("output",),
) -> Path:
    """Save a Keras 3 model (TensorFlow backend) as a SavedModel (`saved_model/`) and as ONNX
    (`model.onnx`, converted by tf2onnx in the job's own environment), with `signature.json`.

    `example_input` is an array with a batch dimension, or a list of them (one per input
    name). Under Loom it goes to `$RESULT_DIR/model/`, registered when the job completes, and
    served by ONNX Runtime; elsewhere to `directory` or `./model`. Under a multi-worker strategy,
    call it from the chief only: it reads the variables' values and runs no collective op.
    The job's environment needs `tf2onnx` (`environment: {pip: [tf2onnx]}`).
    """
    import numpy as np
    import tensorflow as tf

    target = Path(directory or Path(os.environ.get("RESULT_DIR", ".")) / "model")
    target.mkdir(parents=True, exist_ok=True)
    several = isinstance(example_input, list | tuple)
    examples = [np.asarray(x) for x in (example_input if several else [example_input])]
    if len(examples) != len(input_names):
        raise ValueError(f"{len(examples)} example inputs for input_names {input_names}")
    specs = [
        tf.TensorSpec([None, *x.shape[1:]], tf.as_dtype(x.dtype), name=name)
        for name, x in zip(input_names, examples, strict=True)
    ]

    def named_outputs(*inputs: Any) -> dict[str, Any]:
        result = model(list(inputs) if several else inputs[0], training=False)
        flat = tf.nest.flatten(result)
        if len(flat) != len(output_names):
            raise ValueError(f"the model has {len(flat)} outputs; output_names {output_names}")
        return dict(zip(output_names, flat, strict=True))

    serve = tf.function(named_outputs, input_signature=specs, autograph=False)
    _keras_saved_model(serve, specs, target / "saved_model")
    _keras_onnx(serve, specs, target / "model.onnx")
    produced = named_outputs(*(tf.constant(x) for x in examples))
    signature = {
        "inputs": [_array_spec(n, x) for n, x in zip(input_names, examples, strict=True)],
        "outputs": [_array_spec(n, produced[n]) for n in output_names],
        "files": {"onnx": "model.onnx"},
    }
    (target / "signature.json").write_text(json.dumps(signature, indent=2))
    return target


def _keras_saved_model(serve: Any, specs: list[Any], folder: Path) -> None:
    """What `model.export()` writes, with the signature's names, and each weight once (the
    endpoint tracks the variables it reads)."""
    import keras

    archive = keras.export.ExportArchive()
    archive.add_endpoint("serve", serve, input_signature=specs)
    archive.write_out(str(folder), verbose=False)


def _keras_onnx(serve: Any, specs: list[Any], path: Path) -> None:
    import tensorflow as tf
    import tf2onnx

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")  # freezing distributed variables warns; their values are read
    try:
        onnx_model, _ = tf2onnx.convert.from_function(serve, input_signature=specs)
    finally:
        logger.setLevel(level)
    for value in [*onnx_model.graph.input, *onnx_model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = "batch"  # tf2onnx calls it unk__N
    path.write_bytes(onnx_model.SerializeToString())


def _array_spec(name: str, value: Any) -> dict[str, Any]:
    import numpy as np

    array = np.asarray(value)
    return {"name": name, "shape": [-1, *array.shape[1:]], "datatype": str(array.dtype)}


def save_sklearn_model(
    model: Any,
    example_input: Any,
    *,
    directory: str | os.PathLike[str] | None = None,
    input_name: str = "input",
) -> Path:
    """Save a fitted scikit-learn model (or pipeline) as ONNX (`model.onnx`, converted by
    skl2onnx in the job's environment) with `signature.json`: served by ONNX Runtime, never
    unpickled by the platform. A classifier's outputs are `label` and `probabilities`.
    XGBoost's and LightGBM's scikit-learn models (`XGBClassifier`, `LGBMRegressor`, …, alone or
    ending a pipeline) are converted the same way, by onnxmltools' converters.

    `example_input` is a 2-D array of samples; its width defines the (float32) input. Under
    Loom it goes to `$RESULT_DIR/model/`; elsewhere to `directory` or `./model`. The job's
    environment needs `skl2onnx` (`environment: {pip: [skl2onnx]}`), and `onnxmltools` for
    XGBoost or LightGBM.
    """
    import numpy as np
    import onnxruntime
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType

    target = Path(directory or Path(os.environ.get("RESULT_DIR", ".")) / "model")
    target.mkdir(parents=True, exist_ok=True)
    example = np.asarray(example_input, dtype=np.float32)
    if example.ndim != 2:
        raise ValueError(f"example_input must be 2-D (samples × features), got {example.shape}")
    from sklearn.base import is_classifier

    final = model.steps[-1][1] if hasattr(model, "steps") else model  # a pipeline's classifier
    options = {id(final): {"zipmap": False}} if is_classifier(final) else None
    booster = _register_booster(final)
    converted = to_onnx(
        model,
        initial_types=[(input_name, FloatTensorType([None, example.shape[1]]))],
        options=options,
        target_opset={"": 17, "ai.onnx.ml": 3} if booster else None,
    )
    _rename_outputs(converted, {"output_label": "label", "output_probability": "probabilities"})
    (target / "model.onnx").write_bytes(converted.SerializeToString())
    session = onnxruntime.InferenceSession(str(target / "model.onnx"))
    names = [o.name for o in session.get_outputs()]
    produced = session.run(names, {input_name: example[:2]})
    signature = {
        "inputs": [_array_spec(input_name, example)],
        "outputs": [_array_spec(n, v) for n, v in zip(names, produced, strict=True)],
        "files": {"onnx": "model.onnx"},
    }
    (target / "signature.json").write_text(json.dumps(signature, indent=2))
    return target


def _register_booster(final: Any) -> bool:
    """Teach skl2onnx an XGBoost or LightGBM model, with onnxmltools' converters; False for
    anything else. A bare `Booster` (from `xgboost.train`) has no scikit-learn face: say so."""
    module = type(final).__module__.split(".")[0]
    if module not in ("xgboost", "lightgbm"):
        return False
    name = type(final).__name__
    if name == "Booster":
        api = (
            "XGBClassifier/XGBRegressor" if module == "xgboost" else "LGBMClassifier/LGBMRegressor"
        )
        raise TypeError(
            f"a bare {module} Booster cannot be converted: train with the scikit-learn API ({api})"
        )
    from skl2onnx import update_registered_converter
    from skl2onnx.common.shape_calculator import (
        calculate_linear_classifier_output_shapes,
        calculate_linear_regressor_output_shapes,
    )
    from sklearn.base import is_classifier

    if module == "xgboost":
        from onnxmltools.convert.xgboost.operator_converters.XGBoost import (
            convert_xgboost as convert,
        )
    else:
        from onnxmltools.convert.lightgbm.operator_converters.LightGbm import (
            convert_lightgbm as convert,
        )
    classifier = is_classifier(final)
    shapes = (
        calculate_linear_classifier_output_shapes
        if classifier
        else calculate_linear_regressor_output_shapes
    )
    options = {"nocl": [True, False], "zipmap": [True, False, "columns"]} if classifier else None
    update_registered_converter(type(final), f"Loom{name}", shapes, convert, options=options)
    return True


def _rename_outputs(model: Any, names: dict[str, str]) -> None:
    """skl2onnx's output names, as a V2 client would want them."""
    for output in model.graph.output:
        if output.name in names:
            old, output.name = output.name, names[output.name]
            for node in model.graph.node:
                node.output[:] = [output.name if n == old else n for n in node.output]
