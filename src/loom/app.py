"""`create_app(settings)`: the whole platform's app, the composition root.

The core API (`loom.api`) and the foreign dialects (`loom.dialects`) mounted together. Entry points
(`python -m loom.api`, test emulators) build the app here, so that one job is one job whichever API
submitted it.
"""

from __future__ import annotations

from fastapi import FastAPI

from loom import dialects
from loom.api.app import create_app as create_core_app
from loom.launchers.base import Launcher
from loom.settings import Settings


def create_app(settings: Settings, *, launcher: Launcher | None = None) -> FastAPI:
    """The platform's app: the core API with every dialect's routes beside it, and the pipeline
    formats the dialects translate known to the pipelines service."""
    app = create_core_app(
        settings,
        launcher=launcher,
        extra_routers=dialects.routers(),
        upload_prefixes=dialects.upload_prefixes(),
    )
    app.state.platform.pipelines.dialects = dialects.pipeline_dialects()
    for middleware in dialects.middleware():
        app.add_middleware(middleware)  # type: ignore[arg-type]
    return app
