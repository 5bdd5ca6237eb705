"""The V2 / Open Inference Protocol over gRPC (`inference.GRPCInferenceService`): ServerLive,
ServerReady, ModelReady, ServerMetadata, ModelMetadata and ModelInfer.

A gRPC request is translated to the REST form the data plane (or a replica) already serves:
every input tensor, typed `contents` or `raw_input_contents`, travels as the binary tensor
extension, and outputs come back as raw bytes, so the two protocols share one path, one
batcher and one set of checks. The answer carries raw outputs when the request sent raw inputs
(as Triton's clients expect), typed contents otherwise. Errors keep their meaning: 400 is
INVALID_ARGUMENT, 404 NOT_FOUND, 401 UNAUTHENTICATED, 503 UNAVAILABLE. The methods are served
by `grpc_wire`'s server (a model server's and a gateway's alike).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from loom.serving import grpc_wire
from loom.serving.dataplane import DataPlane, InferenceError
from loom.serving.tensors import DATATYPES
from loom.serving.v2_proto import METHODS, SERVICE, messages

MAX_MESSAGE = 64 * 2**20
# the typed field of InferTensorContents that holds each datatype (FP16 travels raw only)
CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
CODES = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    502: grpc.StatusCode.UNAVAILABLE,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}
OPEN = frozenset({"ServerLive", "ServerReady"})  # health: answered without a token


class Backend(Protocol):
    """What answers the protocol: a data plane here, or a gateway's replicas."""

    async def ready(self) -> bool: ...

    async def model_ready(self, name: str, version: str | None) -> bool: ...

    async def server_metadata(self) -> dict[str, Any]: ...

    async def model_metadata(self, name: str, version: str | None) -> dict[str, Any]: ...

    async def infer(
        self, name: str, version: str | None, body: dict[str, Any], binary: bytes
    ) -> tuple[dict[str, Any], bytes]: ...


class PlaneBackend:
    """The protocol answered by this process's own models."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane

    async def ready(self) -> bool:
        return bool(self.plane.names)

    async def model_ready(self, name: str, version: str | None) -> bool:
        if self.plane.handler(name, version) is None:
            self.plane.model(name, version)
        return True

    async def server_metadata(self) -> dict[str, Any]:
        return self.plane.server_metadata()

    async def model_metadata(self, name: str, version: str | None) -> dict[str, Any]:
        return await self.plane.model_metadata(name, version)

    async def infer(
        self, name: str, version: str | None, body: dict[str, Any], binary: bytes
    ) -> tuple[dict[str, Any], bytes]:
        self.plane.active += 1
        try:
            return await self.plane.infer(name, version, body, binary)
        finally:
            self.plane.active -= 1


# -- translation ------------------------------------------------------------------------------
def parameter(value: Any) -> Any:
    """An InferParameter's value."""
    which = value.WhichOneof("parameter_choice")
    return getattr(value, which) if which else None


def set_parameter(target: Any, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = str(value)


def to_rest(request: Any) -> tuple[dict[str, Any], bytes]:
    """A ModelInferRequest as a V2 REST request whose inputs are all binary, and its binary
    section; outputs are asked for in binary."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise InferenceError(
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs; "
            "send every input raw, or none"
        )
    inputs, chunks = [], []
    for index, tensor in enumerate(request.inputs):
        chunk = raw[index] if raw else _contents_bytes(tensor)
        params = {k: parameter(v) for k, v in tensor.parameters.items()}
        params["binary_data_size"] = len(chunk)
        shape = list(tensor.shape)
        inputs.append(
            {"name": tensor.name, "datatype": tensor.datatype, "shape": shape, "parameters": params}
        )
        chunks.append(chunk)
    params = {k: parameter(v) for k, v in request.parameters.items()}
    params["binary_data_output"] = True
    body: dict[str, Any] = {"inputs": inputs, "parameters": params}
    if request.id:
        body["id"] = request.id
    if request.outputs:
        body["outputs"] = [
            {"name": o.name, "parameters": {"binary_data": True}} for o in request.outputs
        ]
    return body, b"".join(chunks)


def _contents_bytes(tensor: Any) -> bytes:
    """An input sent in typed `contents`, as the binary extension's bytes."""
    field = CONTENTS.get(tensor.datatype)
    if field is None:
        if tensor.datatype in DATATYPES:  # FP16
            raise InferenceError(
                f"input {tensor.name!r}: {tensor.datatype} has no typed contents; send it in "
                "raw_input_contents"
            )
        raise InferenceError(f"input {tensor.name!r}: unknown datatype {tensor.datatype!r}")
    values = getattr(tensor.contents, field)
    if tensor.datatype == "BYTES":
        return b"".join(len(v).to_bytes(4, "little") + v for v in values)
    try:
        array = np.asarray(values, dtype=np.dtype(DATATYPES[tensor.datatype]).newbyteorder("<"))
    except OverflowError as exc:
        raise InferenceError(f"input {tensor.name!r}: a value is out of range: {exc}") from exc
    return array.tobytes()


def from_rest(answer: dict[str, Any], section: bytes, raw: bool) -> Any:
    """A V2 REST answer with binary outputs as a ModelInferResponse: raw outputs, or typed
    contents when the request sent none raw."""
    response = messages()["ModelInferResponse"](
        model_name=str(answer.get("model_name", "")),
        model_version=str(answer.get("model_version", "")),
        id=str(answer.get("id", "")),
    )
    for key, value in (answer.get("parameters") or {}).items():
        set_parameter(response.parameters[key], value)
    offset = 0
    for tensor in answer.get("outputs", []):
        output = response.outputs.add(
            name=tensor["name"], datatype=tensor["datatype"], shape=tensor["shape"]
        )
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is None:  # a JSON output (a replica that ignored binary_data)
            chunk = _json_bytes(tensor)
        else:
            chunk = section[offset : offset + int(size)]
            offset += int(size)
        if raw:
            response.raw_output_contents.append(chunk)
        else:
            _fill_contents(output, chunk)
    return response


def _json_bytes(tensor: dict[str, Any]) -> bytes:
    if tensor["datatype"] == "BYTES":
        items = [str(x).encode() for x in tensor["data"]]
        return b"".join(len(x).to_bytes(4, "little") + x for x in items)
    dtype = np.dtype(DATATYPES[tensor["datatype"]]).newbyteorder("<")
    return np.asarray(tensor["data"], dtype=dtype).tobytes()


def _fill_contents(output: Any, chunk: bytes) -> None:
    field = CONTENTS.get(output.datatype)
    if field is None:  # FP16: no typed field in the protocol
        raise InferenceError(f"output {output.name!r} is {output.datatype}: ask for it raw")
    target = getattr(output.contents, field)
    if output.datatype == "BYTES":
        at = 0
        while at + 4 <= len(chunk):
            size = int.from_bytes(chunk[at : at + 4], "little")
            target.append(chunk[at + 4 : at + 4 + size])
            at += 4 + size
        return
    dtype = np.dtype(DATATYPES[output.datatype]).newbyteorder("<")
    target.extend(np.frombuffer(chunk, dtype=dtype).tolist())


def metadata_message(found: dict[str, Any]) -> Any:
    response = messages()["ModelMetadataResponse"](
        name=found["name"], versions=found.get("versions", []), platform=found.get("platform", "")
    )
    for key in ("inputs", "outputs"):
        for tensor in found.get(key, []):
            getattr(response, key).add(
                name=tensor["name"], datatype=tensor["datatype"], shape=tensor["shape"]
            )
    return response


# -- the service ------------------------------------------------------------------------------
Refusal = Callable[[str | None], str | None]  # the authorization metadata → why refused, or None


def _calls(backend: Backend) -> dict[str, Callable[[Any], Awaitable[Any]]]:
    """Each method's answer to its request message, over `backend`."""
    kinds = messages()

    async def live(_request: Any) -> Any:
        return kinds["ServerLiveResponse"](live=True)

    async def ready(_request: Any) -> Any:
        return kinds["ServerReadyResponse"](ready=await backend.ready())

    async def model_ready(request: Any) -> Any:
        found = await backend.model_ready(request.name, request.version or None)
        return kinds["ModelReadyResponse"](ready=found)

    async def server_metadata(_request: Any) -> Any:
        found = await backend.server_metadata()
        return kinds["ServerMetadataResponse"](
            name=found.get("name", ""),
            version=found.get("version", ""),
            extensions=found.get("extensions", []),
        )

    async def model_metadata(request: Any) -> Any:
        return metadata_message(await backend.model_metadata(request.name, request.version or None))

    async def infer(request: Any) -> Any:
        if not request.model_name:
            raise InferenceError("the request needs `model_name`")
        body, binary = to_rest(request)
        answer, section = await backend.infer(
            request.model_name, request.model_version or None, body, binary
        )
        return from_rest(answer, section, raw=bool(request.raw_input_contents))

    return {
        "ServerLive": live,
        "ServerReady": ready,
        "ModelReady": model_ready,
        "ServerMetadata": server_metadata,
        "ModelMetadata": model_metadata,
        "ModelInfer": infer,
    }


def wire_handlers(backend: Backend, refusal: Refusal | None = None) -> dict[str, grpc_wire.Handler]:
    """The same service for `grpc_wire.Server`: each method's path to its handler."""
    kinds, calls = messages(), _calls(backend)
    found: dict[str, grpc_wire.Handler] = {}
    for method, (request_type, _response_type) in METHODS.items():
        guard = None if method in OPEN else refusal
        found[f"/{SERVICE}/{method}"] = _wired(method, kinds[request_type], calls[method], guard)
    return found


def _wired(
    method: str, kind: Any, call: Callable[[Any], Awaitable[Any]], refusal: Refusal | None
) -> grpc_wire.Handler:
    async def handler(data: bytes, metadata: dict[str, str]) -> bytes:
        if refusal is not None:
            refused = refusal(metadata.get("authorization"))
            if refused is not None:
                raise grpc_wire.Status(_code(grpc.StatusCode.UNAUTHENTICATED), refused)
        try:
            request = kind.FromString(data)
        except DecodeError as exc:
            raise grpc_wire.Status(
                _code(grpc.StatusCode.INVALID_ARGUMENT), f"not a {kind.DESCRIPTOR.name}: {exc}"
            ) from None
        try:
            answer = await call(request)
        except InferenceError as exc:
            code = CODES.get(exc.status, grpc.StatusCode.INTERNAL)
            raise grpc_wire.Status(_code(code), exc.message) from None
        return bytes(answer.SerializeToString())

    handler.__name__ = method
    return handler


def _code(status: grpc.StatusCode) -> int:
    return int(status.value[0])
