"""`/v1/jobs/{id}/logs`: FfDL-style pages, or a server-sent event stream that ends with the job."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from loom.api.auth import PlatformDep, UserDep, owned_job
from loom.api.platform import Platform
from loom.domain.errors import InvalidInput
from loom.domain.states import TERMINAL_STATES
from loom.store import jobs as job_rows
from loom.tds.logs import LogQuery, line_json

router = APIRouter(prefix="/v1/jobs", tags=["logs"])

KEEPALIVE_S = 15.0


def parse_since(since: str | None) -> float | None:
    """FfDL's `since`: epoch milliseconds, or an ISO-8601 time."""
    if since is None or since == "":
        return None
    if since.lstrip("-").isdigit() and len(since) <= 16:
        return int(since) / 1000.0
    try:
        return datetime.fromisoformat(since.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(
            f"since: expected epoch milliseconds or an ISO-8601 time, got {since!r}"
        ) from exc


@router.get("/{job_id}/logs", response_model=None)
def logs(
    job_id: str,
    loom: PlatformDep,
    user: UserDep,
    pos: Annotated[int, Query(ge=-(10**12), le=10**12)] = 0,
    pagesize: Annotated[int, Query(ge=1, le=10_000)] = 100,
    since: str | None = None,
    learner: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    follow: bool = False,
) -> Any:
    owned_job(loom, user, job_id)
    query = LogQuery(pos=pos, pagesize=pagesize, since=parse_since(since), learner=learner)
    first = loom.logs.query(job_id, query)
    if not follow:
        return {"job_id": job_id, "lines": [line_json(row) for row in first]}
    # Follow on from the first page, or from now if that page was empty.
    start = first[-1].id if first else loom.logs.last_id(job_id)
    stream = _follow(loom, job_id, [line_json(row) for row in first], start, learner)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


def _event(kind: str, data: dict[str, Any], event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data)}\n\n"


def _job_state(loom: Platform, job_id: str) -> str | None:
    with loom.db.session() as session:
        job = job_rows.get_job(session, job_id)
        return job.state if job is not None else None


async def _follow(
    loom: Platform, job_id: str, first: list[dict[str, Any]], last_id: int, learner: int | None
) -> AsyncIterator[str]:
    """Lines as they arrive; a final `end` event carries the job's state."""
    for line in first:
        yield _event("line", line, line["id"])
    last_write = time.monotonic()
    while True:
        state = await anyio.to_thread.run_sync(_job_state, loom, job_id)
        rows = await anyio.to_thread.run_sync(loom.logs.after, job_id, last_id, learner, 1000)
        for row in rows:
            last_id = row.id
            yield _event("line", line_json(row), row.id)
        if rows:
            last_write = time.monotonic()
            continue
        if state is None or state in TERMINAL_STATES:
            yield _event("end", {"job_id": job_id, "state": state or "DELETED"})
            return
        await loom.signals.wait(job_id, timeout=KEEPALIVE_S)
        if time.monotonic() - last_write >= KEEPALIVE_S:
            last_write = time.monotonic()
            yield ": keep-alive\n\n"
