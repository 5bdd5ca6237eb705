"""MLflow's artifact proxy (`/api/2.0/mlflow-artifacts/artifacts/…`): the client uploads, lists
and downloads a run's or a logged model's files through the platform, which keeps them in its
artifact store. Nothing is written to a shared folder (design §3.8)."""

from __future__ import annotations

import mimetypes
import posixpath
import tempfile

from fastapi import Request, Response
from fastapi.responses import FileResponse
from starlette.concurrency import run_in_threadpool

from loom.api.auth import PlatformDep
from loom.dialects.mlflow.calls import ActorDep, Fields, mlflow_router, ok
from loom.dialects.mlflow.shapes import text

router = mlflow_router("/api/2.0/mlflow-artifacts")
SPOOL = 8 << 20  # bodies past this go to a temporary file on their way to the store


@router.get("/artifacts")
def list_artifacts(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    path = text(fields.get("path"), "path") or ""
    _place, found = loom.run_files.listing(who, path)
    files = []
    for entry in found:
        shown: dict[str, object] = {"path": posixpath.basename(entry.path), "is_dir": entry.is_dir}
        if entry.size is not None:
            shown["file_size"] = entry.size
        files.append(shown)
    return ok({"files": files} if files else {})


@router.get("/artifacts/{path:path}")
def download(path: str, who: ActorDep, loom: PlatformDep) -> FileResponse:
    found = loom.run_files.open(who, path)
    kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
    return FileResponse(found, media_type=kind)


@router.put("/artifacts/{path:path}")
async def upload(path: str, request: Request, who: ActorDep, loom: PlatformDep) -> Response:
    with tempfile.SpooledTemporaryFile(max_size=SPOOL) as spool:
        async for chunk in request.stream():
            spool.write(chunk)
        spool.seek(0)
        await run_in_threadpool(loom.run_files.put, who, path, spool)  # type: ignore[arg-type]
    return ok()


@router.delete("/artifacts/{path:path}")
def delete(path: str, who: ActorDep, loom: PlatformDep) -> Response:
    loom.run_files.delete(who, path)
    return ok()
