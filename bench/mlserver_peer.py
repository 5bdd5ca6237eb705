"""Seldon MLServer as a serving peer: its own venv, and a model repository that serves an ONNX
file through a small custom runtime (MLServer 1.7 ships no ONNX runtime package).

Imported by bench/serving.py from Loom's venv; it never imports mlserver itself. The runtime's
source below is written into the repository folder, where MLServer imports it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from peers import peer_python

VERSION = "1.7.1"
# httptools: uvicorn's fast HTTP parser, which Loom gets from uvicorn[standard]; without it
# MLServer's uvicorn falls back to the pure-Python h11 parser.
PACKAGES = [f"mlserver=={VERSION}", "onnxruntime==1.31.1", "numpy", "httptools", "uvloop<0.22"]

RUNTIME_MODULE = "onnx_runtime"
RUNTIME = '''"""An MLServer runtime for an ONNX model in ONNX Runtime, one intra-op thread."""

import onnxruntime
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class OnnxModel(MLModel):
    async def load(self) -> bool:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        path = await get_model_uri(self.settings, wellknown_filenames=["model.onnx"])
        self.session = onnxruntime.InferenceSession(
            path, options, providers=["CPUExecutionProvider"]
        )
        self.output_names = [o.name for o in self.session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {i.name: NumpyCodec.decode_input(i) for i in payload.inputs}
        results = self.session.run(self.output_names, feeds)
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            outputs=[NumpyCodec.encode_output(n, r) for n, r in zip(self.output_names, results)],
        )
'''


@dataclass(frozen=True)
class Ports:
    http: int
    grpc: int  # MLServer 1.7 always starts its gRPC server; it only needs a free port


def python() -> Path:
    """MLServer's interpreter, installed into bench/.peers/mlserver on first use."""
    return peer_python("mlserver", PACKAGES)


def write_repository(
    folder: Path,
    model: Path,
    name: str,
    ports: Ports,
    *,
    workers: int,
    batch: tuple[int, float] | None,
) -> None:
    """A model repository serving `model` (an .onnx file) as `name`: the server's settings in
    `folder`, the model's settings and the runtime in `folder/name`.

    `workers` is MLServer's `parallel_workers` (0: inference in the server's own process);
    `batch` is adaptive batching's (max_batch_size in requests, max_batch_time in seconds).
    Access logs and the Prometheus middleware are off, as Loom runs without them.
    """
    settings = {
        "host": "127.0.0.1",
        "http_port": ports.http,
        "grpc_port": ports.grpc,
        "parallel_workers": workers,
        "debug": False,
        "metrics_endpoint": None,
        "load_models_at_startup": True,
    }
    model_settings: dict[str, object] = {
        "name": name,
        "implementation": f"{RUNTIME_MODULE}.OnnxModel",
        "parameters": {"uri": str(model.resolve()), "version": "1"},
    }
    if batch is not None:
        model_settings["max_batch_size"], model_settings["max_batch_time"] = batch
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))
    (folder / name / "model-settings.json").write_text(json.dumps(model_settings, indent=2))
    (folder / name / f"{RUNTIME_MODULE}.py").write_text(RUNTIME)


def command(folder: Path) -> list[str]:
    """The command line that serves the repository in `folder`."""
    return [str(python().parent / "mlserver"), "start", str(folder)]
