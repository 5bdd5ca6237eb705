"""MLflow's tracking server and model registry, served by the platform at MLflow's own paths:
`MLFLOW_TRACKING_URI=http://loom:8470` with `MLFLOW_TRACKING_TOKEN=<a Loom token>` works with
MLflow's stock client. Its experiments are Loom's projects, its runs Loom's runs (a job is one),
its registry Loom's registry; its errors keep MLflow's shape on these paths."""

from __future__ import annotations

from fastapi import APIRouter, Response
from starlette.exceptions import HTTPException

from loom.dialects.mlflow import artifacts, logged_models, registry, tracking
from loom.dialects.mlflow.calls import API, mlflow_router

fallback = mlflow_router(API)
UPLOADS = ("/api/2.0/mlflow-artifacts/artifacts/",)  # artifacts, PUT by the client


@fallback.api_route("/{rest:path}", methods=["GET", "POST", "PATCH", "DELETE", "PUT"])
def unknown(rest: str) -> Response:
    """What MLflow serves and Loom does not (traces, datasets, scorers…) says so, in MLflow's
    shape."""
    raise HTTPException(404, f"{API}/{rest} is not served by Loom")


def routers() -> list[APIRouter]:
    return [tracking.router, logged_models.router, registry.router, artifacts.router, fallback]
