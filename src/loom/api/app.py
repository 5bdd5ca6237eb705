"""`create_app(settings)`: the REST API with the lifecycle running inside it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial

from fastapi import APIRouter, FastAPI

import loom
from loom.api import errors, identity, openapi
from loom.api.limits import BodyLimit
from loom.api.nul import NoNul
from loom.api.platform import Platform, build_platform
from loom.api.ratelimit import RateLimits
from loom.api.request_timing import RequestTiming
from loom.api.routers import (
    admin,
    audit,
    deployments,
    events,
    experiments,
    graphs,
    jobs,
    learner,
    logs,
    metrics,
    models,
    monitoring,
    operations,
    pipelines,
    runs,
    session,
    tokens,
    transfers,
    users,
)
from loom.launchers.base import Launcher
from loom.lifecycle.transfers import body_bytes
from loom.serving.drift import DriftMetrics
from loom.settings import Settings
from loom.ui import routes as ui


def create_app(
    settings: Settings,
    *,
    launcher: Launcher | None = None,
    extra_routers: Sequence[APIRouter] = (),
    upload_prefixes: tuple[str, ...] = (),
) -> FastAPI:
    """Build the app and its platform; the lifecycle starts with the app and stops with it.
    `extra_routers` are mounted after the core ones (the dialects, by `loom.app`); a PUT under
    one of `upload_prefixes` may be as large as an upload."""
    platform: Platform = build_platform(settings, launcher)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        platform.start()
        try:
            yield
        finally:
            platform.close()

    app = FastAPI(
        title="Loom",
        version=loom.__version__,
        description="Submit, run, follow and keep deep-learning training jobs.",
        lifespan=lifespan,
        docs_url=None,  # served by `openapi.install`, to signed-in callers
        redoc_url=None,
        openapi_url=None,
    )
    app.state.platform = platform
    errors.install(app)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_upload_mb * 2**20,
        json_bytes=min(settings.max_json_mb, settings.max_upload_mb) * 2**20,
        learner_upload_bytes=body_bytes(settings.learner_upload_max_mb),
        upload_prefixes=upload_prefixes,
    )
    app.add_middleware(NoNul)
    app.add_middleware(RequestTiming, platform_metrics=platform.platform_metrics)
    app.state.rate_limits = RateLimits(settings)
    platform.platform_metrics.read_at_scrape(
        partial(operations.jobs_by_state, platform.db), platform.leader_status
    )
    platform.platform_metrics.registry.register(
        DriftMetrics(platform.deployments.drift.latest_per_deployment)
    )
    routers = (
        jobs,
        experiments,
        pipelines,
        logs,
        metrics,
        models,
        runs,
        deployments,
        monitoring,
        graphs,
        users,
        session,
        learner,
        transfers,
        admin,
        tokens,
        events,
    )
    for router in (module.router for module in (operations, identity, *routers, audit, ui)):
        app.include_router(router)
    for extra in extra_routers:
        app.include_router(extra)

    openapi.install(app, public=settings.docs_public)
    return app
