"""A gateway's certificate: HTTPS on its REST port, TLS on its gRPC port."""

from __future__ import annotations

import ssl
from pathlib import Path

from loom.serving.spec import DeploymentSpec


def tls_context(spec: DeploymentSpec) -> ssl.SSLContext | None:
    if not spec.certfile:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(spec.certfile, spec.keyfile or None)
    return context


def certificate(spec: DeploymentSpec) -> tuple[bytes, bytes] | None:
    """(key, certificate chain) for gRPC over TLS; read once (a renewed certificate reaches
    the gRPC port when the gateway restarts)."""
    if not spec.certfile:
        return None
    chain = Path(spec.certfile).read_bytes()
    key = Path(spec.keyfile).read_bytes() if spec.keyfile else chain
    return key, chain
