"""`/v1/events`: the caller's jobs' state changes as they happen, as server-sent events; what
a jobs page listens to rather than asking again and again.

Each `job` event is one stored transition (`job_id`, `name`, `owner`, `state`, `at`,
`message`); its id is the transition's, so a client that reconnects with `Last-Event-ID` gets
those it missed. Without one, the stream starts from now. Admins may ask for everyone's
(`all=true`). A transition committed late on PostgreSQL, behind a newer one, can be missed: a
client that must see every state reads the job, as the jobs page does on each event.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Query
from sqlalchemy import func, select

from loom.api.auth import PlatformDep, UserDep
from loom.api.platform import Platform
from loom.api.routers import stream
from loom.domain.errors import InvalidInput
from loom.store.tables import Job, JobEvent, User

router = APIRouter(prefix="/v1/events", tags=["events"])

POLL_S = 1.0
CHUNK = 500
_EVENTS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "a server-sent event stream of `job` events",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}


@router.get("", response_model=None, responses=_EVENTS)
def events(
    loom: PlatformDep,
    user: UserDep,
    all_users: Annotated[bool, Query(alias="all", description="admins: everyone's")] = False,
    last_event_id: Annotated[str | None, Header(max_length=20)] = None,
) -> Any:
    """Your jobs' state changes from now on (or after `Last-Event-ID`), as they happen."""
    owner = None if all_users and user.is_admin else user.id
    if last_event_id is not None:
        if not last_event_id.isdecimal():
            raise InvalidInput(f"Last-Event-ID: expected an event id, got {last_event_id!r}")
        after = int(last_event_id)
    else:
        after = _newest(loom)
    return stream.response(_follow(loom, owner, after))


def _newest(loom: Platform) -> int:
    with loom.db.session() as session:
        return int(session.scalar(select(func.max(JobEvent.id))) or 0)


def _after(loom: Platform, owner: str | None, after: int) -> list[dict[str, Any]]:
    query = (
        select(JobEvent, Job.name, User.name)
        .join(Job, Job.id == JobEvent.job_id)
        .join(User, User.id == Job.owner_id)
        .where(JobEvent.id > after)
        .order_by(JobEvent.id)
        .limit(CHUNK)
    )
    if owner is not None:
        query = query.where(Job.owner_id == owner)
    with loom.db.session() as session:
        return [
            {"id": event.id, "job_id": event.job_id, "name": name, "owner": owner_name,
             "state": event.state, "at": event.at, "message": event.message}
            for event, name, owner_name in session.execute(query)
        ]  # fmt: skip


async def _follow(loom: Platform, owner: str | None, after: int) -> AsyncIterator[str]:
    last_write = time.monotonic()
    yield ": listening\n\n"  # the headers go out now: the client knows it is connected
    while True:
        found = await anyio.to_thread.run_sync(_after, loom, owner, after)
        for event in found:
            after = event["id"]
            yield f"id: {after}\nevent: job\ndata: {json.dumps(event)}\n\n"
        if found:
            last_write = time.monotonic()
            continue
        await anyio.sleep(POLL_S)
        if time.monotonic() - last_write >= stream.KEEPALIVE_S:
            last_write = time.monotonic()
            yield ": keep-alive\n\n"
