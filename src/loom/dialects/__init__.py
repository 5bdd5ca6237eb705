"""Foreign formats and APIs, translated at the edge (design §3.10).

One room per dialect: FfDL's manifests, REST API and CLI verbs; Kubeflow's training jobs, TrainJobs,
Katib Experiments and KServe InferenceServices; KFP's pipeline IR and `kfp.Client`'s API; Argo
Workflows; MLflow's tracking and registry API. Each translates, purely where it can, into Loom's
own domain objects (manifest, job, experiment, pipeline, deployment, run) and back into the
dialect's status shapes. A translation never weakens Loom's validation and never drops a field in
silence: what it cannot honour is refused with the field named, or reported in the answer as
ignored or approximated, with why.

Dialects sit above the core API (they reuse its authentication, its services and its error
mapping) and below the composition root, `loom.app`, which mounts their routers beside the core
routers. Dialects do not import each other.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.types import ASGIApp

from loom.dialects import ffdl


def routers() -> list[APIRouter]:
    """Every dialect's HTTP routes, mounted by `loom.app.create_app` beside the core API."""
    from loom.dialects.apply.router import router as apply  # imported late: dialects import
    # `loom.dialects.kinds`, which imports this package first

    return [ffdl.router, apply]


def middleware() -> list[type[ASGIApp]]:
    """ASGI middleware that sends a dialect's clients on paths Loom also serves to that
    dialect's routes (FfDL's on `/v1/models`), added by `loom.app.create_app`."""
    return [ffdl.RecogniseFfdlClients]
