"""FfDL's live streams of a model's training: its log as text (`/v1/models/{id}/logs`) and its
evaluation metrics as JSON lines (`/v1/models/{id}/metrics`), each over a chunked HTTP answer or
a websocket, as FfDL served them. Without `follow` a stream ends with what is stored; with it, it
ends once the job has ended and everything stored has been sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from loom.api.platform import Platform
from loom.domain.states import TERMINAL_STATES
from loom.store import jobs as job_rows
from loom.tds.metrics import emetrics_json

CHUNK = 1000
WAIT_S = 15.0  # at most this long between looks at the job's state


def _state(loom: Platform, job_id: str) -> str | None:
    with loom.db.session() as session:
        job = job_rows.get_job(session, job_id)
        return None if job is None else job.state


def _lines(loom: Platform, job_id: str, after: int, since: float | None) -> tuple[int, list[str]]:
    rows = loom.tds.logs.after(job_id, after, None, CHUNK)
    kept = [r.text for r in rows if since is None or r.time >= since]
    return (rows[-1].id if rows else after), kept


def _metrics(
    loom: Platform, job_id: str, after: int, since: float | None, user: str
) -> tuple[int, list[str]]:
    rows = loom.tds.metrics.after(job_id, after, None, CHUNK)
    kept = []
    for row in rows:
        if since is None or row.time >= since:
            record = emetrics_json(row, job_id, row.id)
            record["meta"]["user_id"] = user
            kept.append(json.dumps(record))
    return (rows[-1].id if rows else after), kept


Reader = Callable[[Platform, str, int], tuple[int, list[str]]]


def log_reader(since: float | None) -> Reader:
    return lambda loom, job_id, after: _lines(loom, job_id, after, since)


def metrics_reader(since: float | None, user: str) -> Reader:
    return lambda loom, job_id, after: _metrics(loom, job_id, after, since, user)


async def follow(loom: Platform, job_id: str, read: Reader, *, live: bool) -> AsyncIterator[str]:
    """Batches of newline-ended records: those stored, then (when `live`) those to come."""
    cursor = 0
    while True:
        with loom.signals.listen(job_id) as listener:  # before looking: nothing stored is missed
            state = await anyio.to_thread.run_sync(_state, loom, job_id)
            cursor, batch = await anyio.to_thread.run_sync(read, loom, job_id, cursor)
            if batch:
                yield "".join(f"{text}\n" for text in batch)
                continue
            if not live or state is None or state in TERMINAL_STATES:
                return
            await listener.wait(WAIT_S)


def wants_websocket(headers: Any) -> bool:
    """FfDL's server answered with a websocket when the request carried its key."""
    return bool(headers.get("sec-websocket-key"))
