"""Deployments' inference graphs, the platform's side: a graph is a deployment row with its
nodes and no model, made only of its owner's deployments, served by a gateway that routes
(`gateway_graph`, `graph_router`) and starts no replica. A deployment a graph calls cannot be
deleted before the graph."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.domain.errors import Conflict, InvalidInput
from loom.serving.graphs import Graph, parse_graph
from loom.serving.scaling import Scaling, columns
from loom.store.tables import Deployment

if TYPE_CHECKING:
    from loom.serving.deployments import Deployments


def create_graph(
    deployments: Deployments,
    owner: str,
    name: str,
    document: Any,
    port: int | None = None,
    *,
    public: bool = False,
    grpc_port: int | None = None,
) -> dict[str, Any]:
    """An inference graph (KServe's InferenceGraph spec) of the owner's deployments,
    served at an endpoint of its own; its gateway routes, it has no replicas."""
    graph = parse_graph(document)
    now = time.time()
    with deployments._lock:  # from the row to its gateway: see Deployments.create
        with deployments.db.session() as session:
            if session.scalars(
                select(Deployment).where(Deployment.owner_id == owner, Deployment.name == name)
            ).first():
                raise Conflict(f"a deployment named {name!r} exists; delete it or pick another")
            members(deployments, session, owner, graph, strict=True)
            row = Deployment(
                id=uuid.uuid4().hex, owner_id=owner, name=name, model_name="",
                model_ref="graph", model_version=0, port=deployments._port(session, port),
                created_at=now, updated_at=now, public=public, graph=graph.json(),
                **columns(Scaling(min_replicas=0).checked()),
            )  # fmt: skip
            session.add(row)
            session.flush()
            row.grpc_port = deployments._port(session, grpc_port, "grpc_port")
        from loom.serving.deployments import without_paths  # it imports this module

        with without_paths(f"graph {name!r} could not be started"):
            deployments._spawn(row)
    return deployments.view(row)


def members(
    deployments: Deployments, session: Session, owner: str, graph: Graph, *, strict: bool = False
) -> dict[str, str]:
    """The folders of the graph's deployments (the owner's own); with `strict`, one that
    is not there is refused, naming it."""
    wanted = graph.deployments()
    rows = session.scalars(
        select(Deployment).where(Deployment.owner_id == owner, Deployment.name.in_(wanted))
    )
    found = {r.name: str(deployments.folder(r)) for r in rows if not r.graph}
    missing = sorted(wanted - set(found))
    if strict and missing:
        raise InvalidInput(
            f"graph: serviceName {missing[0]!r}: you have no deployment of that name",
            field="graph",
        )
    return found


def refuse_if_a_step(deployments: Deployments, row: Deployment) -> None:
    """A deployment a graph calls stays until the graph goes."""
    with deployments.db.session() as session:
        graphs = session.scalars(
            select(Deployment).where(
                Deployment.owner_id == row.owner_id, Deployment.graph.is_not(None)
            )
        )
        users = sorted(
            g.name
            for g in graphs
            if row.name in Graph.from_json(g.graph or {"nodes": {}}).deployments()
        )
    if users:
        raise Conflict(
            f"deployment {row.name!r} is a step of graph {users[0]!r}: delete the graph first"
        )


def graph_members(deployments: Deployments, row: Deployment) -> dict[str, str]:
    if not row.graph:
        return {}
    with deployments.db.session() as session:
        return members(deployments, session, row.owner_id, Graph.from_json(row.graph))
