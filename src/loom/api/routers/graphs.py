"""`/v1/graphs`: inference graphs of one's deployments, declared as KServe's InferenceGraph
(its spec, or the whole object), each served at an endpoint of its own. A graph is shown,
changed and deleted as a deployment (`/v1/deployments/{name}`), its `kind` "graph"."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from loom.api.audit import AuditDep
from loom.api.auth import PlatformDep, UserDep
from loom.api.routers.deployments import DeploymentName, shown
from loom.serving.graph_deployments import create_graph

router = APIRouter(prefix="/v1/graphs", tags=["deployments"])


class GraphIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: DeploymentName
    graph: dict[str, Any] = Field(
        description="an InferenceGraph's spec ({nodes: {root: {routerType, steps}}}) or the "
        "whole InferenceGraph object"
    )
    port: Annotated[int, Field(ge=1024, le=65535)] | None = None
    grpc_port: Annotated[int, Field(ge=1024, le=65535)] | None = None
    public: bool = Field(default=False, description="answer without a token")


@router.post("", status_code=201)
def create(body: GraphIn, loom: PlatformDep, user: UserDep, audit: AuditDep) -> dict[str, Any]:
    """A graph of your deployments (Sequence, Switch, Ensemble, Splitter nodes) at one
    endpoint: `POST /` or `/v1/models/{name}:predict`, and `/v2/models/{name}/infer`."""
    view = create_graph(
        loom.deployments,
        user.id,
        body.name,
        body.graph,
        body.port,
        public=body.public,
        grpc_port=body.grpc_port,
    )
    audit("graph.create", body.name, steps=sorted(view["graph"]["nodes"]))
    return shown(view)
