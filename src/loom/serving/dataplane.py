"""The transport-neutral data plane: the models this server holds, their metadata and
readiness, and inference requests checked against each model's signature.

The REST adapters (V2 and V1) only translate HTTP to these calls and their errors to statuses.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson

import loom
from loom.serving.batching import Batcher
from loom.serving.kserve_model import BINARY_HEADER, Answer, KServeModel
from loom.serving.observe import Histogram
from loom.serving.runtimes import Runtime, TensorSpec
from loom.serving.tensors import (
    DATATYPES,
    TensorError,
    datatype_of,
    from_bytes,
    to_array,
    to_bytes,
    to_json,
)


class InferenceError(Exception):
    """A request that cannot be served; `status` is the HTTP status the adapters answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class Explainer(Protocol):
    """Attributions for V1 instances (`explainers.py`)."""

    async def explain(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, Any]: ...


INLINE_VALUES = 2048  # unbatched requests up to this many values run on the event loop


@dataclass
class ServedModel:
    name: str
    version: str
    runtime: Runtime
    batcher: Batcher | None = None
    explainer: Explainer | None = None
    calls: int = 0
    inflight: int = 0
    latency: Histogram = field(default_factory=Histogram)


@dataclass
class ServedHandler:
    """A model that takes whole requests (a `kserve.Model`), with its counters."""

    name: str
    version: str
    handler: KServeModel
    calls: int = 0
    inflight: int = 0
    latency: Histogram = field(default_factory=Histogram)

    async def run(self, call: Any, *args: Any) -> Answer:
        """One request through the handler, counted and timed."""
        started = time.perf_counter()
        self.calls += 1
        self.inflight += 1
        try:
            answer: Answer = await call(*args)
            return answer
        finally:
            self.inflight -= 1
            self.latency.observe(time.perf_counter() - started)


class DataPlane:
    """The models one server holds. Inference runs on one thread of its own (ONNX Runtime and
    TorchScript release the GIL), so the event loop goes on reading requests while it runs; a
    request alone in flight, or a small one, runs on the loop itself, as the hop to the thread
    would cost more than it saves."""

    def __init__(self) -> None:
        self.models: dict[str, ServedModel] = {}
        self.handlers: dict[str, ServedHandler] = {}
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loom-infer")
        self.active = 0  # requests begun and not answered, counted by the transport
        self.waiting = 0  # requests read and not yet begun, counted by the transport

    def add(
        self,
        name: str,
        version: str,
        runtime: Runtime,
        *,
        max_batch: int = 1,
        max_wait_ms: float = 5,
    ) -> None:
        """Serve a model; with `max_batch` > 1, requests are batched when every input's first
        dimension is the batch (shape -1)."""
        batchable = all(spec.shape[:1] == [-1] for spec in runtime.inputs)
        served = ServedModel(name, version, runtime)
        if max_batch > 1 and batchable:
            served.batcher = Batcher(
                runtime.infer,
                max_batch,
                max_wait_ms / 1000,
                self.executor,
                alone=self.alone,
            )
        self.models[name] = served

    def add_handler(self, handler: KServeModel) -> None:
        """Serve a model that takes whole requests (its own codecs, its own signature)."""
        self.handlers[handler.name] = ServedHandler(handler.name, handler.version, handler)

    def handler(self, name: str, version: str | None = None) -> ServedHandler | None:
        """The handler serving `name`, or None when a runtime does (or nothing: then 404)."""
        found = self.handlers.get(name)
        if found is not None and version is not None and version != found.version:
            raise InferenceError(f"model {name!r} has no version {version!r}", 404)
        return found

    @property
    def names(self) -> list[str]:
        return sorted([*self.models, *self.handlers])

    def alone(self) -> bool:
        """Whether the request at hand is the only one the server is handling (none other
        begun, none other read and waiting to begin)."""
        return self.active + self.waiting <= 1

    def model(self, name: str, version: str | None = None) -> ServedModel:
        found = self.models.get(name)
        if found is None:
            raise InferenceError(f"unknown model {name!r}", 404)
        if version is not None and version != found.version:
            raise InferenceError(f"model {name!r} has no version {version!r}", 404)
        return found

    # -- health and metadata -----------------------------------------------------------------
    @staticmethod
    def server_metadata() -> dict[str, Any]:
        return {"name": "loom", "version": loom.__version__, "extensions": ["binary_tensor_data"]}

    async def model_metadata(self, name: str, version: str | None = None) -> dict[str, Any]:
        found = self.handler(name, version)
        if found is not None:
            return await found.handler.metadata()
        served = self.model(name, version)
        return {
            "name": served.name,
            "versions": [served.version],
            "platform": served.runtime.platform,
            "inputs": [spec.json() for spec in served.runtime.inputs],
            "outputs": [spec.json() for spec in served.runtime.outputs],
        }

    # -- inference ---------------------------------------------------------------------------
    def decode(
        self, served: ServedModel, request: Any, binary: bytes = b""
    ) -> dict[str, np.ndarray[Any, Any]]:
        """A V2 request's inputs as arrays, checked against the model's inputs; `binary` is
        the request's binary section (the binary tensor data extension)."""
        if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
            raise InferenceError("the request needs `inputs`: a list of tensors")
        specs = {spec.name: spec for spec in served.runtime.inputs}
        arrays = {}
        offset = 0
        for tensor in request["inputs"]:
            if not isinstance(tensor, dict):
                raise InferenceError(f"each input is an object, got {tensor!r}"[:200])
            name = str(tensor.get("name"))
            if name not in specs:
                raise InferenceError(
                    f"model {served.name!r} has no input {name!r}; its inputs: {', '.join(specs)}"
                )
            size = _binary_size(tensor)
            for key in ("shape", "datatype") if size is not None else ("shape", "datatype", "data"):
                if key not in tensor:
                    raise InferenceError(f"input {name!r} has no `{key}`")
            try:
                if size is None:
                    array = to_array(name, str(tensor["datatype"]), tensor["shape"], tensor["data"])
                else:
                    if offset + size > len(binary):
                        raise TensorError(f"input {name!r}: binary_data_size {size} goes past "
                                          f"the {len(binary)} bytes of binary data")  # fmt: skip
                    raw = binary[offset : offset + size]
                    array = from_bytes(name, str(tensor["datatype"]), tensor["shape"], raw)
                    offset += size
            except TensorError as exc:
                raise InferenceError(str(exc)) from exc
            check(specs[name], array, str(tensor["datatype"]))
            arrays[name] = array
        if offset != len(binary):
            raise InferenceError(f"{len(binary) - offset} bytes of binary data belong to no input")
        missing = [name for name in specs if name not in arrays]
        if missing:
            raise InferenceError(f"model {served.name!r} needs inputs {', '.join(missing)}")
        return arrays

    async def execute(
        self, served: ServedModel, inputs: dict[str, np.ndarray[Any, Any]]
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Run now, or in a batch with whatever else arrives meanwhile."""
        started = time.perf_counter()
        served.inflight += 1
        try:
            if served.batcher is not None:
                return await served.batcher.submit(inputs)
            served.calls += 1
            if self.alone() or sum(a.size for a in inputs.values()) <= INLINE_VALUES:
                return served.runtime.infer(inputs)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self.executor, served.runtime.infer, inputs)
        except Exception as exc:  # the runtime's error: the request's fault, said plainly
            raise InferenceError(f"model {served.name!r} could not run the request: {exc}") from exc
        finally:
            served.inflight -= 1
            served.latency.observe(time.perf_counter() - started)

    async def infer(
        self, name: str, version: str | None, request: Any, binary: bytes = b""
    ) -> tuple[dict[str, Any], bytes]:
        """A V2 inference request, answered in the V2 response form, and the response's binary
        section (empty unless an output was asked for in binary)."""
        found = self.handler(name, version)
        if found is not None:
            return await self._handler_infer(found, request, binary)
        served = self.model(name, version)
        outputs = await self.execute(served, self.decode(served, request, binary))
        asked = {str(o.get("name")): o for o in request.get("outputs") or [] if isinstance(o, dict)}
        unknown = [w for w in asked if w not in outputs]
        if unknown:
            raise InferenceError(f"model {name!r} has no output {unknown[0]!r}")
        tensors, chunks = [], []
        for output in asked or list(outputs):
            array = outputs[output]
            if _wants_binary(request, asked.get(output)):
                chunk = to_bytes(array)
                tensors.append(
                    {
                        "name": output,
                        "shape": list(array.shape),
                        "datatype": datatype_of(array),
                        "parameters": {"binary_data_size": len(chunk)},
                    }
                )
                chunks.append(chunk)
            else:
                tensors.append(to_json(output, array))
        response: dict[str, Any] = {
            "model_name": served.name,
            "model_version": served.version,
            "outputs": tensors,
        }
        if "id" in request:
            response["id"] = request["id"]
        if isinstance(request.get("parameters"), dict):
            response["parameters"] = {}
        return response, b"".join(chunks)

    async def _handler_infer(
        self, found: ServedHandler, request: Any, binary: bytes
    ) -> tuple[dict[str, Any], bytes]:
        """A request already parsed (gRPC's, translated) through a handler, which decodes
        whole bodies: encoded again, and its answer parsed."""
        header = orjson.dumps(request)
        headers = {BINARY_HEADER: str(len(header))} if binary else {}
        answer = await found.run(found.handler.v2, header + binary, headers)
        length = answer.headers.get(BINARY_HEADER)
        size = int(length) if length and length.isdigit() else len(answer.body)
        try:
            parsed = orjson.loads(answer.body[:size])
        except orjson.JSONDecodeError as exc:
            raise InferenceError(f"model {found.name!r} answered no JSON: {exc}", 500) from exc
        if answer.status != 200:
            message = parsed.get("error") if isinstance(parsed, dict) else None
            raise InferenceError(str(message or parsed), answer.status)
        if not isinstance(parsed, dict):
            raise InferenceError(f"model {found.name!r} answered no V2 response", 500)
        return parsed, answer.body[size:]

    async def predict(self, name: str, version: str | None, body: Any) -> dict[str, Any]:
        """The V1 protocol: `{"instances": [...]}` → `{"predictions": [...]}`; each instance
        is one sample (for a model with several inputs, an object naming each: TF Serving's
        row format). The predictions are the first output's, or, for a runtime that answers
        rows (TensorFlow's), an object of every output per sample."""
        served = self.model(name, version)
        outputs = await self.execute(served, self._instances(served, body))
        if getattr(served.runtime, "v1_rows", False) and len(outputs) > 1:
            names = [spec.name for spec in served.runtime.outputs if spec.name in outputs]
            count = len(next(iter(outputs.values())))
            rows = [{n: _plain(outputs[n][i]) for n in names} for i in range(count)]
            return {"predictions": rows}
        first = outputs[served.runtime.outputs[0].name]
        return {"predictions": _plain(first)}

    def _instances(self, served: ServedModel, body: Any) -> dict[str, np.ndarray[Any, Any]]:
        """V1 instances as the model's input arrays, checked against its signature."""
        if not isinstance(body, dict) or not isinstance(body.get("instances"), list):
            raise InferenceError('the request needs `instances`: {"instances": [...]}')
        instances = body["instances"]
        specs = served.runtime.inputs
        if len(specs) == 1 and not _rows(instances, specs[0].name):
            columns = {specs[0].name: instances}
        else:
            if not _rows(instances):
                names = ", ".join(s.name for s in specs)
                raise InferenceError(f"model {served.name!r} has several inputs ({names}): each "
                                     "instance is an object with a value for each")  # fmt: skip
            columns = {s.name: [row.get(s.name) for row in instances] for s in specs}
        arrays = {}
        for spec in specs:
            values = columns[spec.name]
            if spec.datatype == "BYTES":
                values = [_b64(v) for v in values]
            try:
                batch = np.asarray(values, dtype=_numpy(spec.datatype))
            except (TypeError, ValueError) as exc:
                raise InferenceError(f"instances of {spec.name!r} are not {spec.datatype}: "
                                     f"{exc}") from exc  # fmt: skip
            check(spec, batch, spec.datatype)
            arrays[spec.name] = batch
        return arrays

    async def explain(self, name: str, body: Any) -> dict[str, Any]:
        """V1's `:explain` for a model served by a runtime: its built-in explainer's
        attributions, when the deployment has one."""
        served = self.model(name)
        if served.explainer is None:
            raise InferenceError(
                f"model {name!r} has no explainer: deploy it with an explainer (--explainer "
                "captum), or serve a predictor.py whose model has its own explain()",
                501,
            )
        instances = self._instances(served, body)
        return await served.explainer.explain(instances)


def _rows(instances: list[Any], only: str | None = None) -> bool:
    """Whether instances are objects naming inputs (a `{"b64": …}` value is not one), and
    when `only` is given, name only that input."""
    if not instances or not all(isinstance(i, dict) for i in instances):
        return False
    if any(set(i) == {"b64"} for i in instances):
        return False
    return only is None or all(set(i) == {only} for i in instances)


def _b64(value: Any) -> Any:
    """TF Serving's convention for binary values in JSON: `{"b64": "<base64>"}`."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        try:
            return base64.b64decode(str(value["b64"]), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InferenceError(f"a `b64` value is not base64: {exc}") from exc
    return value


def _plain(value: Any) -> Any:
    """A value of an answer as JSON has it (bytes as text)."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value.item() if isinstance(value, np.generic) else value


def _numpy(datatype: str) -> Any:
    return DATATYPES[datatype]


def check(spec: TensorSpec, array: np.ndarray[Any, Any], datatype: str) -> None:
    """The input's datatype and shape against the model's: a clear 400 rather than a crash."""
    if datatype != spec.datatype:
        raise InferenceError(
            f"input {spec.name!r} has datatype {datatype}, the model expects {spec.datatype}"
        )
    if spec.shape and (
        len(array.shape) != len(spec.shape)
        or any(want not in (-1, got) for want, got in zip(spec.shape, array.shape, strict=True))
    ):
        raise InferenceError(
            f"input {spec.name!r} has shape {list(array.shape)}, the model expects "
            f"{spec.shape} (-1: any size)"
        )


def _binary_size(tensor: dict[str, Any]) -> int | None:
    parameters = tensor.get("parameters")
    size = parameters.get("binary_data_size") if isinstance(parameters, dict) else None
    if size is None:
        return None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InferenceError(f"binary_data_size must be a number of bytes, got {size!r}")
    return size


def _wants_binary(request: dict[str, Any], output: dict[str, Any] | None) -> bool:
    """The binary extension for an output: asked per output, or for all of them."""
    if output is not None and isinstance(output.get("parameters"), dict):
        asked = output["parameters"].get("binary_data")
        if asked is not None:
            return bool(asked)
    parameters = request.get("parameters")
    return bool(isinstance(parameters, dict) and parameters.get("binary_data_output"))
