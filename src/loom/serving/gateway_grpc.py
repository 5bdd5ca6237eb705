"""A deployment's gRPC endpoint: the V2 gRPC service on the gateway's second port, each call
translated to the REST request its replicas already serve and sent through the gateway's own
path (`Gateway.relay`): the same balancing, retry on a lost replica, scale from zero, draining,
counters and request log as a REST call; the same tokens, from the `authorization` metadata."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from loom.serving import grpc_v2, grpc_wire
from loom.serving.dataplane import InferenceError
from loom.serving.http1 import Message
from loom.serving.rest import parse

if TYPE_CHECKING:
    from loom.serving.gateway import Gateway

HOST = (b"host", b"gateway")


class GatewayBackend:
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def ready(self) -> bool:
        replicas = self.gateway.replicas
        return any(r.state == "ready" for r in replicas) or self.gateway.spec.min_replicas == 0

    async def model_ready(self, name: str, version: str | None) -> bool:
        answer = await self._get(_model_path(name, version) + "/ready")
        return bool(answer.get("ready"))

    async def server_metadata(self) -> dict[str, Any]:
        return await self._get("/v2")

    async def model_metadata(self, name: str, version: str | None) -> dict[str, Any]:
        return await self._get(_model_path(name, version))

    async def infer(
        self, name: str, version: str | None, body: dict[str, Any], binary: bytes
    ) -> tuple[dict[str, Any], bytes]:
        header = orjson.dumps(body)
        request = Message(
            [b"POST", (_model_path(name, version) + "/infer").encode()],
            [
                HOST,
                (b"content-type", b"application/octet-stream"),
                (b"inference-header-content-length", b"%d" % len(header)),
            ],
            header + binary,
        )
        response = _checked(await self.gateway.relay(request))
        found = response.header(b"inference-header-content-length")
        answer, section = parse(response.body, found.decode() if found is not None else None)
        if not isinstance(answer, dict):
            raise InferenceError("the replica's answer is not a V2 response", 502)
        return answer, section

    async def _get(self, path: str) -> dict[str, Any]:
        response = _checked(await self.gateway.relay(Message([b"GET", path.encode()], [HOST])))
        answer = orjson.loads(response.body)
        if not isinstance(answer, dict):
            raise InferenceError(f"the replica's answer to {path} is not an object", 502)
        return answer


def _model_path(name: str, version: str | None) -> str:
    path = f"/v2/models/{quote(name, safe='')}"
    return path if version is None else f"{path}/versions/{quote(version, safe='')}"


def _checked(response: Message) -> Message:
    """A replica's (or the gateway's) error response as the InferenceError it stands for."""
    if response.status == 200:
        return response
    try:
        message = str(orjson.loads(response.body).get("error", ""))
    except (orjson.JSONDecodeError, AttributeError):
        message = response.body[:200].decode("utf-8", "replace")
    raise InferenceError(message or f"status {response.status}", response.status)


async def serve(
    gateway: Gateway, tls: ssl.SSLContext | None, address: str | None = None
) -> tuple[grpc_wire.Server, int]:
    """The gateway's gRPC server, listening on its spec's host and gRPC port, or on `address`
    (a unix socket behind the proxy); with `tls`, over TLS. Returns the server and the port
    it got (0 on a unix socket). OSError when it cannot listen."""

    def refusal(given: str | None) -> str | None:
        refused = gateway.access.refusal(given.encode() if given is not None else None)
        if refused is not None:
            gateway.requests[401] = gateway.requests.get(401, 0) + 1
        return refused

    handlers = grpc_v2.wire_handlers(GatewayBackend(gateway), refusal)
    server = grpc_wire.Server(handlers, grpc_v2.MAX_MESSAGE)
    spec = gateway.spec
    await server.listen(address or f"{spec.host}:{spec.grpc_port or 0}", tls)
    return server, server.port or 0
