"""`/v1/apply` and `/v1/objects`: Kubernetes-style objects (Kubeflow's, KServe's, ...) applied,
read, listed and deleted the way `kubectl` does it, each kind served by its dialect's handler.

    POST   /v1/apply                    YAML or JSON documents (or multipart: `objects` and a
                                        `model_definition` zip of the code they run)
    POST   /v1/delete                   the objects the documents name, deleted
    GET    /v1/objects                  the kinds served
    GET    /v1/objects/{kind}           the caller's objects of a kind (a `List`)
    GET    /v1/objects/{kind}/{name}    one object, with its status
    DELETE /v1/objects/{kind}/{name}    one object, and what it became
"""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
from fastapi import APIRouter, Request

from loom.api.audit import AuditDep
from loom.api.auth import PlatformDep, UserDep
from loom.api.platform import Platform
from loom.api.uploads import check_manifest_size, multipart_body, spec_and_code
from loom.dialects.apply import documents
from loom.dialects.apply.registry import Registry
from loom.dialects.apply.service import Objects, kinds_of
from loom.storage.archive import check_zip
from loom.store.tables import User

router = APIRouter(tags=["objects"])

_BODY = multipart_body(
    "objects",
    "one or several Kubernetes-style documents (YAML, `---` between them, or JSON)",
    "a zip of the code the objects run (optional)",
)
_BODY["requestBody"]["content"].update(
    {kind: {"schema": {"type": "string"}} for kind in ("application/yaml", "application/json")}
)


def registry() -> Registry:
    from loom.dialects.apply.kinds import handlers  # the dialects' handlers, listed once

    return Registry(handlers())


async def _documents(request: Request, loom: Platform) -> tuple[list[Any], bytes | None]:
    """The request's documents and code (a zip, checked), from multipart or a plain body."""
    kind = request.headers.get("content-type", "")
    code = None
    if kind.startswith("multipart/form-data"):
        text, code = await spec_and_code(request, loom.settings, "objects")
    else:
        text = b""
        async for chunk in request.stream():
            text += chunk
            check_manifest_size(text, loom.settings.max_manifest_bytes, "body")
    if code is not None:
        limit = loom.settings.max_unpacked_mb * 2**20
        await anyio.to_thread.run_sync(lambda: check_zip(code, max_unpacked=limit))
    found = await anyio.to_thread.run_sync(documents.parse, text, kind)
    return found, code


@router.post("/v1/apply", openapi_extra=_BODY)
async def apply(
    request: Request, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    """Create or update each object; the answer says what each became and which of its fields
    were ignored or approximated. Every document is checked before any is applied."""
    found, code = await _documents(request, loom)
    objects = Objects(loom, user, registry(), code)
    results = await anyio.to_thread.run_sync(objects.apply, found)
    for result in results:
        if result["action"] != "unchanged":
            target = f"{result['kind']}/{result['name']}"
            record = partial(audit, "object.apply", target, change=result["action"])
            await anyio.to_thread.run_sync(record)
    return {"objects": results}


@router.post("/v1/delete", openapi_extra=_BODY)
async def delete_documents(
    request: Request, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    """`kubectl delete -f`: the objects the documents name, and what they became."""
    found, _code = await _documents(request, loom)
    objects = Objects(loom, user, registry())
    results = await anyio.to_thread.run_sync(objects.delete_documents, found)
    for result in results:
        if result["action"] == "deleted":
            target = f"{result['kind']}/{result['name']}"
            await anyio.to_thread.run_sync(partial(audit, "object.delete", target))
    return {"objects": results}


@router.get("/v1/objects")
def kinds() -> dict[str, Any]:
    """The kinds `apply` takes and `get` shows (`kubectl api-resources`)."""
    return {"kinds": kinds_of(registry())}


@router.get("/v1/objects/{kind}")
def list_objects(kind: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """Your objects of a kind (`tfjobs`, `tfjob`, `experiments.kubeflow.org`, `isvc`, ...)."""
    return {"apiVersion": "v1", "kind": "List", "items": _objects(loom, user).listing(kind)}


@router.get("/v1/objects/{kind}/{name}")
def get_object(kind: str, name: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """One of your objects, with the status its own controller would write."""
    return _objects(loom, user).get(kind, name)


@router.delete("/v1/objects/{kind}/{name}")
def delete_object(
    kind: str, name: str, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    """One of your objects, and what it became (its job, experiment, deployment)."""
    result = _objects(loom, user).delete(kind, name)
    audit("object.delete", f"{result['kind']}/{name}")
    return result


def _objects(loom: Platform, user: User) -> Objects:
    return Objects(loom, user, registry())
