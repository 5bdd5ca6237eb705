"""An inference graph's router, in its gateway: runs a request through the graph's nodes as
KServe's router does (read from its `cmd/router`), calling the steps' deployments through
their gateways, and times every step (the graph's `/metrics`).

- Sequence: the steps in order, each given the graph's request (`data: $request`, the default)
  or the step before's answer (`$response`); a step whose condition does not hold on the answer
  so far ends the sequence with that answer; a Hard step that fails ends it with its failure.
- Switch: the first step whose condition holds on the request; none: 404.
- Ensemble: every step at once; the answer is an object of their answers by step name, unless
  a Hard step fails, whose failure is the answer.
- Splitter: one step, drawn by the steps' weights.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from loom.serving import gjson
from loom.serving.graphs import ROOT, Graph, Step
from loom.serving.observe import Histogram

# (deployment, body) → (status, answer body): a call of one deployment through its gateway
Call = Callable[[str, bytes], Awaitable[tuple[int, bytes]]]


class GraphRouter:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.latency: dict[tuple[str, str], Histogram] = {}

    async def run(self, body: bytes, call: Call) -> tuple[int, bytes]:
        """The graph's answer to a request body (JSON), its steps' deployments reached by
        `call`."""
        try:
            orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return 400, _error(f"the body is not valid JSON: {exc}")
        return await _Run(self, call).node(ROOT, body)


class _Run:
    """One request's way through the graph."""

    def __init__(self, router: GraphRouter, call: Call) -> None:
        self.graph, self.latency, self.call = router.graph, router.latency, call

    async def node(self, name: str, body: bytes) -> tuple[int, bytes]:
        node = self.graph.nodes[name]
        if node.router == "Sequence":
            return await self._sequence(name, node.steps, body)
        if node.router == "Switch":
            document = _json(body)
            chosen = next(
                (s for s in node.steps if s.condition and gjson.exists(document, s.condition)), None
            )
            if chosen is None:
                return 404, _error("none of the routes matched with the switch condition")
            return await self.step(name, chosen, body)
        if node.router == "Ensemble":
            return await self._ensemble(name, node.steps, body)
        return await self.step(name, _drawn(node.steps), body)

    async def step(self, node: str, step: Step, body: bytes) -> tuple[int, bytes]:
        started = time.perf_counter()
        try:
            if step.node is not None:
                return await self.node(step.node, body)
            assert step.deployment is not None
            return await self.call(step.deployment, body)
        finally:
            key = (node, step.name)
            self.latency.setdefault(key, Histogram()).observe(time.perf_counter() - started)

    async def _sequence(self, name: str, steps: list[Step], body: bytes) -> tuple[int, bytes]:
        status, answer = 200, b""
        for index, step in enumerate(steps):
            given = answer if step.data == "$response" and index > 0 else body
            if step.map_predictions:
                given = _predictions_as_instances(given)
            held = (
                step.condition is None or index == 0 or gjson.exists(_json(answer), step.condition)
            )
            if not held:
                return status, answer  # the condition does not hold: the answer so far
            status, answer = await self.step(name, step, given)
            if step.hard and not 200 <= status < 300:
                return status, answer
        return status, answer

    async def _ensemble(self, name: str, steps: list[Step], body: bytes) -> tuple[int, bytes]:
        answers = await asyncio.gather(*(self.step(name, s, body) for s in steps))
        combined: dict[str, Any] = {}
        for step, (status, answer) in zip(steps, answers, strict=True):
            if step.hard and not 200 <= status < 300:
                return status, answer
            combined[step.name] = _json(answer)
        return 200, orjson.dumps(combined)


def _drawn(steps: list[Step]) -> Step:
    point = random.randrange(100)
    end = 0
    for step in steps:
        end += step.weight or 0
        if point < end:
            return step
    return steps[-1]


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")


def _predictions_as_instances(body: bytes) -> bytes:
    """KServe's mapPredictionsToInstances: a V1 answer as the next step's V1 request."""
    found = _json(body)
    if isinstance(found, dict) and found.get("predictions"):
        rest = {k: v for k, v in found.items() if k != "predictions"}
        return orjson.dumps({**rest, "instances": found["predictions"]})
    return body


def _error(message: str) -> bytes:
    return orjson.dumps({"error": message})
