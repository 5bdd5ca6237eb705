"""A custom predictor or transformer written against KServe's `kserve.Model`, served unchanged
by Loom's data plane. Runs in a replica only — inside its sandbox, in an environment that holds
KServe's own package — since loading it runs its author's code.

KServe's semantics, read from its `model.py` and `protocol/dataplane.py`: the class is built as
`Model(name)` and `load()`ed once (unless it made itself ready), and each request goes through
the model's own `__call__` — `preprocess` → `validate` → `predict` (or `explain`) →
`postprocess`, each sync or async — with V1 bodies as dicts and V2 bodies as KServe's
`InferRequest` (decoded by KServe's own code, the binary tensor extension included). The request's
headers reach the model (the gateway has taken the caller's credentials off them). KServe's error
classes keep their statuses: `InvalidInput` 400, `ModelNotFound` 404, `ModelNotReady` and
`ServerNotReady` 503, `NotImplementedError` 501, anything else 500 with its type and message
(the traceback goes to the replica's log, for the owner).

A transformer runs only its `preprocess` and `postprocess` here; the gateway sends what
`preprocess` made to the deployment's predictor and what it answered to `postprocess`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from loom.serving.formats import PREDICTOR, TRANSFORMER

BINARY_HEADER = "inference-header-content-length"
PROTOCOL_HEADER = "x-loom-protocol"  # between the gateway and a transformer: v1 or v2
DUMPS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
STATUS_BY_ERROR = {
    "InvalidInput": 400,
    "ModelNotFound": 404,
    "ModelNotReady": 503,
    "ServerNotReady": 503,
    "ServerNotLive": 503,
    "NoModelReady": 503,
    "UnsupportedProtocol": 501,
    "NotImplementedError": 501,
}


class LoadFailed(RuntimeError):
    """The predictor could not be imported, built or loaded; the message says why."""


@dataclass
class Answer:
    """An HTTP response: status, body and the headers to send with it."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, status: int, message: str) -> Answer:
        return cls(status, orjson.dumps({"error": message}))


class KServeModel:
    """The user's `kserve.Model`, loaded and ready; V1 and V2 requests through its `__call__`."""

    platform = "kserve"

    def __init__(self, folder: Path, name: str, version: str, role: str = "predictor") -> None:
        self.name, self.version, self.role = name, version, role
        self.kserve = _kserve()
        module = _import(folder, TRANSFORMER if role == "transformer" else PREDICTOR)
        self.model = _build(module, self.kserve.Model, name)
        self.own_call = type(self.model).__call__ is not self.kserve.Model.__call__

    async def load(self) -> None:
        """`load()` once, unless the model made itself ready; it must end ready."""
        model = self.model
        if not getattr(model, "ready", False):
            try:
                result = model.load()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                traceback.print_exc()
                raise LoadFailed(f"{type(model).__name__}.load() failed: {_said(exc)}") from exc
        if not getattr(model, "ready", False):
            raise LoadFailed(f"{type(model).__name__}.load() returned and the model is not ready")

    # -- metadata ----------------------------------------------------------------------------
    async def metadata(self) -> dict[str, Any]:
        """V2 model metadata from the model's own `get_input_types`/`get_output_types`."""
        inputs = await _maybe(self.model.get_input_types)
        outputs = await _maybe(self.model.get_output_types)
        return {
            "name": self.name,
            "versions": [self.version],
            "platform": self.platform,
            "inputs": list(inputs or []),
            "outputs": list(outputs or []),
        }

    # -- inference ---------------------------------------------------------------------------
    async def v1(self, verb: str, body: bytes, headers: dict[str, str]) -> Answer:
        """`:predict` or `:explain` with a JSON body (a dict, as KServe gives it)."""
        return await self._guarded(self._v1, verb, body, headers)

    async def v2(self, body: bytes, headers: dict[str, str]) -> Answer:
        """`/v2/models/{name}/infer`: the body decoded by KServe's own `InferRequest`."""
        return await self._guarded(self._v2, body, headers)

    async def _v1(self, verb: str, body: bytes, headers: dict[str, str]) -> Answer:
        response, extra = await self._call(self._json(body), headers, verb)
        return self._encode(response, extra)

    async def _v2(self, body: bytes, headers: dict[str, str]) -> Answer:
        response, extra = await self._call(self._infer_request(body, headers), headers)
        return self._encode(response, extra)

    async def _call(
        self, payload: Any, headers: dict[str, str], verb: str = "predict"
    ) -> tuple[Any, dict[str, str]]:
        """The model's pipeline, as `kserve.Model.__call__` runs it: preprocess, validate,
        predict or explain, postprocess, each awaited when it is a coroutine, the response
        headers passed where the model asked for them. A model that overrides `__call__` is
        called through it; otherwise the steps are run here, without KServe's per-step
        Prometheus timers (the replica's own metrics time the request)."""
        model = self.model
        if self.own_call:
            kind = self.kserve_verb(verb)
            found: tuple[Any, dict[str, str]] = await model(payload, headers=headers, verb=kind)
            return found
        extra: dict[str, str] = {}
        wants = bool(getattr(model, "required_response_headers", False))
        data = model.validate(await _maybe(model.preprocess, payload, headers))
        if verb == "explain":
            result = await _maybe(model.explain, data, headers)
        else:
            result = await _maybe(model.predict, data, headers, *([extra] if wants else []))
        result = await _maybe(model.postprocess, result, headers, *([extra] if wants else []))
        return result, extra

    def kserve_verb(self, verb: str) -> Any:
        from kserve.model import InferenceVerb

        return InferenceVerb.EXPLAIN if verb == "explain" else InferenceVerb.PREDICT

    # -- a transformer's two halves ----------------------------------------------------------
    async def preprocess(self, body: bytes, headers: dict[str, str]) -> Answer:
        """The predictor's request: what `preprocess` made of the caller's (its protocol in
        the `x-loom-protocol` header, v1 or v2, as for the caller's)."""
        return await self._guarded(self._preprocess, body, headers)

    async def postprocess(self, body: bytes, headers: dict[str, str]) -> Answer:
        """The caller's answer: what `postprocess` made of the predictor's."""
        return await self._guarded(self._postprocess, body, headers)

    async def _preprocess(self, body: bytes, headers: dict[str, str]) -> Answer:
        v2 = headers.get(PROTOCOL_HEADER) == "v2"
        payload = self._infer_request(body, headers) if v2 else self._json(body)
        made = await _maybe(self.model.preprocess, payload, headers)
        made = self.model.validate(made)
        if isinstance(made, self.kserve.InferRequest):
            rest, length = made.to_rest()
            answer = self._encode_rest(rest, length)
            answer.headers[PROTOCOL_HEADER] = "v2"
            return answer
        protocol = "v2" if v2 and isinstance(made, dict) and "inputs" in made else "v1"
        return Answer(200, orjson.dumps(made, option=DUMPS), {PROTOCOL_HEADER: protocol})

    async def _postprocess(self, body: bytes, headers: dict[str, str]) -> Answer:
        if headers.get(PROTOCOL_HEADER) == "v2":
            length = headers.get(BINARY_HEADER)
            response = self.kserve.InferResponse.from_bytes(
                body, int(length) if length and length.isdigit() else len(body)
            )
        else:
            response = self._json(body)
        arguments: tuple[Any, ...] = (response, headers)
        if getattr(self.model, "required_response_headers", False):
            arguments = (*arguments, {})
        made = await _maybe(self.model.postprocess, *arguments)
        return self._encode(made, arguments[2] if len(arguments) > 2 else {})

    # -- codecs ------------------------------------------------------------------------------
    def _json(self, body: bytes) -> Any:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise self.kserve.errors.InvalidInput(f"the body is not valid JSON: {exc}") from exc

    def _infer_request(self, body: bytes, headers: dict[str, str]) -> Any:
        length = headers.get(BINARY_HEADER)
        if length is not None and (not length.isdigit() or int(length) > len(body)):
            raise self.kserve.errors.InvalidInput(
                f"Inference-Header-Content-Length must be the JSON header's size in bytes (at "
                f"most {len(body)}), got {length[:40]!r}"
            )
        size = int(length) if length is not None else len(body)
        try:
            return self.kserve.InferRequest.from_bytes(body, size, self.name)
        except (KeyError, TypeError, AttributeError) as exc:  # what KServe's decoder assumed
            _check_v2(body[:size], self.kserve.errors.InvalidInput)  # says which, as a 400
            raise self.kserve.errors.InvalidInput(f"not a V2 request: {exc!r}") from exc

    def _encode(self, response: Any, extra: dict[str, str] | None) -> Answer:
        if isinstance(response, self.kserve.InferResponse):
            rest, length = response.to_rest()
            answer = self._encode_rest(rest, length)
        elif isinstance(response, bytes | str):
            answer = Answer(200, response.encode() if isinstance(response, str) else response)
        else:
            answer = Answer(200, orjson.dumps(response, option=DUMPS))
        for key, value in (extra or {}).items():
            answer.headers[str(key).lower()] = str(value)
        return answer

    @staticmethod
    def _encode_rest(rest: Any, length: int | None) -> Answer:
        if isinstance(rest, bytes):
            headers = {BINARY_HEADER: str(length), "content-type": "application/octet-stream"}
            return Answer(200, rest, headers)
        return Answer(200, orjson.dumps(rest, option=DUMPS))

    async def _guarded(self, work: Callable[..., Awaitable[Answer]], *args: Any) -> Answer:
        """The model's own errors as KServe answers them; never a traceback to the caller."""
        try:
            return await work(*args)
        except Exception as exc:
            status = status_of(exc)
            if status >= 500:
                traceback.print_exc()
            message = _said(exc) if status < 500 or _kserve_error(exc) else _typed(exc)
            return Answer.error(status, message)


def status_of(exc: BaseException) -> int:
    """The HTTP status KServe gives an exception of this class (by name: KServe's own error
    classes and their subclasses), else 500."""
    for kind in type(exc).__mro__:
        if kind.__name__ in STATUS_BY_ERROR and (
            kind.__module__.startswith("kserve") or kind is NotImplementedError
        ):
            return STATUS_BY_ERROR[kind.__name__]
    return 500


def _kserve_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("kserve")


def _said(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _typed(exc: BaseException) -> str:
    return f"{type(exc).__name__} : {exc}"


def _check_v2(header: bytes, invalid: type[Exception]) -> None:
    """What KServe's decoder assumes of a V2 request, said as an InvalidInput rather than a
    KeyError: a JSON object with `inputs`, each with a name, shape and datatype."""
    try:
        request = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise invalid("the request needs `inputs`: a list of tensors")
    for tensor in request["inputs"]:
        if not isinstance(tensor, dict):
            raise invalid(f"each input is an object, got {tensor!r}"[:200])
        for key in ("name", "shape", "datatype"):
            if key not in tensor:
                raise invalid(f"input {tensor.get('name')!r} has no `{key}`")


async def _maybe(function: Callable[..., Any], *args: Any) -> Any:
    result = function(*args)
    return await result if inspect.isawaitable(result) else result


def _kserve() -> ModuleType:
    try:
        return importlib.import_module("kserve")
    except ImportError as exc:
        raise LoadFailed(
            f"KServe's package is not in this replica's environment ({exc}): a predictor.py "
            "is served with kserve installed"
        ) from exc


def _import(folder: Path, filename: str) -> ModuleType:
    """The user's module, imported with its folder first on the path (its own modules beside
    it import) and `MODEL_DIR` naming the folder, as a learner's code has it."""
    path = folder / filename
    os.environ["MODEL_DIR"] = str(folder)
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise LoadFailed(f"{filename} cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        traceback.print_exc()
        raise LoadFailed(f"{filename} failed on import: {_typed(exc)}") from exc
    return module


def _build(module: ModuleType, base: type, name: str) -> Any:
    """The one `kserve.Model` subclass the module defines, built as KServe builds it."""
    found: list[Any] = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, base)
        and value is not base
        and value.__module__ == module.__name__
    ]
    filename = f"{module.__name__}.py"
    if not found:
        raise LoadFailed(f"{filename} defines no class deriving from kserve.Model")
    if len(found) > 1:
        names = ", ".join(sorted(kind.__name__ for kind in found))
        raise LoadFailed(f"{filename} defines several kserve.Model classes ({names}); keep one")
    try:
        return found[0](name)
    except Exception as exc:
        traceback.print_exc()
        raise LoadFailed(f"{found[0].__name__}({name!r}) failed: {_typed(exc)}") from exc
