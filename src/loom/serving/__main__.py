"""`python -m loom.serving PATH [--name N] [--port P | --uds SOCKET] [--grpc-port G]`: serve a
model file (or a model folder) over the V2 and V1 REST protocols and V2 gRPC, without the
platform; what `loom serve` runs, and what a deployment's gateway runs as a replica (on a unix
socket, REST only: the gateway translates gRPC)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from loom.serving import grpc_v2, grpc_wire
from loom.serving.accept import GreedyServer
from loom.serving.dataplane import DataPlane
from loom.serving.devices import DEVICES, NoDevice, describe
from loom.serving.explainers import CaptumExplainer, ExplainError
from loom.serving.formats import RUNTIME_NAMES
from loom.serving.kserve_model import KServeModel, LoadFailed
from loom.serving.rest import MAX_LINE, TOKEN_ENV, InferRoute, require_token, serving_app
from loom.serving.rest_wire import counting
from loom.serving.runtimes import choose, load


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loom serve")
    parser.add_argument("path", type=Path, help="model.onnx, model.pt, or a folder with one")
    parser.add_argument("--name", help="the model's name (default: the file's folder)")
    parser.add_argument("--version", default="1")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--uds", help="listen on this unix socket instead of a TCP port")
    parser.add_argument(
        "--grpc-port",
        default="",
        help="the V2 gRPC port (default: the HTTP port + 1; 'off': REST only; none with --uds)",
    )
    # a replica behind a deployment's proxy: gRPC on a unix socket of its own too
    parser.add_argument("--grpc-uds", help=argparse.SUPPRESS)
    parser.add_argument(
        "--runtime",
        choices=RUNTIME_NAMES,
        help="serve the folder with this runtime (default: the first of theirs that fits)",
    )
    parser.add_argument(
        "--explainer", choices=("captum",), help="answer :explain with the built-in explainer"
    )
    # a deployment's transformer: a kserve.Model whose preprocess and postprocess run here
    parser.add_argument("--role", choices=("predictor", "transformer"), default="predictor",
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=1, help="max samples per batch")
    parser.add_argument("--batch-wait-ms", type=float, default=0.0, help="max wait to fill a batch")
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="run the model on the CPU or the (first visible) GPU; auto: a GPU when there is one",
    )
    parser.add_argument(
        "--max-inflight",
        type=int,
        default=-1,
        help="inference requests run at once, the rest wait their turn in arrival order "
        "(default: 2, or the batch size when batching; 0: no line)",
    )
    parser.add_argument("--max-queue", type=int, default=MAX_LINE, help="requests waiting, at most")
    parser.add_argument(
        "--queue-timeout-s", type=float, default=30.0, help="a request's wait for its turn, at most"
    )
    # a gateway's replica: long keep-alives, and it ends with its parent (in a sandbox, the
    # parent is the sandbox's first process, which ends with the gateway)
    parser.add_argument("--behind-gateway", action="store_true", help=argparse.SUPPRESS)
    return parser


def _prepare(args: argparse.Namespace, path: Path, name: str) -> tuple[DataPlane, Any, str]:
    """The data plane with the model's runtime in it, or the handler (a `kserve.Model`) to
    load once the loop runs; and where the model runs, in words."""
    plane = DataPlane()
    try:
        transformer = args.role == "transformer"
        if transformer or (path.is_dir() and choose(path, args.runtime).kind == "kserve"):
            return plane, KServeModel(path, name, args.version, args.role), "its own code"
        runtime = load(path, args.device, args.runtime)
    except NoDevice as exc:
        raise SystemExit(f"cannot serve {name!r} on {args.device}: {exc}") from None
    except (LoadFailed, FileNotFoundError) as exc:
        raise SystemExit(f"cannot serve {name!r}: {exc}") from None
    plane.add(
        name, args.version, runtime, max_batch=args.batch_size, max_wait_ms=args.batch_wait_ms
    )
    if args.explainer:
        try:
            plane.models[name].explainer = CaptumExplainer(runtime)
        except (ExplainError, ImportError) as exc:
            raise SystemExit(f"cannot explain {name!r}: {exc}") from None
    return plane, None, describe(runtime.device)


def main() -> None:
    args = _parser().parse_args()
    if args.behind_gateway:
        threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    path = args.path.resolve()
    name = args.name or (path.name if path.is_dir() else path.parent.name) or "model"
    plane, handler, on = _prepare(args, path, name)
    grpc_port = _grpc_port(args.grpc_port, args.port, bool(args.uds))
    grpc_address = f"{args.host}:{grpc_port}" if grpc_port is not None else None
    if args.grpc_uds:
        grpc_address = f"unix:{args.grpc_uds}"
    where = f"unix socket {args.uds}" if args.uds else f"http://{args.host}:{args.port}/v2"
    if grpc_address is not None:
        where += f" and gRPC {grpc_address}"
    inflight = args.max_inflight if args.max_inflight >= 0 else max(2, args.batch_size)
    inflight = 0 if args.behind_gateway else inflight  # a gateway has its own line
    app, route = serving_app(plane, inflight, args.queue_timeout_s, args.max_queue)
    token = os.environ.pop(TOKEN_ENV, None)  # a replica on a cluster node: its gateway's
    fast: InferRoute | None = route
    if token:
        app, fast = require_token(app, token), None  # checked on ASGI, every route
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        uds=args.uds,
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        date_header=False,
        # behind a gateway, its pooled connections stay open
        timeout_keep_alive=3600 if args.behind_gateway else 5,
        http=counting(plane, fast),
    )
    what = f"serving {name!r} version {args.version} at {where} on {on}"
    served = _serve(GreedyServer(config), plane, grpc_address, handler, what)
    try:
        import uvloop
    except ImportError:
        asyncio.run(served)
    else:
        uvloop.run(served)


def _grpc_port(given: str, http_port: int, unix: bool) -> int | None:
    if given == "off" or (unix and not given):
        return None
    if not given:
        return http_port + 1 if http_port else 0
    if not given.isdigit() or int(given) > 65535:
        raise SystemExit(f"--grpc-port: a port number or 'off', got {given!r}")
    return int(given)


async def _serve(
    rest: uvicorn.Server,
    plane: DataPlane,
    grpc_address: str | None,
    handler: KServeModel | None,
    what: str,
) -> None:
    """REST (uvicorn) and gRPC on one event loop, over one data plane and its batcher; a
    handler's model is loaded on that loop first (the socket opens once it is ready)."""
    if handler is not None:
        try:
            await handler.load()
        except LoadFailed as exc:
            raise SystemExit(f"cannot serve {handler.name!r}: {exc}") from None
        plane.add_handler(handler)
    # What is loaded by now (the model, its runtime, the libraries) lives as long as the
    # server: out of the collector's reach, a full collection no longer walks it all. Under
    # load such collections were the tail: at 64 connections with batching on, p99 was
    # 18 ms against a p50 of 5; frozen, 6.4-7.8 ms against 4.9-5.1.
    gc.freeze()
    print(what, flush=True)
    server: grpc_wire.Server | None = None
    if grpc_address is not None:
        handlers = grpc_v2.wire_handlers(grpc_v2.PlaneBackend(plane))
        server = grpc_wire.Server(handlers, grpc_v2.MAX_MESSAGE, counter=plane)
        try:
            await server.listen(grpc_address)
        except OSError as exc:
            raise SystemExit(str(exc)) from None
    try:
        await rest.serve()
    finally:
        if server is not None:
            await server.stop(grace=1.0)


def _exit_with_parent(parent: int) -> None:
    """A replica does not outlive its gateway."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


if __name__ == "__main__":
    main()
