"""`/v1/learner/jobs/{id}/…`: the code, checkpoints and results of a learner that shares no
disk with the platform (`"transfer": "api"`), moved by its wrapper with the job's token.

    GET /{job}/code                                      the submitted zip
    GET /{job}/checkpoints                               a zip of the job's CHECKPOINT_DIR
    PUT /{job}/learners/{n}/checkpoints?attempt=N        a zip unpacked over it; its member
                                                         `.loom-deleted.json` (a JSON list of
                                                         paths) names files to remove first
    PUT /{job}/learners/{n}/results?attempt=N            a zip unpacked over the job's results

An upload is answered `{"files", "bytes", "deleted"}`, or 400 naming what was refused (nothing
is changed then). The body is read as a stream into a file, within LOOM_LEARNER_UPLOAD_MAX_MB
(`api.limits`); a wrapper sends `Expect: 100-continue`, so a refusal costs it no upload.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from loom.api.auth import CallerDep, PlatformDep
from loom.api.openapi import ZIP
from loom.api.platform import Platform
from loom.api.routers.learner import check_job_scope
from loom.api.schemas import WHOLE, Received
from loom.domain.errors import InvalidInput
from loom.lifecycle import transfers
from loom.lifecycle.workspace import Workspace

router = APIRouter(prefix="/v1/learner/jobs", tags=["learner"])

_BINARY = {"schema": {"type": "string", "format": "binary"}}
# A zip, whichever of the two it is sent as (generic clients know only octet-stream).
_ZIP_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/zip": _BINARY, "application/octet-stream": _BINARY},
    }
}
LearnerId = Annotated[int, PathParam(ge=1, le=2**31)]
AttemptNumber = Annotated[
    int, WHOLE, Query(ge=1, le=2**31, description="the sending learner's attempt")
]


@router.get("/{job_id}/code", response_class=FileResponse, responses=ZIP)
def code(job_id: str, who: CallerDep, loom: PlatformDep) -> FileResponse:
    """The job's code zip, as submitted."""
    check_job_scope(who, job_id)
    job = transfers.live_job(loom.db, job_id)
    return FileResponse(loom.artifacts.path(job.code_digest), media_type="application/zip")


@router.get("/{job_id}/checkpoints", response_class=FileResponse, responses=ZIP)
def checkpoints(job_id: str, who: CallerDep, loom: PlatformDep) -> FileResponse:
    """A zip of the job's CHECKPOINT_DIR on the platform; empty when there is none."""
    check_job_scope(who, job_id)
    transfers.live_job(loom.db, job_id)
    archive = transfers.zip_checkpoints(loom.settings.jobs_dir, job_id)
    return FileResponse(
        archive,
        media_type="application/zip",
        background=BackgroundTask(archive.unlink, missing_ok=True),
    )


def _upload(which: transfers.Folder, summary: str) -> None:
    """`PUT /{job}/learners/{n}/<which>?attempt=N`: the two uploads differ only in their folder."""

    async def upload(
        job_id: str,
        learner_id: LearnerId,
        attempt: AttemptNumber,
        request: Request,
        who: CallerDep,
        loom: PlatformDep,
    ) -> dict[str, Any]:
        check_job_scope(who, job_id)
        return await _receive(request, loom, (job_id, attempt, learner_id), which)

    upload.__doc__ = summary
    path = f"/{{job_id}}/learners/{{learner_id}}/{which}"
    router.put(path, response_model=Received, openapi_extra=_ZIP_BODY, name=f"put_{which}")(upload)


_upload("checkpoints", "The learner's new or changed checkpoint files, over CHECKPOINT_DIR.")
_upload("results", "The learner's RESULT_DIR, over the job's results (each sends its own).")


async def _receive(
    request: Request, loom: Platform, learner: tuple[str, int, int], which: transfers.Folder
) -> dict[str, Any]:
    """Check the learner before reading anything (its body waits for `100 Continue`), then
    stream the body into a file beside the job's folders, then unpack it off the event loop."""
    job_id = learner[0]
    await anyio.to_thread.run_sync(transfers.check_learner, loom.db, *learner)
    workspace = Workspace(loom.settings.jobs_dir, job_id)
    body = await anyio.to_thread.run_sync(transfers.scratch_file, workspace, f".{which}-upload-")
    try:
        size = 0
        async with await anyio.open_file(body, "wb") as out:
            async for chunk in request.stream():  # within `api.limits.BodyLimit`
                size += len(chunk)
                await out.write(chunk)
        if not size:
            raise InvalidInput(f"{which} refused: the body is empty; send a zip", field="body")
        max_mb = loom.settings.learner_upload_max_mb
        args = (body, loom.settings.jobs_dir, job_id, which, max_mb)
        return await anyio.to_thread.run_sync(transfers.receive, *args)
    finally:
        body.unlink(missing_ok=True)
