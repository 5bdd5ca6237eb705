"""FfDL's REST API v1 (IBM/FfDL `restapi/api_v1/swagger/swagger.yml`) over Loom's jobs.

Mounted under `/ffdl`: FfDL's CLI takes its base path from `DLAAS_URL`, so
`DLAAS_URL=http://HOST:PORT/ffdl` points it here, while `/v1/models` stays Loom's model registry.
FfDL's clients that call the bare `/v1/models` or `/v1/logs` paths are recognised by their
credentials (`recognise`) and served here too. A model is a Loom job: one job, seen from both
APIs. Status codes and shapes are FfDL's (201 `BasicNewModel`, 202 on halt, 200 on delete, errors
as `{code, error, description}`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from loom.api.audit import Audit
from loom.api.auth import PlatformDep, client_address, owned_job
from loom.api.platform import Platform
from loom.api.routers import jobs as core_jobs
from loom.api.routers.jobs import accept_job
from loom.api.routers.logs import parse_since
from loom.api.schemas import WHOLE
from loom.dialects.ffdl import shapes, streams
from loom.dialects.ffdl.auth import FfdlUser, ffdl_user
from loom.dialects.ffdl.errors import FfdlRoute
from loom.domain.errors import InvalidInput
from loom.store import jobs as job_rows
from loom.store import logs as log_rows
from loom.store import metrics as metric_rows
from loom.store.tables import Job, User
from loom.tds.logs import LogQuery
from loom.tds.metrics import MetricQuery, emetrics_json

PREFIX = "/ffdl"
# Described by FfDL's own swagger (its shapes and error body differ from Loom's), not by Loom's
# OpenAPI document, whose clients and fuzzing expect Loom's error body on every route.
router = APIRouter(
    prefix=PREFIX + "/v1", tags=["FfDL API v1"], route_class=FfdlRoute, include_in_schema=False
)

# FfDL's `version` query parameter (the API's release date) is accepted and changes nothing:
# there is one version of this API.
ApiVersion = Annotated[str | None, Query(max_length=40, description="FfDL's API date; any")]
LISTED = 1000  # `GET /v1/models` has no paging in FfDL's swagger: the newest this many
SEARCH_TYPES = ("TERM", "NESTED", "MATCH", "ALL")


class TrainingUpdate(BaseModel):
    """FfDL's `TrainingUpdate`: `{"status": "halt"}` (Loom also resumes a halted job)."""

    model_config = ConfigDict(extra="ignore")
    status: str = Field(max_length=40)


def _model(job: Job) -> dict[str, Any]:
    summary = {
        "id": job.id,
        "name": job.name,
        "state": job.state,
        "status_message": job.status_message,
        "error_code": job.error_code,
        "submitted_at": job.submitted_at,
        "finished_at": job.finished_at,
        "cpus": job.cpus,
        "gpus": job.gpus,
        "memory": job.memory,
        "learners": job.learners,
    }
    return shapes.model(summary, json.loads(job.manifest))


@router.post("/models", status_code=201)
async def post_model(
    request: Request, loom: PlatformDep, user: FfdlUser, version: ApiVersion = None
) -> JSONResponse:
    """postModel: multipart `manifest` and `model_definition` (a zip), as Loom's `POST /v1/jobs`."""
    audit = Audit(loom.db, user, client_address(request))
    job, _manifest = await accept_job(request, loom, user, audit)
    body = shapes.basic_new_model(job.id)
    return JSONResponse(body, 201, {"Location": body["location"]})


@router.get("/models")
def list_models(loom: PlatformDep, user: FfdlUser, version: ApiVersion = None) -> Any:
    """listModels: the caller's models (jobs), newest first."""
    with loom.db.session() as session:
        page = job_rows.list_jobs(session, owner_id=user.id, states=[], offset=0, limit=LISTED)
    return shapes.model_list(_model(job) for job in page.jobs)


@router.get("/models/{model_id}")
def get_model(model_id: str, loom: PlatformDep, user: FfdlUser, version: ApiVersion = None) -> Any:
    """getModel: the model with its `training.training_status`."""
    return _model(owned_job(loom, user, model_id))


@router.patch("/models/{model_id}", status_code=202)
def patch_model(
    model_id: str,
    update: TrainingUpdate,
    request: Request,
    loom: PlatformDep,
    user: FfdlUser,
    version: ApiVersion = None,
) -> Any:
    """patchModel: `{"status": "halt"}` halts the training (202); `resume` resumes it."""
    owned_job(loom, user, model_id)
    action = update.status.strip().lower()
    if action not in ("halt", "resume"):
        raise InvalidInput(
            f"status: {update.status!r} is not an action; use halt (or resume)", field="status"
        )
    job = loom.lifecycle.resume(model_id) if action == "resume" else loom.lifecycle.halt(model_id)
    Audit(loom.db, user, client_address(request)).job(f"job.{action}", job)
    return {"model_id": model_id}


@router.delete("/models/{model_id}")
def delete_model(
    model_id: str, request: Request, loom: PlatformDep, user: FfdlUser, version: ApiVersion = None
) -> Any:
    """deleteModel: stops the training if it runs and deletes the model (200, `BasicModel`)."""
    job = owned_job(loom, user, model_id)
    loom.lifecycle.delete(model_id)
    Audit(loom.db, user, client_address(request)).job("job.delete", job)
    return {"model_id": model_id}


@router.get("/models/{model_id}/definition", response_class=FileResponse)
def download_model_definition(
    model_id: str, loom: PlatformDep, user: FfdlUser, version: ApiVersion = None
) -> FileResponse:
    """downloadModelDefinition: the submitted code, as the zip it came in."""
    return core_jobs.definition(model_id, loom, user)


@router.get("/models/{model_id}/trained_model", response_class=FileResponse)
def download_trained_model(
    model_id: str, loom: PlatformDep, user: FfdlUser, version: ApiVersion = None
) -> FileResponse:
    """downloadTrainedModel: a zip of the training's `RESULT_DIR`."""
    return core_jobs.results(model_id, loom, user)


def _since(since_time: str | None) -> tuple[float | None, int | None]:
    """FfDL's `since_time` as (a time, a count of the last records): empty, an RFC 3339 time,
    epoch milliseconds, or `-N`, the last N records."""
    text = (since_time or "").strip()
    if text.startswith("-") and text[1:].isdecimal() and len(text) <= 10:
        return None, int(text[1:]) or None
    return parse_since(text), None


Pos = Annotated[int, WHOLE, Query(ge=-(10**12), le=10**12)]
PageSize = Annotated[int, WHOLE, Query(ge=1, le=10_000)]
SinceTime = Annotated[str | None, Query(max_length=40)]
SearchType = Annotated[str, Query(alias="searchType", max_length=10)]


def paging(
    pos: Pos = 0,
    pagesize: PageSize = 10,
    since_time: SinceTime = None,
    search_type: SearchType = "TERM",
) -> tuple[int, int, float | None]:
    """FfDL's query of the training data: `pos` (1-based; negative from the end), `pagesize`
    (FfDL's default 10), `since_time`; `searchType` chose an Elasticsearch query that, by one
    model's id, found the same records: it is checked and changes nothing."""
    if search_type.upper() not in SEARCH_TYPES:
        raise InvalidInput(f"searchType: one of {', '.join(SEARCH_TYPES)}", field="searchType")
    since, back = _since(since_time)
    if back is not None:  # the last `back` records
        return -1, min(back, pagesize), since
    return pos, pagesize, since


Paging = Annotated[tuple[int, int, float | None], Depends(paging)]


@router.get("/logs/{model_id}/loglines")
def get_loglines(
    model_id: str, loom: PlatformDep, user: FfdlUser, page: Paging, version: ApiVersion = None
) -> Any:
    """getLoglines: a page of `v1LogLine`s."""
    owned_job(loom, user, model_id)
    pos, pagesize, since = page
    rows = loom.tds.logs.query(model_id, LogQuery(pos, pagesize, since))
    total = _count(loom, model_id, log_rows.count_lines) if pos < 0 else 0
    numbers = shapes.rindexes(pos, len(rows), total)
    return {
        "models": [
            shapes.log_line(model_id, user.name, r.text, r.time, n)
            for r, n in zip(rows, numbers, strict=True)
        ]
    }


@router.get("/logs/{model_id}/emetrics")
def get_emetrics(
    model_id: str, loom: PlatformDep, user: FfdlUser, page: Paging, version: ApiVersion = None
) -> Any:
    """getEMetrics: a page of `v1EMetrics` records."""
    owned_job(loom, user, model_id)
    pos, pagesize, since = page
    rows = loom.tds.metrics.query(model_id, MetricQuery(pos=pos, pagesize=pagesize, since=since))
    total = _count(loom, model_id, metric_rows.count_points) if pos < 0 else 0
    numbers = shapes.rindexes(pos, len(rows), total)
    return {
        "models": [
            shapes.emetrics(emetrics_json(r, model_id, n), user.name)
            for r, n in zip(rows, numbers, strict=True)
        ]
    }


def _count(loom: Platform, model_id: str, count: Any) -> int:
    with loom.db.session() as session:
        return int(count(session, model_id))


@router.get("/models/{model_id}/logs", response_model=None)
def get_logs(
    model_id: str,
    loom: PlatformDep,
    user: FfdlUser,
    follow: bool = False,
    since_time: SinceTime = None,
    version: ApiVersion = None,
) -> StreamingResponse:
    """getLogs: the training log as text, chunked; `follow=true` until the training ends."""
    owned_job(loom, user, model_id)
    reader = streams.log_reader(parse_since(since_time))
    lines = streams.follow(loom, model_id, reader, live=follow)
    return StreamingResponse(lines, media_type="text/plain; charset=utf-8")


@router.get("/models/{model_id}/metrics", response_model=None)
def get_metrics(
    model_id: str,
    loom: PlatformDep,
    user: FfdlUser,
    follow: bool = False,
    since_time: SinceTime = None,
    version: ApiVersion = None,
) -> StreamingResponse:
    """getMetrics: the evaluation metrics as JSON lines (`v1EMetrics`), chunked."""
    owned_job(loom, user, model_id)
    reader = streams.metrics_reader(parse_since(since_time), user.name)
    lines = streams.follow(loom, model_id, reader, live=follow)
    return StreamingResponse(lines, media_type="application/x-ndjson")


async def _websocket(websocket: WebSocket, model_id: str, metrics: bool) -> None:
    """FfDL answered a websocket with the stream, followed to the end of the training."""
    loom: Platform = websocket.app.state.platform
    try:
        user: User = await anyio.to_thread.run_sync(ffdl_user, websocket, loom)  # type: ignore[arg-type]
        await anyio.to_thread.run_sync(owned_job, loom, user, model_id)
    except Exception as exc:  # refused: said in the close reason, as a browser can read it
        await websocket.close(code=1008, reason=str(exc)[:120])
        return
    await websocket.accept()
    since = parse_since(websocket.query_params.get("since_time"))
    reader = streams.metrics_reader(since, user.name) if metrics else streams.log_reader(since)
    try:
        async for batch in streams.follow(loom, model_id, reader, live=True):
            await websocket.send_text(batch)
    except WebSocketDisconnect:
        return
    await websocket.close()


@router.websocket("/models/{model_id}/logs")
async def logs_websocket(websocket: WebSocket, model_id: str) -> None:
    await _websocket(websocket, model_id, metrics=False)


@router.websocket("/models/{model_id}/metrics")
async def metrics_websocket(websocket: WebSocket, model_id: str) -> None:
    await _websocket(websocket, model_id, metrics=True)


_EVENTS = (
    "FfDL's server never implemented event notification endpoints (it answered 501 too); "
    "Loom streams every job's changes at GET /v1/events (server-sent events)"
)


@router.get("/models/{model_id}/events/{event_type}", status_code=501)
@router.get("/models/{model_id}/events/{event_type}/{endpoint_id}", status_code=501)
@router.post("/models/{model_id}/events/{event_type}/{endpoint_id}", status_code=501)
@router.delete("/models/{model_id}/events/{event_type}/{endpoint_id}", status_code=501)
def event_endpoints(model_id: str, user: FfdlUser) -> Any:
    """getEventTypeEndpoints, getEventEndpoint, createEventEndpoint, deleteEventEndpoint: 501."""
    raise HTTPException(501, _EVENTS)
