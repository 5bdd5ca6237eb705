"""Inference graphs, declared as KServe's InferenceGraph declares them (its `spec`, or the whole
object): nodes of steps, each node routing as a `Sequence`, a `Switch` (the first step whose
condition holds), an `Ensemble` (every step at once, the answers combined under the steps'
names) or a `Splitter` (one step, drawn by weight). A step calls a deployment of the same owner
(`serviceName`) or another node (`nodeName`).

Pure translation: the document is checked and made into `Graph`; what Loom cannot honour is
refused naming the field, and the spec's scaling and placement fields, which a graph's router
does not need here (it runs in its gateway), are reported as ignored with why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from loom.domain.errors import InvalidInput
from loom.serving import gjson

ROUTERS = ("Sequence", "Switch", "Ensemble", "Splitter")
ROOT = "root"
STEP_FIELDS = {"name", "nodeName", "serviceName", "serviceUrl", "data", "weight", "condition",
               "dependency", "mapPredictionsToInstances"}  # fmt: skip
IGNORED = {
    "resources": "the graph's router runs in its gateway, which takes no resources of its own",
    "affinity": "a graph's gateway runs on the platform's machine",
    "minReplicas": "a graph's gateway is one process; its steps' deployments scale themselves",
    "maxReplicas": "a graph's gateway is one process; its steps' deployments scale themselves",
    "scaleTarget": "a graph's gateway is one process; its steps' deployments scale themselves",
    "scaleMetric": "a graph's gateway is one process; its steps' deployments scale themselves",
    "timeout": "each step is bounded by its deployment's own queue timeout",
}


@dataclass(frozen=True)
class Step:
    name: str
    deployment: str | None = None
    node: str | None = None
    data: str = "$request"
    condition: str | None = None
    weight: int | None = None
    hard: bool = False
    map_predictions: bool = False


@dataclass(frozen=True)
class Node:
    router: str
    steps: list[Step]


@dataclass(frozen=True)
class Graph:
    nodes: dict[str, Node]
    ignored: list[dict[str, str]] = field(default_factory=list)

    def deployments(self) -> set[str]:
        return {s.deployment for n in self.nodes.values() for s in n.steps if s.deployment}

    def json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Graph:
        nodes = {
            name: Node(node["router"], [Step(**step) for step in node["steps"]])
            for name, node in data["nodes"].items()
        }
        return cls(nodes, list(data.get("ignored", [])))


def parse_graph(document: Any) -> Graph:
    """A graph from an InferenceGraph (or its `spec`), checked."""
    if not isinstance(document, dict):
        raise _bad("graph", "an InferenceGraph spec: an object with `nodes`")
    if "spec" in document and isinstance(document["spec"], dict):
        document = document["spec"]
    ignored = [
        {"field": f"spec.{key}", "why": why} for key, why in IGNORED.items() if key in document
    ]
    unknown = sorted(set(document) - {"nodes", *IGNORED})
    if unknown:
        raise _bad(f"spec.{unknown[0]}", "not a field of an InferenceGraph's spec")
    nodes = document.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise _bad("spec.nodes", "the graph's nodes, by name (one named root)")
    if ROOT not in nodes:
        raise _bad("spec.nodes", f"a node named {ROOT!r} is where requests start; there is none")
    graph = Graph({name: _node(str(name), body) for name, body in nodes.items()}, ignored)
    _check_references(graph)
    return graph


def _node(name: str, body: Any) -> Node:
    where = f"spec.nodes.{name}"
    if not isinstance(body, dict):
        raise _bad(where, "a node is an object with routerType and steps")
    unknown = sorted(set(body) - {"routerType", "steps"})
    if unknown:
        raise _bad(f"{where}.{unknown[0]}", "not a field of a node")
    router = body.get("routerType")
    if router not in ROUTERS:
        raise _bad(f"{where}.routerType", f"one of {', '.join(ROUTERS)}, got {router!r}")
    steps = body.get("steps")
    if not isinstance(steps, list) or not steps:
        raise _bad(f"{where}.steps", "a node has at least one step")
    made = [_step(f"{where}.steps[{i}]", i, s, router) for i, s in enumerate(steps)]
    if router == "Splitter" and sum(s.weight or 0 for s in made) != 100:
        raise _bad(f"{where}.steps", "a Splitter's weights add up to 100")
    names = [s.name for s in made]
    if len(set(names)) != len(names):
        raise _bad(f"{where}.steps", "each step's name is its own")
    return Node(router, made)


def _step(where: str, index: int, body: Any, router: str) -> Step:
    if not isinstance(body, dict):
        raise _bad(where, "a step is an object")
    unknown = sorted(set(body) - STEP_FIELDS)
    if unknown:
        raise _bad(f"{where}.{unknown[0]}", "not a field of a step")
    if "serviceUrl" in body:
        raise _bad(f"{where}.serviceUrl", "Loom calls deployments by name: use serviceName")
    target = [k for k in ("serviceName", "nodeName") if body.get(k)]
    if len(target) != 1:
        raise _bad(where, "a step names a deployment (serviceName) or a node (nodeName)")
    data = body.get("data", "$request")
    if data not in ("$request", "$response"):
        raise _bad(f"{where}.data", f"$request or $response, got {data!r}")
    condition = body.get("condition")
    if condition is not None:
        try:
            gjson.parse(str(condition))
        except gjson.BadCondition as exc:
            raise _bad(f"{where}.condition", str(exc)) from exc
    elif router == "Switch":
        raise _bad(f"{where}.condition", "each step of a Switch has a condition")
    weight = body.get("weight")
    if router == "Splitter" and (
        not isinstance(weight, int) or isinstance(weight, bool) or not 0 < weight <= 100
    ):
        raise _bad(f"{where}.weight", "a Splitter's step has a weight of 1 to 100")
    dependency = body.get("dependency", "Soft")
    if dependency not in ("Soft", "Hard"):
        raise _bad(f"{where}.dependency", f"Soft or Hard, got {dependency!r}")
    return Step(
        name=str(body.get("name") or index),
        deployment=body.get("serviceName"),
        node=body.get("nodeName"),
        data=data,
        condition=None if condition is None else str(condition),
        weight=weight if router == "Splitter" else None,
        hard=dependency == "Hard",
        map_predictions=bool(body.get("mapPredictionsToInstances", False)),
    )


def _check_references(graph: Graph) -> None:
    """Every nodeName names a node, and no node reaches itself."""
    for name, node in graph.nodes.items():
        for i, step in enumerate(node.steps):
            if step.node is not None and step.node not in graph.nodes:
                raise _bad(f"spec.nodes.{name}.steps[{i}].nodeName", f"no node {step.node!r}")

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise _bad(f"spec.nodes.{name}", f"a cycle: {' → '.join([*path, name])}")
        for step in graph.nodes[name].steps:
            if step.node is not None:
                visit(step.node, [*path, name])

    visit(ROOT, [])


def _bad(where: str, message: str) -> InvalidInput:
    return InvalidInput(f"graph: {where}: {message}", field=f"graph.{where}")
