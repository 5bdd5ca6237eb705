"""Operating the platform: `/health` (alive), `/ready` (for load balancers), `/metrics`
(Prometheus)."""

from __future__ import annotations

import functools
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4
from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from loom import __version__
from loom.api.auth import PlatformDep, admin_user, caller, current_user
from loom.api.openapi import PROMETHEUS, READY
from loom.domain.errors import PlatformError
from loom.store.db import MIGRATIONS, Database
from loom.store.tables import Job

router = APIRouter(tags=["operations"])
log = logging.getLogger("loom.api")


@router.get("/health")
def health() -> dict[str, Any]:
    """The process answers; nothing more is checked (see `/ready`)."""
    return {"status": "ok", "version": __version__}


@router.get("/ready", responses=READY)
def ready(loom: PlatformDep) -> dict[str, Any]:
    """200 when the database answers and its schema is the one this server was built for; 503
    with the reason otherwise. No token: it is for load balancers."""
    try:
        with loom.db.session() as session:
            revision = session.scalar(text("SELECT version_num FROM alembic_version"))
    except SQLAlchemyError as exc:
        log.warning("not ready: the database does not answer: %s", exc)
        raise PlatformError("not ready: the database does not answer") from None
    if revision != schema_head():
        raise PlatformError(
            f"not ready: the database schema is at revision {revision}, "
            f"this server's is {schema_head()}"
        )
    return {"status": "ready", "database": loom.db.dialect}


def scraper(request: Request, loom: PlatformDep) -> None:
    """An admin's token, unless `LOOM_METRICS_PUBLIC` lets anyone scrape."""
    if not loom.settings.metrics_public:
        admin_user(request, loom, current_user(caller(request, loom)))


@router.get("/metrics", responses=PROMETHEUS, response_class=Response)
def metrics(loom: PlatformDep, _scraper: Annotated[None, Depends(scraper)]) -> Response:
    """The platform's own metrics in Prometheus' text format: jobs by state, the queue, the
    scheduler, request latency by route, ingestion, who runs the lifecycle. An admin's token
    is needed unless the platform sets `LOOM_METRICS_PUBLIC=true`."""
    return Response(loom.platform_metrics.exposition(), media_type=CONTENT_TYPE_PLAIN_0_0_4)


def jobs_by_state(db: Database) -> dict[str, int]:
    """How many jobs are in each state: one GROUP BY over an indexed column."""
    with db.session() as session:
        rows = session.execute(select(Job.state, func.count()).group_by(Job.state))
        return {state: count for state, count in rows.tuples()}


@functools.cache
def schema_head() -> str:
    """The newest migration this server has (the one it migrated the database to at start)."""
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory(str(MIGRATIONS)).get_current_head())
