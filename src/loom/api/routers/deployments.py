"""`/v1/deployments`: serve a registered model version behind one endpoint, with replicas that
scale with the load; only the owner sees or changes a deployment. The endpoint answers the
owner's API tokens and the deployment's keys (`/keys`), or anyone when it is public."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from loom.api.audit import AuditDep
from loom.api.auth import PlatformDep, UserDep, forwarded_authorization
from loom.api.routers.monitoring import MonitoringIn
from loom.api.schemas import PRINTABLE, iso
from loom.serving.canary import CanaryChange
from loom.serving.code import Code
from loom.serving.monitoring import Monitoring
from loom.serving.scaling import Scaling
from loom.serving.tryout import metadata, stats, try_request

router = APIRouter(prefix="/v1/deployments", tags=["deployments"])

DeploymentName = Annotated[
    str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", description="DNS-label style")
]
Replicas = Annotated[int, Field(ge=0, le=64)]


class ScalingIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    min_replicas: Replicas | None = None
    max_replicas: Annotated[int, Field(ge=1, le=64)] | None = None
    target_concurrency: Annotated[float, Field(gt=0, le=10_000)] | None = None
    scale_down_delay_s: Annotated[float, Field(ge=0, le=86_400)] | None = None
    batch_size: Annotated[int, Field(ge=1, le=4096)] | None = None
    batch_wait_ms: Annotated[float, Field(ge=0, le=10_000)] | None = None
    gpus_per_replica: Annotated[int, Field(ge=0, le=16)] | None = Field(
        default=None, description="GPUs each replica is pinned to, its model run there; 0: CPU"
    )
    request_log: bool | None = None

    def scaling(self) -> dict[str, Any]:
        """The scaling and batching fields that were given."""
        given = {k: getattr(self, k) for k in ScalingIn.model_fields}
        return {k: v for k, v in given.items() if v is not None}


class DeploymentIn(ScalingIn):
    name: DeploymentName
    model: Annotated[str, Field(min_length=1, max_length=200, pattern=PRINTABLE)]
    version: Annotated[str, Field(min_length=1, max_length=100, pattern=PRINTABLE)] | int = "latest"
    port: Annotated[int, Field(ge=1024, le=65535)] | None = None
    grpc_port: Annotated[int, Field(ge=1024, le=65535)] | None = Field(
        default=None, description="the V2 gRPC endpoint's port; default: a free one"
    )
    public: bool = Field(default=False, description="answer without a token")
    monitoring: MonitoringIn | None = None
    runtime: Annotated[str, Field(max_length=30)] | None = Field(
        default=None,
        description="serve the version with this runtime (kserve, onnx, torchscript, pyfunc, "
        "tensorflow, keras, sklearn, torch, lightgbm, xgboost, huggingface); default: the "
        "first that fits its files",
    )
    pip: Annotated[list[Annotated[str, Field(max_length=300)]], Field(max_length=200)] = Field(
        default_factory=list, description="packages added to the replicas' environment"
    )
    explainer: Annotated[str, Field(max_length=30)] | None = Field(
        default=None, description="the built-in explainer for `:explain` (captum)"
    )
    transformer: Annotated[str, Field(max_length=24 * 2**20)] | None = Field(
        default=None,
        description="a transformer in front of the model: a zip of a folder holding "
        "transformer.py (a kserve.Model with preprocess and postprocess), in base64",
    )

    def code(self) -> Code:
        return Code(self.runtime, list(self.pip), self.explainer, self.transformer)


class DeploymentPatch(ScalingIn):
    version: Annotated[str, Field(min_length=1, max_length=100, pattern=PRINTABLE)] | int | None = (
        None
    )
    public: bool | None = None
    canary: Annotated[str, Field(min_length=1, max_length=100, pattern=PRINTABLE)] | int | None = (
        Field(default=None, description="serve this version to canary_percent of requests")
    )
    canary_percent: Annotated[float, Field(ge=0, le=100)] | None = None
    promote: bool = Field(default=False, description="the canary becomes the version served")
    rollback: bool = Field(default=False, description="the canary is removed")
    monitoring: MonitoringIn | None = None

    def canary_change(self) -> CanaryChange | None:
        given = self.canary is not None or self.canary_percent is not None
        if not (given or self.promote or self.rollback):
            return None
        ref = None if self.canary is None else str(self.canary)
        return CanaryChange(ref, self.canary_percent, self.promote, self.rollback)


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: Annotated[str, Field(min_length=1, max_length=100, pattern=PRINTABLE)] = "key"


def shown(view: dict[str, Any]) -> dict[str, Any]:
    return {**view, "created_at": iso(view["created_at"]), "updated_at": iso(view["updated_at"])}


@router.post("", status_code=201)
def create(body: DeploymentIn, loom: PlatformDep, user: UserDep, audit: AuditDep) -> dict[str, Any]:
    """Deploy a version (number, alias or `latest`) of one of your models."""
    scaling = Scaling(**body.scaling())
    view = loom.deployments.create(
        user.id,
        body.name,
        body.model,
        str(body.version),
        scaling,
        body.port,
        public=body.public,
        grpc_port=body.grpc_port,
        monitoring=Monitoring().changed(body.monitoring.given()) if body.monitoring else None,
        code=body.code(),
    )
    extra = {"runtime": body.runtime, "transformer": bool(body.transformer)}
    audit("deployment.create", body.name, model=body.model, version=str(body.version), **extra)
    return shown(view)


@router.get("")
def list_deployments(loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    return {"deployments": [shown(v) for v in loom.deployments.all(user.id)]}


@router.get("/{name}")
def show(name: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    return shown(loom.deployments.get(user.id, name))


@router.patch("/{name}")
def update(
    name: str, body: DeploymentPatch, loom: PlatformDep, user: UserDep, audit: AuditDep
) -> dict[str, Any]:
    """Change replicas, the concurrency target, batching, the model version (rolled out
    replica by replica, with no request dropped), or whether it is public."""
    changes = body.scaling()
    ref = None if body.version is None else str(body.version)
    canary = body.canary_change()
    monitoring = body.monitoring.given() if body.monitoring is not None else None
    view = loom.deployments.update(
        user.id, name, changes, ref, public=body.public, canary=canary, monitoring=monitoring
    )
    said = {} if canary is None else {"canary": _said(canary)}
    audit("deployment.update", name, version=ref, public=body.public, **changes, **said)
    return shown(view)


@router.delete("/{name}", status_code=204)
def delete(name: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    """Drain in-flight requests, stop the replicas and the endpoint."""
    loom.deployments.delete(user.id, name)
    audit("deployment.delete", name)


@router.post("/{name}/infer", response_model=None)
async def try_it(name: str, request: Request, loom: PlatformDep, user: UserDep) -> Response:
    """Send one V2 inference request (JSON) to your deployment and get its answer: the web
    UI's "try it". Call the deployment's own endpoint for anything more."""
    view = loom.deployments.get(user.id, name)
    body = await request.body()
    authorization = forwarded_authorization(request)
    status, answer = await anyio.to_thread.run_sync(
        try_request, view["endpoint"], name, body, authorization
    )
    return Response(answer, status, media_type="application/json")


@router.get("/{name}/metadata", response_model=None)
async def model_metadata(name: str, request: Request, loom: PlatformDep, user: UserDep) -> Response:
    """The served model's V2 metadata (name, platform, inputs, outputs), as its endpoint
    answers `GET /v2/models/{name}`."""
    view = loom.deployments.get(user.id, name)
    authorization = forwarded_authorization(request)
    status, answer = await anyio.to_thread.run_sync(metadata, view["endpoint"], name, authorization)
    return Response(answer, status, media_type="application/json")


@router.get("/{name}/stats")
async def deployment_stats(
    name: str, request: Request, loom: PlatformDep, user: UserDep
) -> dict[str, Any]:
    """The endpoint's counters now (from its `/metrics`): requests by status, the latency
    histogram, requests in flight and waiting; two readings give a rate and percentiles."""
    view = loom.deployments.get(user.id, name)
    authorization = forwarded_authorization(request)
    found: dict[str, Any] = await anyio.to_thread.run_sync(
        stats, view["endpoint"], name, authorization
    )
    return found


def _said(change: CanaryChange) -> str:
    if change.promote:
        return "promote"
    if change.rollback:
        return "rollback"
    return f"{change.ref or 'same'} at {change.percent if change.percent is not None else '-'}%"


def key_shown(key: dict[str, Any]) -> dict[str, Any]:
    return {**key, "created_at": iso(key["created_at"]), "last_used_at": iso(key["last_used_at"])}


@router.post("/{name}/keys", status_code=201)
def create_key(name: str, body: KeyIn, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """A key that calls the deployment's endpoint (`Authorization: Bearer <key>`); its value
    is shown this once."""
    return key_shown(loom.deployments.create_key(user.id, name, body.name))


@router.get("/{name}/keys")
def list_keys(name: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """The deployment's keys (never their values), with when each was last used."""
    return {"keys": [key_shown(k) for k in loom.deployments.keys(user.id, name)]}


@router.delete("/{name}/keys/{key_id}", status_code=204)
def revoke_key(name: str, key_id: str, loom: PlatformDep, user: UserDep) -> None:
    """The key stops working within seconds."""
    loom.deployments.revoke_key(user.id, name, key_id)
