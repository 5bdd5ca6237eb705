"""`/v1/jobs/{id}/logs`: FfDL-style pages, or a server-sent event stream that ends with the job."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query

from loom.api.auth import PlatformDep, UserDep, owned_job
from loom.api.openapi import STREAM
from loom.api.routers import stream
from loom.api.routers.stream import Cursor, Wanted
from loom.api.schemas import WHOLE
from loom.domain.errors import InvalidInput
from loom.tds.logs import LogQuery, line_json

router = APIRouter(prefix="/v1/jobs", tags=["logs"])

# FfDL's paging parameters, shared by the log and metric endpoints.
Pos = Annotated[
    int, WHOLE, Query(ge=-(10**12), le=10**12, description="1-based; negative: from the end")
]
PageSize = Annotated[int, WHOLE, Query(ge=1, le=10_000)]
After = Annotated[
    int | None,
    WHOLE,
    Query(ge=0, le=2**53, description="the records after this `id` (keyset paging; not with pos)"),
]


def parse_since(since: str | None) -> float | None:
    """FfDL's `since`: epoch milliseconds, or an ISO-8601 time."""
    if since is None or since == "":
        return None
    if since.lstrip("-").isascii() and since.lstrip("-").isdigit() and len(since) <= 16:
        return int(since) / 1000.0
    try:
        return datetime.fromisoformat(since.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(
            f"since: expected epoch milliseconds or an ISO-8601 time, got {since!r}"
        ) from exc


@router.get("/{job_id}/logs", response_model=None, responses=STREAM)
def logs(
    job_id: str,
    loom: PlatformDep,
    user: UserDep,
    pos: Pos = 0,
    pagesize: PageSize = 100,
    since: str | None = None,
    learner: Annotated[int | None, WHOLE, Query(ge=1, le=100_000)] = None,
    after: After = None,
    follow: bool = False,
    states: Annotated[
        bool, Query(description="with follow: the job's state changes and their reasons too")
    ] = False,
    lines: Annotated[
        bool,
        Query(
            description="with follow and states: false for the state changes alone (what a "
            "client waiting for a state listens to), no log lines"
        ),
    ] = True,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Any:
    """A page of log lines; with `follow=true`, the lines as a server-sent event stream."""
    owned_job(loom, user, job_id)
    if follow and states and not lines:
        alone = Wanted(lines=False, points=False, learner=learner, states=True)
        return stream.response(stream.follow(loom, job_id, Cursor(), alone))
    wanted = Wanted(lines=True, points=False, learner=learner, states=states)
    if follow and last_event_id:
        return stream.response(stream.follow(loom, job_id, Cursor.parse(last_event_id), wanted))
    query = LogQuery(pos, pagesize, parse_since(since), learner, after)
    first = loom.tds.logs.query(job_id, query)
    if not follow:
        return {"job_id": job_id, "lines": [line_json(row) for row in first]}
    # Follow on from the first page, or from now if that page was empty.
    cursor = Cursor(line=first[-1].id if first else loom.tds.logs.last_id(job_id))
    firsts = [line_json(row) for row in first]
    return stream.response(stream.follow(loom, job_id, cursor, wanted, firsts))
