"""`loom server`: runs the embedded platform in this process's place.

It execs `python -m loom.api` rather than importing it: the CLI reaches the platform only over
HTTP, and the server is a different program that happens to share the package.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer


def server(
    host: Annotated[str | None, typer.Option(help="address to listen on")] = None,
    port: Annotated[int | None, typer.Option(help="port; 0 picks a free one")] = None,
    certfile: Annotated[
        str | None, typer.Option(help="PEM certificate: serve the API and deployments over HTTPS")
    ] = None,
    keyfile: Annotated[str | None, typer.Option(help="PEM private key of --certfile")] = None,
    launcher: Annotated[
        str | None, typer.Option(help="where learners run: local (default), ray or kubernetes")
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="with --launcher ray: auto, or the head's HOST:PORT")
    ] = None,
) -> None:
    """Start the embedded platform: API and lifecycle, state under LOOM_HOME."""
    argv = [sys.executable, "-m", "loom.api"]
    given = {
        "--host": host,
        "--port": port,
        "--certfile": certfile,
        "--keyfile": keyfile,
        "--launcher": launcher,
        "--ray-address": ray_address,
    }
    for option, value in given.items():
        if value is not None:
            argv += [option, str(value)]
    sys.stdout.flush()
    os.execv(sys.executable, argv)


def serve(
    path: Annotated[str, typer.Argument(help="model.onnx, model.pt, or a folder with one")],
    name: Annotated[str | None, typer.Option(help="the model's name")] = None,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 8080,
    grpc_port: Annotated[str, typer.Option(help="V2 gRPC port (default: PORT + 1), or 'off'")] = "",
    batch_size: Annotated[int, typer.Option(help="max samples per batch; 1: no batching")] = 1,
    batch_wait_ms: Annotated[float, typer.Option(help="max wait for a batch to fill")] = 0.0,
    device: Annotated[
        str, typer.Option(help="auto (a GPU when there is one), cpu, or cuda (the first GPU)")
    ] = "auto",
) -> None:
    """Serve a model file over the V2 (Open Inference) and V1 protocols, REST and gRPC, without
    the platform."""
    argv = [sys.executable, "-m", "loom.serving", path, "--host", host, "--port", str(port)]
    if grpc_port:
        argv += ["--grpc-port", grpc_port]
    argv += ["--batch-size", str(batch_size), "--batch-wait-ms", str(batch_wait_ms)]
    argv += ["--device", device]
    if name:
        argv += ["--name", name]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
