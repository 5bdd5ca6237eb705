"""A deployment gateway's metrics in Prometheus' text format: its own (requests by status and by
model version, latency, in flight, in line, replicas, restarts, cold starts), then each ready
replica's (batches, batch sizes), labelled with the replica."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from loom.serving.exposition import histogram, relabelled, render
from loom.serving.http1 import Message
from loom.serving.replicas import ReplicaGone

if TYPE_CHECKING:
    from loom.serving.gateway import Gateway


async def prometheus(gateway: Gateway) -> bytes:
    """The deployment's own metrics, then its ready replicas' (labelled with the replica)."""
    name = gateway.spec.name
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
    own = [
        requests,
        versions,
        latency,
        _gauge("loom_deployment_inflight_requests", "Requests in flight", name, gateway.inflight),
        _gauge(
            "loom_deployment_waiting_requests",
            "Requests in line for a free replica",
            name,
            gateway.admission.waiting,
        ),
        replicas,
        _counter("loom_deployment_replica_restarts", "Replicas replaced", name, gateway.restarts),
        _gauge("loom_deployment_cold_start_seconds", "The last cold start", name, last),
    ]
    if gateway.monitor is not None:
        own.extend(gateway.monitor.families(name))
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
