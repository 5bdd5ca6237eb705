"""What a deployment's gateway is told (`spec.json`) and what it tells back (`status.json`),
both in the deployment's folder; the platform writes the one and reads the other, so that
deployments go on serving while the platform restarts."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SPEC = "spec.json"
STATUS = "status.json"
PID = "gateway.pid"
SOCKETS = "run"  # the replicas' unix sockets, a folder only the gateway's user can enter
_PATH = re.compile(r"(?:/[\w.@+~-]+)+/([\w.@+~-]+)")


@dataclass(frozen=True)
class Tls:
    """The certificate chain and key a gateway serves HTTPS with."""

    certfile: str
    keyfile: str


@dataclass(frozen=True)
class DeploymentSpec:
    name: str
    model_dir: str
    model_version: str
    host: str = "127.0.0.1"
    port: int = 0
    # a canary: another version's folder and version, taking this share of requests
    canary_model_dir: str = ""
    canary_version: str = ""
    canary_percent: float = 0.0
    grpc_port: int | None = None  # the V2 gRPC endpoint's port (0: any); None: REST only
    min_replicas: int = 1
    max_replicas: int = 1
    target_concurrency: float = 8.0
    scale_down_delay_s: float = 30.0
    batch_size: int = 1
    batch_wait_ms: float = 0.0
    request_log: bool = False
    gpus_per_replica: int = 0  # each replica pinned to this many GPUs, its model run on them
    gpu_ids: list[int] = field(default_factory=list)  # the GPUs replicas may be pinned to
    certfile: str = ""  # with keyfile: serve HTTPS
    keyfile: str = ""
    ready_timeout_s: float = 120.0
    # fair admission: requests at once per replica (0: 2 × target_concurrency), then one
    # line at the gateway, refused with 503 past this wait or length
    max_inflight_per_replica: int = 0
    queue_timeout_s: float = 5.0
    max_queue: int = 1000
    drain_timeout_s: float = 30.0
    sandbox: dict[str, Any] | None = None  # how replicas are confined; None: they are not
    ray_address: str = ""  # replicas on this Ray cluster's nodes; "": processes here
    ray_namespace: str = "loom"
    # drift, outliers and payloads (`monitoring.Monitoring`, the API's shape); None: off
    monitoring: dict[str, Any] | None = None
    monitor_environment: dict[str, Any] | None = None  # the detector's, built by the gateway
    monitor_python: str = ""  # or an interpreter that has the detector's packages
    monitor_start_timeout_s: float = 900.0  # not ready by then: failing, started again
    monitor_cpu_budget: float = 0.02  # the detector's CPU on busy cores (0: no budget)
    # serving code: the runtime asked for, the built-in explainer, the transformer's folder,
    # and the environment (a builder's section) of each folder replicas serve that needs one
    runtime: str = ""
    explainer: str = ""
    transformer_dir: str = ""
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)
    # an inference graph (`graphs.Graph.json`) and its steps' deployments' folders, by name
    graph: dict[str, Any] | None = None
    graph_members: dict[str, str] = field(default_factory=dict)
    # the data path: "haproxy" (a compiled proxy in front of the replicas, steered by the
    # gateway; `proxy.unproxied` says when the gateway keeps serving itself) or "" (the gateway)
    proxy: str = ""
    proxy_cpus: list[int] = field(default_factory=list)  # the CPUs it runs on; none: any

    @property
    def per_replica(self) -> int:
        """Requests a ready replica takes at once (requests, not samples)."""
        return self.max_inflight_per_replica or 2 * math.ceil(self.target_concurrency)

    @classmethod
    def read(cls, folder: Path) -> DeploymentSpec:
        data = json.loads((folder / SPEC).read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def write(self, folder: Path) -> None:
        write_atomic(folder / SPEC, asdict(self))


def read_status(folder: Path) -> dict[str, Any] | None:
    try:
        found = json.loads((folder / STATUS).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(data, indent=1))
    os.replace(partial, path)


def write_pid(folder: Path, pid: int) -> None:
    """The gateway's pid file, replaced whole: written in place, a reader (the platform
    checking its gateway is alive) could find it empty and take the gateway for dead."""
    partial = folder / f"{PID}.partial"
    partial.write_text(str(pid))
    os.replace(partial, folder / PID)


def redact_paths(text: str) -> str:
    """`text` with each absolute path cut to its last part: a replica's log lines tell the
    owner what failed without telling anyone where the server keeps its files."""
    return _PATH.sub(r"…/\1", text)
