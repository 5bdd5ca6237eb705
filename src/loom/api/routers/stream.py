"""The live stream of a job's log lines and metric points, as server-sent events.

Every event's id is the stream's cursor after it, `<line id>.<point id>`: a client that
reconnects with `Last-Event-ID` gets exactly what it had not seen. The stream ends with an
`end` event once the job has ended and everything stored has been sent. Asked for, `state`
events (no id: a reconnect gets the current state again) tell each change of the job's state
and of why it waits or what it is doing.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi.responses import StreamingResponse

from loom.api.platform import Platform
from loom.domain.errors import InvalidInput
from loom.domain.states import TERMINAL_STATES
from loom.store import jobs as job_rows
from loom.tds.logs import line_json
from loom.tds.metrics import point_json

KEEPALIVE_S = 15.0
STATE_POLL_S = 1.0  # how often a stream that carries state changes looks for one
_CURSOR = re.compile(r"^([0-9]{1,18})(?:\.([0-9]{1,18}))?$")
CHUNK = 1000


@dataclass
class Cursor:
    line: int = 0
    point: int = 0

    def __str__(self) -> str:
        return f"{self.line}.{self.point}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        match = _CURSOR.match(text.strip())
        if match is None:
            raise InvalidInput(f"Last-Event-ID: expected <line>.<point>, got {text[:60]!r}")
        return cls(int(match.group(1)), int(match.group(2) or 0))


@dataclass(frozen=True)
class Wanted:
    lines: bool = True
    points: bool = False
    learner: int | None = None
    states: bool = False  # the job's state changes (with why it waits) as `state` events


def _event(kind: str, data: dict[str, Any], cursor: Cursor | None = None) -> str:
    head = f"id: {cursor}\n" if cursor is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data)}\n\n"


def _job_state(loom: Platform, job_id: str) -> tuple[str | None, str]:
    """The job's state and what it says about it: why it waits, or its status message."""
    with loom.db.session() as session:
        job = job_rows.get_job(session, job_id)
        if job is None:
            return None, ""
        note = job.queue_reason if job.state == "QUEUED" else job.status_message
        return job.state, note or ""


def _next(loom: Platform, job_id: str, cursor: Cursor, wanted: Wanted) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    if wanted.lines:
        rows = loom.tds.logs.after(job_id, cursor.line, wanted.learner, CHUNK)
        events += [("line", row) for row in rows]
    if wanted.points:
        found = loom.tds.metrics.after(job_id, cursor.point, wanted.learner, CHUNK)
        events += [("metric", row) for row in found]
    return events


async def follow(
    loom: Platform,
    job_id: str,
    cursor: Cursor,
    wanted: Wanted,
    first: list[dict[str, Any]] | None = None,
) -> AsyncIterator[str]:
    for line in first or []:
        cursor.line = line["id"]
        yield _event("line", line, cursor)
    last_write = time.monotonic()
    told: tuple[str | None, str] | None = None
    while True:
        # Listening before looking: what is stored while we look wakes the wait below.
        with loom.signals.listen(job_id) as listener:
            state, note = await anyio.to_thread.run_sync(_job_state, loom, job_id)
            if wanted.states and state is not None and (state, note) != told:
                told = (state, note)
                yield _event("state", {"state": state, "message": note})
            events = await anyio.to_thread.run_sync(_next, loom, job_id, cursor, wanted)
            for kind, row in events:
                if kind == "line":
                    cursor.line = row.id
                    yield _event(kind, line_json(row), cursor)
                else:
                    cursor.point = row.id
                    yield _event(kind, point_json(row), cursor)
            if events:
                last_write = time.monotonic()
                continue
            if state is None or state in TERMINAL_STATES:
                yield _event("end", {"job_id": job_id, "state": state or "DELETED"})
                return
            await listener.wait(STATE_POLL_S if wanted.states else KEEPALIVE_S)
        if time.monotonic() - last_write >= KEEPALIVE_S:
            last_write = time.monotonic()
            yield ": keep-alive\n\n"


def response(stream: AsyncIterator[str]) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
