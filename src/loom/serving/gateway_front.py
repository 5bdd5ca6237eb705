"""How a deployment's gateway opens its endpoints (HAProxy's in front of its own, or its own)
and keeps the proxy in line with its replicas and rules, each tick."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from loom.serving import gateway_grpc, grpc_wire
from loom.serving.accept import Listener
from loom.serving.proxy import (
    GATEWAY_GRPC_SOCKET,
    GATEWAY_SOCKET,
    Proxy,
    ProxyFailed,
    unproxied,
)
from loom.serving.replicas import free_port

if TYPE_CHECKING:
    from loom.serving.gateway import Gateway

Endpoints = tuple[asyncio.Server | Listener, grpc_wire.Server | None]
LIMIT = 2**20  # bytes a request's line and headers may take


async def endpoints(gateway: Gateway) -> Endpoints:
    """The deployment's REST and gRPC endpoints: HAProxy's, in front of the gateway's own on
    unix sockets, where the proxy can take the deployment; else the gateway's."""
    why = unproxied(gateway.spec)
    if why is None:
        try:
            return await behind_proxy(gateway)
        except (ProxyFailed, OSError) as exc:
            why = f"the proxy is not used: {exc}"
            print(why, file=sys.stderr, flush=True)
    gateway.unproxied = why
    spec = gateway.spec = replace(gateway.spec, proxy="")
    # its own listener: every caller waiting is taken up at once (see loom.serving.accept)
    server = Listener(spec.host, spec.port, backlog=1024)

    def protocol() -> asyncio.Protocol:
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(limit=LIMIT), gateway.handle)

    server.start(protocol, gateway.tls)
    gateway.port = server.port
    grpc_server = None
    if spec.grpc_port is not None:
        grpc_server, gateway.grpc_port = await gateway_grpc.serve(gateway, gateway.grpc_tls)
    return server, grpc_server


async def behind_proxy(gateway: Gateway) -> Endpoints:
    spec = gateway.spec
    port = spec.port or free_port(spec.host)
    grpc_port = (spec.grpc_port or free_port(spec.host)) if spec.grpc_port is not None else None
    server = await asyncio.start_unix_server(gateway.handle, GATEWAY_SOCKET, limit=LIMIT)
    grpc_server = None
    if grpc_port is not None:
        address = f"unix:{GATEWAY_GRPC_SOCKET}"
        grpc_server, _ = await gateway_grpc.serve(gateway, None, address)
    front = Proxy(gateway, port, grpc_port)
    try:
        await front.start()
    except ProxyFailed:
        server.close()
        if grpc_server is not None:
            await grpc_server.stop(0)
        await front.stop(0)
        raise
    gateway.front, gateway.port, gateway.grpc_port = front, port, grpc_port
    return server, grpc_server


async def steer(gateway: Gateway) -> None:
    """The proxy in line with the replicas and rules; a proxy gone ends the gateway (the
    platform starts it again: the endpoint went with the proxy)."""
    front = gateway.front
    if front is None:
        return
    if not front.alive and not gateway.stopping.is_set():
        print("the proxy exited: stopping", file=sys.stderr, flush=True)
        gateway.stopping.set()
        return
    try:
        await front.sync()
    except ProxyFailed as exc:
        print(f"proxy not steered: {exc}", file=sys.stderr, flush=True)
