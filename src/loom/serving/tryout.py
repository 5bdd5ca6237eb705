"""One inference request sent to a deployment on its owner's behalf: what the web UI's "try it"
form does, since a page may reach only the platform's own origin, not the deployment's port;
and the deployment's metadata and counters, read the same way.

The request goes to the deployment's gateway on this machine with the caller's own
`Authorization`, so the gateway decides as it would for the caller; its answer comes back as
it is (status and JSON), errors included.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from loom.domain.errors import PlatformError

MAX_ANSWER = 16 * 2**20
TIMEOUT_S = 30.0


def try_request(endpoint: str, model: str, body: bytes, authorization: str) -> tuple[int, bytes]:
    """(status, JSON body) of `POST {endpoint}/v2/models/{model}/infer`."""
    return _call("POST", endpoint, f"/v2/models/{model}/infer", authorization, body)


def metadata(endpoint: str, model: str, authorization: str) -> tuple[int, bytes]:
    """(status, JSON body) of `GET {endpoint}/v2/models/{model}`: its inputs and outputs."""
    return _call("GET", endpoint, f"/v2/models/{model}", authorization)


def _call(
    method: str,
    endpoint: str,
    path: str,
    authorization: str,
    body: bytes = b"",
    accept: str = "json",
) -> tuple[int, bytes]:
    url = endpoint.replace("://0.0.0.0:", "://127.0.0.1:") + path
    headers = {"authorization": authorization, "content-type": "application/json"}
    try:
        # The platform's own gateway on this machine: with HTTPS its certificate is the
        # platform's, which need not name the loopback address it is reached on here.
        with httpx.Client(verify=False, timeout=TIMEOUT_S) as client:
            response = client.request(method, url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise PlatformError(f"the deployment did not answer: {type(exc).__name__}") from exc
    if len(response.content) > MAX_ANSWER:
        raise PlatformError(f"the deployment's answer is larger than {MAX_ANSWER >> 20} MiB")
    if accept not in response.headers.get("content-type", ""):
        raise PlatformError(f"the deployment's answer is not {accept} (a binary tensor answer?)")
    return response.status_code, response.content


def stats(endpoint: str, model: str, authorization: str) -> dict[str, Any]:
    """The deployment's counters from its endpoint's `/metrics`, as JSON: requests by status,
    the latency histogram (cumulative buckets), requests in flight and waiting. A page turns
    two readings into a request rate and latency percentiles."""
    status, text = _call("GET", endpoint, "/metrics", authorization, accept="text/plain")
    if status != 200:
        raise PlatformError(f"the deployment's metrics answered {status}")
    found: dict[str, Any] = {"requests": {}, "buckets": [], "sum": 0.0, "count": 0}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            _take(found, sample.name, sample.labels, sample.value)
    return {"at": time.time(), **found}


def _take(found: dict[str, Any], name: str, labels: dict[str, str], value: float) -> None:
    if name == "loom_deployment_requests_total":
        found["requests"][labels.get("code", "")] = int(value)
    elif name == "loom_deployment_request_duration_seconds_bucket":
        found["buckets"].append([labels.get("le", "+Inf"), int(value)])
    elif name == "loom_deployment_request_duration_seconds_sum":
        found["sum"] = value
    elif name == "loom_deployment_request_duration_seconds_count":
        found["count"] = int(value)
    elif name == "loom_deployment_inflight_requests":
        found["inflight"] = int(value)
    elif name == "loom_deployment_waiting_requests":
        found["waiting"] = int(value)
