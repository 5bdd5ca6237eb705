"""One inference request sent to a deployment on its owner's behalf: what the web UI's "try it"
form does, since a page may reach only the platform's own origin, not the deployment's port.

The request goes to the deployment's gateway on this machine with the caller's own
`Authorization`, so the gateway decides as it would for the caller; its answer comes back as
it is (status and JSON), errors included.
"""

from __future__ import annotations

import httpx

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
    method: str, endpoint: str, path: str, authorization: str, body: bytes = b""
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
    if "json" not in response.headers.get("content-type", ""):
        raise PlatformError("the deployment's answer is not JSON (a binary tensor answer?)")
    return response.status_code, response.content
