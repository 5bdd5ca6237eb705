"""What the API shows of a deployment: its row, and what its gateway last said."""

from __future__ import annotations

from typing import Any

from loom.serving.scaling import columns_of
from loom.store.tables import Deployment


def described(
    row: Deployment,
    status: dict[str, Any],
    state: str,
    message: str,
    endpoint: str,
    grpc_endpoint: str | None,
) -> dict[str, Any]:
    """A deployment (or a graph) as the API answers it."""
    replicas = status.get("replicas") or {
        "ready": 0,
        "starting": 0,
        "draining": 0,
        "desired": row.min_replicas,
    }
    graph = row.graph
    return {
        "name": row.name,
        "kind": "graph" if graph else "model",
        "model": row.model_name if not graph else None,
        "model_ref": row.model_ref if not graph else None,
        "model_version": row.model_version if not graph else None,
        "serving_version": status.get("model_version"),
        "canary": (
            {"version": row.canary_version, "percent": row.canary_percent}
            if row.canary_version is not None
            else None
        ),
        "requests_by_version": status.get("requests_by_version", {}),
        "state": state,
        "message": message,
        "endpoint": endpoint,
        "grpc_endpoint": grpc_endpoint,
        "urls": {
            "v2_infer": f"{endpoint}/v2/models/{row.name}/infer",
            "v1_predict": f"{endpoint}/v1/models/{row.name}:predict",
            "metrics": f"{endpoint}/metrics",
        },
        "replicas": replicas,
        "replica_list": status.get("replica_list", []),
        **columns_of(row),
        "public": row.public,
        "runtime": row.runtime,
        "pip": row.pip or [],
        "explainer": row.explainer,
        "transformer": bool(row.transformer),
        "graph": {"nodes": graph["nodes"], "ignored": graph.get("ignored", [])} if graph else None,
        "requests": status.get("requests", 0),
        "restarts": status.get("restarts", 0),
        "last_cold_start_s": status.get("last_cold_start_s"),
        "data_path": status.get("data_path"),  # haproxy, or the gateway alone (and why)
        "unproxied": status.get("unproxied"),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }
