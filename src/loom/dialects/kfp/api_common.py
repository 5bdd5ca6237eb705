"""What the KFP API's routers share: errors in KFP's shape, the caller's KFP objects, and a
pipeline package read into its IR documents.

KFP's server (grpc-gateway) answers an error as `{"error", "code", "message"}` with a gRPC code;
its clients show the message. Loom's errors are answered so here, the field named as ever.
"""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from loom.api.errors import STATUS
from loom.dialects.kfp import ir
from loom.dialects.kfp.objects import KfpObjects
from loom.domain import spec_checks
from loom.domain.errors import InvalidInput, LoomError
from loom.pipelines.service import MAX_NODES
from loom.store.tables import User

PREFIX = "/apis/v2beta1"
MAX_PACKAGE = 16 * 2**20  # an uploaded package, unpacked
# HTTP statuses as gRPC codes, which KFP's errors carry.
_GRPC = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 413: 8, 429: 8, 503: 14}


class KfpRoute(APIRoute):
    """A route whose Loom errors are answered in KFP's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except LoomError as exc:
                status = next((s for kind, s in STATUS if isinstance(exc, kind)), 500)
                body: dict[str, Any] = {
                    "error": exc.message,
                    "message": exc.message,
                    "code": _GRPC.get(status, 2),
                }
                if isinstance(exc, InvalidInput) and exc.field:
                    body["field"] = exc.field
                return JSONResponse(body, status)

        return answer


def objects(loom: Any, user: User) -> KfpObjects:
    return KfpObjects(loom.db, user.id)


def documents_of(spec: Any, where: str = "pipeline_spec") -> list[dict[str, Any]]:
    """The IR documents of a `pipeline_spec` as the SDK sends it: the PipelineSpec itself, or
    `{pipeline_spec, platform_spec}` when the pipeline has a platform spec."""
    if not isinstance(spec, dict) or not spec:
        raise InvalidInput(f"{where}: a compiled pipeline (a JSON object)", field=where)
    if isinstance(spec.get("pipeline_spec"), dict):
        platform = spec.get("platform_spec")
        return [spec["pipeline_spec"], *([platform] if isinstance(platform, dict) else [])]
    return [spec]


def spec_of(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The inverse of `documents_of`: what a pipeline version shows as its `pipeline_spec`."""
    if len(documents) > 1:
        return {"pipeline_spec": documents[0], "platform_spec": documents[1]}
    return documents[0]


def read_package(data: bytes, filename: str) -> list[dict[str, Any]]:
    """An uploaded pipeline package: a compiled YAML or JSON file, or a zip or tar.gz holding
    one; refused (naming what is wrong) if it is not KFP's IR."""
    text = _unpacked(data, filename)
    documents = spec_checks.load_documents(text, "the pipeline package", MAX_NODES)
    if not documents or not ir.recognises(documents):
        raise InvalidInput(
            "uploadfile: not a compiled KFP pipeline (a YAML with pipelineInfo and root, as "
            "kfp.compiler.Compiler writes)",
            field="uploadfile",
        )
    spec, platform, _ = ir.split(documents)
    return [spec, *([platform] if platform else [])]


def _unpacked(data: bytes, filename: str) -> bytes:
    name = filename.lower()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                members = [m for m in archive.infolist() if _pipeline_file(m.filename)]
                if len(members) == 1 and members[0].file_size <= MAX_PACKAGE:
                    return archive.read(members[0])
        elif name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                files = [m for m in archive.getmembers() if m.isfile() and _pipeline_file(m.name)]
                if len(files) == 1 and files[0].size <= MAX_PACKAGE:
                    handle = archive.extractfile(files[0])
                    if handle is not None:
                        return handle.read()
        else:
            return data
    except (zipfile.BadZipFile, tarfile.TarError, OSError) as exc:
        raise InvalidInput(
            f"uploadfile: {filename} cannot be read: {exc}", field="uploadfile"
        ) from None
    raise InvalidInput(
        f"uploadfile: {filename} must hold exactly one pipeline .yaml, .yml or .json file",
        field="uploadfile",
    )


def _pipeline_file(name: str) -> bool:
    return name.lower().endswith((".yaml", ".yml", ".json")) and "/." not in f"/{name}"


def json_body(raw: bytes, what: str) -> dict[str, Any]:
    """A request body that must be a JSON object."""
    try:
        found = json.loads(raw or b"{}")
    except ValueError as exc:
        raise InvalidInput(f"{what}: the body is not JSON: {exc}", field=what) from None
    if not isinstance(found, dict):
        raise InvalidInput(f"{what}: the body is a JSON object", field=what)
    return found
