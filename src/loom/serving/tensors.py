"""The Open Inference Protocol's tensor datatypes and their NumPy counterparts."""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

DATATYPES: dict[str, Any] = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}
_BY_DTYPE = {np.dtype(v): k for k, v in DATATYPES.items()}

# ONNX Runtime's and TorchScript's names for the same types.
ONNX_TYPES = {
    "tensor(bool)": "BOOL", "tensor(int8)": "INT8", "tensor(int16)": "INT16",
    "tensor(int32)": "INT32", "tensor(int64)": "INT64", "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16", "tensor(uint32)": "UINT32", "tensor(uint64)": "UINT64",
    "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64",
    "tensor(string)": "BYTES",
}  # fmt: skip
TORCH_TYPES = {
    "bool": "BOOL", "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
    "uint8": "UINT8", "float16": "FP16", "float32": "FP32", "float64": "FP64",
}  # fmt: skip


class TensorError(ValueError):
    """A request tensor that cannot be read; the message names it and says why."""


def datatype_of(array: np.ndarray[Any, Any]) -> str:
    if array.dtype.kind in ("U", "S", "O"):
        return "BYTES"
    found = _BY_DTYPE.get(array.dtype)
    if found is None:
        raise TensorError(f"no V2 datatype for {array.dtype}")
    return str(found)


def to_array(name: str, datatype: str, shape: list[int], data: Any) -> np.ndarray[Any, Any]:
    """A request's tensor as an array of its declared type and shape."""
    if datatype not in DATATYPES:
        raise TensorError(f"input {name!r}: unknown datatype {datatype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise TensorError(f"input {name!r}: shape must be a list of sizes, got {shape!r}")
    try:
        if datatype == "BYTES":
            flat = np.array([_element(x) for x in _flatten(data)], dtype=object)
        else:
            flat = np.asarray(data, dtype=DATATYPES[datatype]).reshape(-1)
    except (TypeError, ValueError, OverflowError) as exc:
        raise TensorError(f"input {name!r}: data is not {datatype}: {exc}") from exc
    expected = math.prod(shape)
    if flat.size != expected:
        raise TensorError(
            f"input {name!r}: shape {shape} holds {expected} values, the data has {flat.size}"
        )
    return flat.reshape(shape)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _json_element(value: Any) -> Any:
    """A BYTES element for JSON: text, or `{"b64": …}` for bytes that are not UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode()}
    return str(value)


def _flatten(data: Any) -> list[Any]:
    if isinstance(data, list | tuple):
        return [item for part in data for item in _flatten(part)]
    return [data]


def _element(value: Any) -> str | bytes:
    """A BYTES element from JSON: text, or binary as TF Serving writes it, `{"b64": …}`."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        try:
            return base64.b64decode(str(value["b64"]), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise TensorError(f"a `b64` value is not base64: {exc}") from exc
    return _text(value)


def to_json(name: str, array: np.ndarray[Any, Any]) -> dict[str, Any]:
    """An output tensor as the protocol's JSON: name, shape, datatype, flat data."""
    datatype = datatype_of(array)
    flat = array.reshape(-1)
    data = [_json_element(x) for x in flat] if datatype == "BYTES" else flat.tolist()
    return {"name": name, "shape": list(array.shape), "datatype": datatype, "data": data}


# -- the binary tensor data extension ---------------------------------------------------------
def from_bytes(name: str, datatype: str, shape: list[int], raw: bytes) -> np.ndarray[Any, Any]:
    """A tensor sent in the binary extension: little-endian values, or for BYTES each element
    as a 4-byte little-endian length and its bytes."""
    if datatype not in DATATYPES:
        raise TensorError(f"input {name!r}: unknown datatype {datatype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise TensorError(f"input {name!r}: shape must be a list of sizes, got {shape!r}")
    count = math.prod(shape)
    if datatype == "BYTES":
        return np.array(_split_bytes(name, raw, count), dtype=object).reshape(shape)
    dtype = np.dtype(DATATYPES[datatype]).newbyteorder("<")
    if len(raw) != count * dtype.itemsize:
        raise TensorError(
            f"input {name!r}: shape {shape} of {datatype} takes {count * dtype.itemsize} bytes, "
            f"the binary data has {len(raw)}"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def _split_bytes(name: str, raw: bytes, count: int) -> list[str | bytes]:
    items: list[str | bytes] = []
    at = 0
    for _ in range(count):
        if at + 4 > len(raw):
            raise TensorError(f"input {name!r}: the binary BYTES data ends early")
        size = int.from_bytes(raw[at : at + 4], "little")
        if at + 4 + size > len(raw):
            raise TensorError(f"input {name!r}: the binary BYTES data ends early")
        item = raw[at + 4 : at + 4 + size]
        try:  # text stays text; anything else (an encoded image) stays bytes
            items.append(item.decode("utf-8"))
        except UnicodeDecodeError:
            items.append(item)
        at += 4 + size
    if at != len(raw):
        raise TensorError(f"input {name!r}: {len(raw) - at} bytes left after {count} elements")
    return items


def to_bytes(array: np.ndarray[Any, Any]) -> bytes:
    """An output tensor's values for the binary extension."""
    if datatype_of(array) == "BYTES":
        parts = []
        for item in array.reshape(-1):
            data = item if isinstance(item, bytes) else str(item).encode()
            parts += [len(data).to_bytes(4, "little"), data]
        return b"".join(parts)
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return np.ascontiguousarray(little).tobytes()
