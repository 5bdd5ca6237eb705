"""A deployment gateway's metrics in Prometheus' text format: its own (requests by status and by
model version, latency, in flight, in line, replicas, restarts, cold starts), then each ready
replica's (batches, batch sizes), labelled with the replica."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from loom.serving.exposition import histogram, relabelled, render
from loom.serving.http1 import Message
from loom.serving.replicas import ReplicaGone

if TYPE_CHECKING:
    from loom.serving.gateway import Gateway


async def prometheus(gateway: Gateway) -> bytes:
    """The deployment's own metrics, then its ready replicas' (labelled with the replica)."""
    name = gateway.spec.name
    if gateway.front is not None:  # HAProxy's log lines not yet counted
        gateway.front.read_log()
    requests = CounterMetricFamily(
        "loom_deployment_requests",
        "Requests the deployment answered, by status code",
        labels=["deployment", "code"],
    )
    for code, count in sorted(gateway.requests.items()):
        requests.add_metric([name, str(code)], count)
    versions = CounterMetricFamily(
        "loom_deployment_version_requests",
        "Requests a replica answered, by the model version it serves and status code",
        labels=["deployment", "version", "code"],
    )
    for (version, code), count in sorted(gateway.by_version.items()):
        versions.add_metric([name, version, str(code)], count)
    latency = histogram(
        "loom_deployment_request_duration_seconds",
        "Time from a request's arrival to its answer",
        ["deployment"],
        [([name], gateway.latency)],
    )
    replicas = GaugeMetricFamily(
        "loom_deployment_replicas", "Replicas by state", labels=["deployment", "state"]
    )
    status = gateway.status()
    for state in ("ready", "starting", "draining", "desired"):
        replicas.add_metric([name, state], status["replicas"][state])
    last = gateway.cold_starts[-1] if gateway.cold_starts else 0.0
    inflight, waiting = gateway.load()
    own = [
        requests,
        versions,
        latency,
        _gauge("loom_deployment_inflight_requests", "Requests in flight", name, inflight),
        _gauge(
            "loom_deployment_waiting_requests", "Requests in line for a free replica", name, waiting
        ),
        replicas,
        _counter("loom_deployment_replica_restarts", "Replicas replaced", name, gateway.restarts),
        _gauge("loom_deployment_cold_start_seconds", "The last cold start", name, last),
    ]
    if gateway.monitor is not None:
        own.extend(gateway.monitor.families(name))
    if gateway.router is not None:  # a graph: each node's steps, timed
        steps = sorted(gateway.router.latency.items())
        own.append(histogram(
            "loom_graph_step_duration_seconds",
            "Time a graph's step took (its deployment's answer, or its node's)",
            ["deployment", "node", "step"],
            [([name, node, step], observed) for (node, step), observed in steps],
        ))  # fmt: skip
    return render(own + relabelled(await _replica_metrics(gateway, name)))


def by_version(gateway: Gateway) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (version, _code), count in gateway.by_version.items():
        counts[version] = counts.get(version, 0) + count
    return counts


async def _replica_metrics(gateway: Gateway, name: str) -> list[tuple[str, dict[str, str]]]:
    """Each ready replica's own metrics (batches, batch sizes), with the labels to add."""
    probe = Message([b"GET", b"/metrics"], [(b"host", b"replica")])
    out = []
    for replica in [r for r in gateway.replicas if r.state == "ready"]:
        with contextlib.suppress(ReplicaGone):
            response = await replica.exchange(probe, count=False)
            text = response.body.decode("utf-8", "replace")
            out.append((text, {"deployment": name, "replica": str(replica.id)}))
    return out


def _gauge(name: str, documentation: str, deployment: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["deployment"])
    family.add_metric([deployment], value)
    return family


def _counter(name: str, documentation: str, deployment: str, value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=["deployment"])
    family.add_metric([deployment], value)
    return family


def status(gateway: Gateway) -> dict[str, Any]:
    """What the gateway tells the platform (`status.json`)."""
    counts = {state: 0 for state in ("ready", "starting", "draining")}
    for replica in gateway.replicas:
        if replica.state in counts:
            counts[replica.state] += 1
    active = counts["ready"] + counts["starting"]
    if gateway.stopping.is_set():
        state = "stopped" if not gateway.replicas else "stopping"
    elif gateway.serving():
        state = "ready"
    elif gateway.failures:
        state = "failing"
    elif counts["starting"]:
        state = "starting"
    else:
        state = "scaled to zero" if active == 0 and gateway.spec.min_replicas == 0 else "pending"
    return {
        "state": state,
        "pid": os.getpid(),
        "endpoint": f"{'https' if gateway.tls else 'http'}://{gateway.spec.host}:{gateway.port}",
        "grpc_port": gateway.grpc_port,
        "model_version": gateway.spec.model_version,
        "canary": (
            {"version": gateway.spec.canary_version, "percent": gateway.spec.canary_percent}
            if gateway.spec.canary_model_dir
            else None
        ),
        "requests_by_version": by_version(gateway),
        "replicas": {**counts, "desired": gateway.desired},
        "replica_list": [
            {"id": r.id, "pid": r.pid, "state": r.state, "version": r.version, "gpus": r.gpus}
            for r in sorted(gateway.replicas, key=lambda r: r.id)
        ],
        "keys_used": dict(gateway.access.used),
        "inflight": gateway.load()[0],
        "waiting": gateway.load()[1],
        "requests": sum(gateway.requests.values()),
        "restarts": gateway.restarts,
        "cold_starts": len(gateway.cold_starts),
        "last_cold_start_s": round(gateway.cold_starts[-1], 3) if gateway.cold_starts else None,
        "message": gateway.message,
        # what answers its requests: HAProxy (with the gateway behind it) or the gateway alone
        "data_path": "haproxy" if gateway.front is not None else "gateway",
        "unproxied": gateway.unproxied or None,
    }
