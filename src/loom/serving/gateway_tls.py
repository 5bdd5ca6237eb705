"""A gateway's certificate: HTTPS on its REST port, TLS on its gRPC port (both reloaded
with the spec, so a renewed certificate is used without a restart)."""

from __future__ import annotations

import ssl

from loom.serving.spec import DeploymentSpec


def tls_context(spec: DeploymentSpec) -> ssl.SSLContext | None:
    if not spec.certfile:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(spec.certfile, spec.keyfile or None)
    return context


def grpc_tls_context(spec: DeploymentSpec) -> ssl.SSLContext | None:
    """The same certificate for the gRPC port, offering HTTP/2 by ALPN (gRPC's clients
    refuse a server that does not)."""
    context = tls_context(spec)
    if context is not None:
        context.set_alpn_protocols(["h2"])
    return context
