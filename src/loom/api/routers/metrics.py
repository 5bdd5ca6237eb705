"""`/v1/jobs/{id}/metrics`: evaluation metrics as FfDL-style pages, chart series, FfDL's
EMetrics records, or a live stream with the log lines; and points logged from outside."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Annotated, Any

import anyio
import orjson
from fastapi import APIRouter, Header, Query, Request

from loom.api.auth import PlatformDep, UserDep, owned_job
from loom.api.openapi import STREAM
from loom.api.routers import stream
from loom.api.routers.logs import After, PageSize, Pos, parse_since
from loom.api.routers.stream import Cursor, Wanted
from loom.api.schemas import WHOLE
from loom.domain.errors import InvalidInput
from loom.tds.metrics import MetricQuery, emetrics_json, point_json
from loom.tds.series import DEFAULT_BUDGET, MAX_BUDGET

router = APIRouter(prefix="/v1/jobs", tags=["metrics"])

MAX_BATCH = 50_000


class Form(StrEnum):
    POINTS = "points"
    SERIES = "series"
    EMETRICS = "emetrics"


@router.get("/{job_id}/metrics", response_model=None, responses=STREAM)
def metrics(
    job_id: str,
    loom: PlatformDep,
    user: UserDep,
    pos: Pos = 0,
    pagesize: PageSize = 100,
    since: str | None = None,
    group: Annotated[str | None, Query(max_length=100)] = None,
    name: Annotated[str | None, Query(max_length=200)] = None,
    learner: Annotated[int | None, WHOLE, Query(ge=0, le=100_000)] = None,
    after: After = None,
    form: Form = Form.POINTS,
    points: Annotated[
        int,
        WHOLE,
        Query(
            ge=4,
            le=MAX_BUDGET,
            description="form=series: the most points per line; a line with more is reduced "
            "to its first, last, lowest and highest points per bucket of steps (its name is "
            "then in `downsampled`, with how many points it has: page through them exactly "
            "with form=points and `after`)",
        ),
    ] = DEFAULT_BUDGET,
    follow: bool = False,
    lines: Annotated[bool, Query(description="with follow: the log lines too")] = True,
    states: Annotated[
        bool, Query(description="with follow: the job's state changes and their reasons too")
    ] = False,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Any:
    """Points (`form=points`), `{group: {name: {steps, values}}}` (`form=series`) or FfDL's
    records (`form=emetrics`); `follow=true` streams points and log lines as they arrive."""
    owned_job(loom, user, job_id)
    if follow:
        cursor = Cursor.parse(last_event_id) if last_event_id else Cursor()
        wanted = Wanted(lines=lines, points=True, learner=learner, states=states)
        return stream.response(stream.follow(loom, job_id, cursor, wanted))
    query = MetricQuery(
        pos=pos,
        pagesize=pagesize,
        since=parse_since(since),
        group=group,
        name=name,
        learner=learner,
        after=after,
    )
    if form == Form.SERIES:
        return {"job_id": job_id, **loom.tds.metrics.series(job_id, query, points)}
    rows = loom.tds.metrics.query(job_id, query)
    if form == Form.EMETRICS:
        first = max(pos, 1)
        return {"models": [emetrics_json(r, job_id, first + i) for i, r in enumerate(rows)]}
    return {"job_id": job_id, "metrics": [point_json(row) for row in rows]}


@router.post("/{job_id}/metrics", status_code=201)
async def log_metrics(
    job_id: str, request: Request, loom: PlatformDep, user: UserDep
) -> dict[str, Any]:
    """Points logged by the job's owner from outside the job (an evaluation run, a notebook):
    `{"metrics": [{"seq", "group", "step", "values": {...}, "time"?}]}`, idempotent on `seq`.
    They are stored as learner 0."""
    owned_job(loom, user, job_id, admins=False)  # admins read any job; only owners add to it
    raw = await request.body()
    loom.tds.ingest_rate.charge(user.id, user.name, len(raw))

    def parse_and_store() -> int:
        points = _points(raw)
        loom.tds.ingest(job_id, 0, 0, [], points, strict=True)
        return len(points)

    # Parsing and checking up to MAX_BATCH points is CPU work: off the event loop.
    return {"accepted": await anyio.to_thread.run_sync(parse_and_store)}


def _points(raw: bytes) -> list[dict[str, Any]]:
    try:
        points = orjson.loads(raw)["metrics"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise InvalidInput('send {"metrics": [{"seq": 1, "values": {"loss": 0.1}}, ...]}') from exc
    if not isinstance(points, list) or len(points) > MAX_BATCH:
        raise InvalidInput(f"metrics: a list of at most {MAX_BATCH} points")
    now = time.time()
    for point in points:
        if not isinstance(point, dict) or "seq" not in point:
            raise InvalidInput(f"metrics: every point needs a `seq`, got {point!r}"[:300])
        point.setdefault("time", now)
    return points
