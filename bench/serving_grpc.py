"""The V2 protocol over gRPC: Loom's model server, a Loom deployment (gateway + 1 replica, its
token checked) and Seldon MLServer (in the server process, parallel_workers=0, its best
configuration in bench/serving.py), each serving the digits CNN, each under the same load from
bench/grpc_load.py (1, 16 and 64 calls in flight; 1 and 64 samples per call, sent as
`raw_input_contents` as Triton's client sends them). The servers run on core 0 and the load
generator on core 1 (`taskset`), unless --no-pin. The REST side is bench/serving.py (wrk).

    python bench/serving_grpc.py [--duration 5] [--concurrency 1,16,64] [--skip-mlserver]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mlserver_peer
from mlflow_peer import free_port, stop
from peers import table

from loom.serving.v2_proto import messages
from serving import NAME, TOKEN, Pinning, digits_model, input_name, test_images

HERE = Path(__file__).resolve().parent
SIZES = (1, 64)


@dataclass
class Target:
    system: str
    launch: Callable[[Path, int, int], list[str]]  # (folder, http port, grpc port) → command
    token: str = ""


def loom_direct(model: Path) -> Target:
    def launch(_folder: Path, http: int, grpc_port: int) -> list[str]:
        return [sys.executable, "-m", "loom.serving", str(model / "model.onnx"), "--name", NAME,
                "--port", str(http), "--grpc-port", str(grpc_port)]  # fmt: skip

    return Target("Loom (direct)", launch)


def loom_deployment(model: Path) -> Target:
    from loom.domain.accounts import hash_token
    from loom.serving.access import ACCESS, render
    from loom.serving.spec import DeploymentSpec
    from loom.store.private import write_private

    def launch(folder: Path, http: int, grpc_port: int) -> list[str]:
        DeploymentSpec(
            name=NAME, model_dir=str(model), model_version="1", port=http, grpc_port=grpc_port
        ).write(folder)
        write_private(folder / ACCESS, render(False, {hash_token(TOKEN): "token"}))
        return [sys.executable, "-m", "loom.serving.gateway", str(folder)]

    return Target("Loom deployment (gateway + 1)", launch, TOKEN)


def mlserver(model: Path) -> Target:
    def launch(folder: Path, http: int, grpc_port: int) -> list[str]:
        repository = folder / "repository"
        ports = mlserver_peer.Ports(http, grpc_port)
        mlserver_peer.write_repository(
            repository, model / "model.onnx", NAME, ports, workers=0, batch=None
        )
        return mlserver_peer.command(repository)

    return Target(f"MLServer {mlserver_peer.VERSION} workers=0", launch)


def requests_file(folder: Path, name: str, images: np.ndarray[Any, Any], size: int) -> Path:
    """64 different ModelInferRequests of `size` images each, serialized, length-prefixed."""
    kinds = messages()
    out = bytearray()
    for i in range(64):
        pick = np.take(images, range(i * size, (i + 1) * size), axis=0, mode="wrap")
        request = kinds["ModelInferRequest"](model_name=NAME)
        request.inputs.add(name=name, datatype="FP32", shape=list(pick.shape))
        request.raw_input_contents.append(np.ascontiguousarray(pick, dtype="<f4").tobytes())
        data = request.SerializeToString()
        out += len(data).to_bytes(4, "little") + data
    path = folder / f"requests-{size}.bin"
    path.write_bytes(bytes(out))
    return path


def wait_ready(http: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited:\n{log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the server was not ready in 120 s")


def load(
    pin: Pinning, address: str, file: Path, connections: int, seconds: float, token: str
) -> dict[str, float]:
    command = [*pin.prefix(pin.load), sys.executable, str(HERE / "grpc_load.py"), address,
               str(file), str(connections), str(seconds), token]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(
    target: Target, pin: Pinning, files: dict[int, Path], levels: list[int], seconds: float
) -> list[list[str]]:
    folder = Path(tempfile.mkdtemp(prefix="loom-bench-grpc-"))
    http, grpc_port = free_port(), free_port()
    log = folder / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*pin.prefix(pin.server), *target.launch(folder, http, grpc_port)],
            cwd=folder, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    rows = []
    try:
        wait_ready(http, process, log)
        for size in SIZES:
            for connections in levels:
                found = load(pin, f"127.0.0.1:{grpc_port}", files[size], connections, seconds,
                             target.token)  # fmt: skip
                print(f"  {target.system}: {size} sample(s), {connections} in flight: {found}",
                      file=sys.stderr, flush=True)  # fmt: skip
                rows.append([
                    target.system, str(size), str(connections), f"{found['rps']:,.0f}",
                    f"{found['rps'] * size:,.0f}", f"{found['p50_ms']:.2f}",
                    f"{found['p99_ms']:.2f}", f"{found['p99_ms'] / found['p50_ms']:.1f}",
                    str(int(found["errors"])),
                ])  # fmt: skip
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--skip-mlserver", action="store_true")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    pinned = not args.no_pin and (os.cpu_count() or 1) >= 2 and shutil.which("taskset")
    pin = Pinning("0", "1") if pinned else Pinning(None, None)
    model = digits_model()
    images = test_images()
    name = input_name(model, images)
    levels = [int(x) for x in args.concurrency.split(",")]
    work = Path(tempfile.mkdtemp(prefix="loom-bench-grpc-requests-"))
    files = {size: requests_file(work, name, images, size) for size in SIZES}
    targets = [loom_direct(model), loom_deployment(model)]
    if not args.skip_mlserver:
        targets.append(mlserver(model))
    rows = []
    for target in targets:
        rows += measure(target, pin, files, levels, args.duration)
    shutil.rmtree(work, ignore_errors=True)
    header = ["server", "samples", "in flight", "calls/s", "samples/s", "p50 ms", "p99 ms",
              "p99/p50", "errors"]  # fmt: skip
    where = "servers on core 0, load on core 1" if pinned else "unpinned"
    print(
        table(f"V2 gRPC ModelInfer, digits CNN, {args.duration:g} s each ({where})", header, rows)
    )


if __name__ == "__main__":
    main()
