"""Model serving throughput and latency, REST and gRPC: Loom beside Seldon MLServer and in-process
ONNX Runtime.

The digits CNN (examples/digits-pytorch, trained once and cached in bench/.peers/digits-model)
is served over the V2 / Open Inference Protocol, `POST /v2/models/digits/infer`, by:
  - Loom, `python -m loom.serving` (one process; dynamic batching with --batch-size > 1);
  - MLServer 1.7.1 in its own venv, with a small ONNX Runtime runtime (see mlserver_peer.py),
    parallel_workers=0 (inference in the server process, as Loom) and its default of 1 (one
    inference worker process beside the server), adaptive batching off and on.
The Loom deployment is the gateway with one replica behind it on a unix socket, as the platform
runs one; every request carries a bearer token, which the gateway checks (a private deployment).
Each takes the same load from `wrk` (POST, real test images, one or 64 samples per request) at
each concurrency, with batching off and on. The ceiling is ONNX Runtime's own
`InferenceSession.run` in this process (one intra-op thread, as both servers use). Cold start
is the time from spawning a server to its first successful inference.

The same servers, batching off (MLServer with parallel_workers=0, its best configuration), then
take the same loads over V2 gRPC (`ModelInfer`) from bench/grpc_load.py, a grpc.aio load
generator sending pre-serialized requests (bench/serving_grpc.py): each server is started once
and measured over REST and then over gRPC. A summary closes the report: for 1-sample requests,
REST and gRPC apart, the deployment's req/s as a share of the direct server's, Loom's as a
multiple of MLServer's best, and p99/p50 at the highest concurrency.

On a 2-core machine the servers (and the ceiling) run on core 0 and wrk (or the gRPC load
generator) on core 1 (`taskset`), unless --no-pin.

    python bench/serving.py [--duration 5] [--repeat 1] [--concurrency 1,16,64] [--skip-mlserver]
                            [--protocols rest,grpc]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mlserver_peer
import serving_grpc
from mlflow_peer import free_port, stop
from peers import PEERS, table

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "digits-pytorch" / "train.py"
MODEL = PEERS / "digits-model"
NAME = "digits"
INFER = f"/v2/models/{NAME}/infer"
SIZES = (1, 64)  # samples per request
AIM_SPEEDUP = 3.0  # Loom req/s over MLServer's, at equal or better p99
AIM_CEILING = 0.6  # Loom samples/s at 64-sample requests over in-process batch-64
AIM_DEPLOYMENT = 0.9  # the deployment's req/s over the direct server's, 1-sample requests
AIM_TAIL = 5.0  # p99 ÷ p50, every row
AIM_BATCHING = {1: 5.0, 64: 2.0}  # Loom direct ÷ best MLServer, batching on both, 16+ conns
TOKEN = "loom_bench-token"  # sent to every server; only the deployment's gateway checks it
CEILING = "onnxruntime in-process"
LOOM = "Loom"  # the direct server's rows
DEPLOYMENT = "Loom deployment (HAProxy + gateway + 1)"
GATEWAY_ONLY = "Loom deployment (gateway alone + 1)"  # the data path before HAProxy
# HAProxy on a CPU of its own (LOOM_SERVING_PROXY_CPUS): the load's, the only other one here
OWN_CPU = "Loom deployment (HAProxy on the load's CPU + gateway + 1)"
PROTOCOLS = ("rest", "grpc")


# -- the model and the requests --------------------------------------------------------------
def digits_model() -> Path:
    """The digits model folder (model.onnx, model.pt, signature.json), trained on first use by
    the example's own script, as a Loom job would run it."""
    if (MODEL / "model.onnx").exists():
        return MODEL
    print("training the digits model (once) ...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="loom-bench-digits-") as work:
        env = {**os.environ, "RESULT_DIR": f"{work}/results", "CHECKPOINT_DIR": f"{work}/ckpt"}
        subprocess.run(
            [sys.executable, str(TRAIN)], cwd=work, env=env, check=True, stdout=subprocess.DEVNULL
        )
        shutil.rmtree(MODEL, ignore_errors=True)  # whatever an interrupted run left
        MODEL.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(f"{work}/results/model", MODEL)
    return MODEL


def test_images() -> np.ndarray[Any, Any]:
    """load_digits' test images, split as train.py splits them, shaped (n, 1, 8, 8)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    _, test = train_test_split(images, test_size=0.25, random_state=0, stratify=digits.target)
    return np.asarray(test)


def input_name(model: Path, images: np.ndarray[Any, Any]) -> str:
    """The model's input, checked against the images' shape."""
    spec = json.loads((model / "signature.json").read_text())["inputs"][0]
    assert spec["shape"][1:] == list(images.shape[1:]), (spec, images.shape)
    return str(spec["name"])


def v2_request(name: str, images: np.ndarray[Any, Any]) -> str:
    tensor = {
        "name": name,
        "shape": list(images.shape),
        "datatype": "FP32",
        "data": images.reshape(-1).tolist(),
    }
    return json.dumps({"inputs": [tensor]}, separators=(",", ":"))


def request_bodies(name: str, images: np.ndarray[Any, Any], size: int, count: int) -> list[str]:
    """`count` different requests of `size` consecutive test images each (wrapping around)."""
    picks = [
        np.take(images, range(i * size, (i + 1) * size), axis=0, mode="wrap") for i in range(count)
    ]
    return [v2_request(name, pick) for pick in picks]


# -- load generation -------------------------------------------------------------------------
@dataclass(frozen=True)
class Pinning:
    server: str | None  # taskset CPU lists, None: unpinned
    load: str | None

    def prefix(self, cpus: str | None) -> list[str]:
        return ["taskset", "-c", cpus] if cpus else []


@dataclass(frozen=True)
class Load:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int = 0
    errors: int = 0
    cpu_us: float | None = None  # the server's CPU time (all its processes) per request


LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
local bodies = {}
for line in io.lines("%s") do bodies[#bodies + 1] = line end
wrk.body = bodies[1]
local n = 0
request = function()
  n = n %% #bodies + 1
  return wrk.format(nil, nil, nil, bodies[n])
end
"""


def lua_script(folder: Path, size: int, bodies: list[str]) -> Path:
    """A wrk script that POSTs the bodies in turn (one JSON request a line)."""
    lines = folder / f"bodies-{size}.jsonl"
    lines.write_text("\n".join(bodies) + "\n")
    script = folder / f"post-{size}.lua"
    script.write_text(LUA % (TOKEN, lines))
    return script


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    print("installing wrk (apt-get) ...", file=sys.stderr, flush=True)
    quiet = {
        "stdout": subprocess.DEVNULL,
        "env": {**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    }
    if subprocess.run(["apt-get", "install", "-y", "wrk"], check=False, **quiet).returncode:
        subprocess.run(["apt-get", "update"], check=True, **quiet)
        subprocess.run(["apt-get", "install", "-y", "wrk"], check=True, **quiet)
    return shutil.which("wrk") or "wrk"


_UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def _percentile_ms(output: str, percent: int) -> float:
    found = re.search(rf"^\s*{percent}(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$", output, re.M)
    if not found:
        raise RuntimeError(f"no {percent}% line in wrk's output:\n{output}")
    return float(found[1]) * _UNIT_MS[found[2]]


def parse_wrk(output: str) -> Load:
    """Requests/s, p50 and p99 (ms) and failed requests from `wrk --latency`'s report."""
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    if not rate:
        raise RuntimeError(f"no Requests/sec in wrk's output:\n{output}")
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", output))
    socket = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    if socket:
        errors += sum(int(n) for n in socket.groups())
    done = re.search(r"^\s*(\d+) requests in", output, re.M)
    return Load(
        float(rate[1]),
        _percentile_ms(output, 50),
        _percentile_ms(output, 99),
        int(done[1]) if done else 0,
        errors,
    )


def run_wrk(
    wrk: str, pin: Pinning, url: str, script: Path, connections: int, seconds: float
) -> Load:
    command = [
        *pin.prefix(pin.load), wrk, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s",
        "--timeout", "10s", "--latency", "-s", str(script), url,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return parse_wrk(done.stdout)


# -- the servers -----------------------------------------------------------------------------
def _nothing() -> None:
    return None


def _no_cpu() -> float | None:
    return None


def _no_grpc() -> str | None:
    return None


@dataclass
class Server:
    """One way of serving the model. `start` spawns it and returns its V2 infer URL at once (it
    may not answer yet); `check` raises once it has died; `stop` ends it and what it started;
    `cpu` is the CPU seconds all its processes have used so far (None: not known); `grpc` is
    the host:port of its V2 gRPC endpoint once started (None: not measured over gRPC).
    Servers with role "loom" are held to the aims; "peer" servers are what they are held to."""

    system: str
    batching: bool
    start: Callable[[], str]
    stop: Callable[[], None]
    check: Callable[[], None] = _nothing
    cpu: Callable[[], float | None] = _no_cpu
    role: str = "loom"
    grpc: Callable[[], str | None] = _no_grpc


class Process:
    """A server command in its own session (so it stops with its children), logging to a file."""

    def __init__(self, command: list[str], folder: Path) -> None:
        self.log = folder / "server.log"
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                command, cwd=folder, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def check(self) -> None:
        if self.popen.poll() is not None:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"the server exited ({self.popen.returncode}):\n{tail}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            stop(self.popen)

    def cpu(self) -> float:
        """User and system CPU seconds of the process and its living children."""
        try:
            root = psutil.Process(self.popen.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0
        return cpu_seconds(processes)


def cpu_seconds(processes: list[psutil.Process]) -> float:
    """User and system CPU seconds of these processes (those gone count nothing)."""
    total = 0.0
    for process in processes:
        with suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def process_server(
    system: str,
    batching: bool,
    role: str,
    launch: Callable[[int, Path], list[str]],
    grpc: Callable[[], str | None] = _no_grpc,
) -> Server:
    """A Server from a command line: `launch(port, folder)` gives the command, run in a fresh
    temporary `folder` on a free port; the folder goes when the server stops. `grpc` gives
    its gRPC endpoint, once launched (None: none to measure)."""
    held: dict[str, Any] = {}

    def start() -> str:
        folder = Path(tempfile.mkdtemp(prefix="loom-bench-serving-"))
        port = free_port()
        held["folder"] = folder
        held["process"] = Process(launch(port, folder), folder)
        return f"http://127.0.0.1:{port}{INFER}"

    def check() -> None:
        if "process" in held:
            held["process"].check()

    def cpu() -> float | None:
        return held["process"].cpu() if "process" in held else None

    def end() -> None:
        if "process" in held:
            held.pop("process").stop()
        if "folder" in held:
            shutil.rmtree(held.pop("folder"), ignore_errors=True)

    return Server(system, batching, start, end, check, cpu, role, grpc)


def grpc_port(ports: dict[str, int]) -> Callable[[], str | None]:
    """The gRPC endpoint a launch put in `ports` (None where it chose none)."""
    return lambda: f"127.0.0.1:{ports['grpc']}" if "grpc" in ports else None


@dataclass(frozen=True)
class Batching:
    size: int  # Loom: samples per batch; MLServer: requests per batch
    wait_ms: float


def loom(model: Path, pin: Pinning, batching: Batching | None, grpc: bool = False) -> Server:
    """Loom's model server; with `grpc`, its gRPC port (it serves one anyway, on the HTTP
    port + 1) is a free one, to be measured."""
    ports: dict[str, int] = {}

    def launch(port: int, _folder: Path) -> list[str]:
        command = [*pin.prefix(pin.server), sys.executable, "-m", "loom.serving", str(model)]
        command += ["--name", NAME, "--port", str(port)]
        if grpc:
            ports["grpc"] = free_port()
            command += ["--grpc-port", str(ports["grpc"])]
        if batching:
            command += [
                "--batch-size",
                str(batching.size),
                "--batch-wait-ms",
                str(batching.wait_ms),
            ]
        return command

    return process_server(LOOM, batching is not None, "loom", launch, grpc_port(ports))


def loom_deployment(
    model: Path,
    pin: Pinning,
    batching: Batching | None,
    grpc: bool = False,
    proxy: bool = True,
    proxy_cpus: list[int] | None = None,
) -> Server:
    """A Loom deployment as the platform runs one: HAProxy steered by the gateway (with
    `proxy`; else the gateway alone, the data path before it) with one replica behind it on a
    unix socket, private (each request's token checked, over REST and gRPC); the gateway
    inherits the pinning and so do HAProxy and the replica. With `grpc`, the deployment serves
    a gRPC endpoint too (its grpc_endpoint), on a free port. With `proxy_cpus`, HAProxy runs
    on those CPUs instead (`LOOM_SERVING_PROXY_CPUS`)."""
    from loom.domain.accounts import hash_token
    from loom.serving.access import ACCESS, render
    from loom.serving.spec import DeploymentSpec
    from loom.store.private import write_private

    ports: dict[str, int] = {}

    def launch(port: int, folder: Path) -> list[str]:
        if grpc:
            ports["grpc"] = free_port()
        DeploymentSpec(
            name=NAME,
            model_dir=str(model),
            model_version="1",
            port=port,
            grpc_port=ports.get("grpc"),
            min_replicas=1,
            max_replicas=1,
            batch_size=batching.size if batching else 1,
            batch_wait_ms=batching.wait_ms if batching else 0.0,
            proxy="haproxy" if proxy else "",
            proxy_cpus=list(proxy_cpus or []),
        ).write(folder)
        write_private(folder / ACCESS, render(False, {hash_token(TOKEN): "token"}))
        return [*pin.prefix(pin.server), sys.executable, "-m", "loom.serving.gateway", str(folder)]

    system = (OWN_CPU if proxy_cpus else DEPLOYMENT) if proxy else GATEWAY_ONLY
    return process_server(system, batching is not None, "loom", launch, grpc_port(ports))


def mlserver(
    model: Path, pin: Pinning, batching: Batching | None, workers: int, grpc: bool = False
) -> Server:
    """MLServer (it always serves gRPC too; with `grpc`, that endpoint is measured)."""
    held: dict[str, int] = {}

    def launch(port: int, folder: Path) -> list[str]:
        ports = mlserver_peer.Ports(port, free_port())
        if grpc:
            held["grpc"] = ports.grpc
        batch = (batching.size, batching.wait_ms / 1000) if batching else None
        repository = folder / "repository"
        mlserver_peer.write_repository(
            repository, model / "model.onnx", NAME, ports, workers=workers, batch=batch
        )
        return [*pin.prefix(pin.server), *mlserver_peer.command(repository)]

    system = f"MLServer {mlserver_peer.VERSION} workers={workers}"
    return process_server(system, batching is not None, "peer", launch, grpc_port(held))


def servers(args: argparse.Namespace, model: Path, pin: Pinning) -> list[Server]:
    """Every server to measure, batching off and on; add another target here. Over gRPC: Loom,
    the deployment and MLServer with parallel_workers=0, batching off (the same processes as
    their REST rows); without REST, only those."""
    rest, grpc = "rest" in args.protocols, "grpc" in args.protocols
    batching = Batching(args.batch_size, args.batch_wait_ms)
    peer_batching = Batching(args.batch_size, args.peer_batch_wait_ms)
    found = [loom(model, pin, None, grpc), *([loom(model, pin, batching)] if rest else [])]
    found += [loom_deployment(model, pin, None, grpc)]
    found += [loom_deployment(model, pin, batching)] if rest else []
    if not args.skip_gateway_only:
        found += [loom_deployment(model, pin, None, grpc, proxy=False)]
    if pin.load and not args.skip_proxy_own_cpu:
        cpus = [int(cpu) for cpu in pin.load.replace("-", ",").split(",")[:1]]
        found += [loom_deployment(model, pin, None, grpc, proxy_cpus=cpus)]
    workers = [] if args.skip_mlserver else [0] if args.skip_mlserver_workers else [0, 1]
    for count in workers:
        if rest or count == 0:
            found += [mlserver(model, pin, None, count, grpc and count == 0)]
        if rest:
            found += [mlserver(model, pin, peer_batching, count)]
    return found


# -- measuring -------------------------------------------------------------------------------
def post(url: str, body: str, timeout: float = 10) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    request = urllib.request.Request(url, body.encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        result: dict[str, Any] = json.loads(answer.read())
        return result


def first_infer(
    url: str, body: str, check: Callable[[], None], timeout: float = 120
) -> dict[str, Any]:
    """The first successful answer of a starting server. Refusals and errors mean "not yet"
    (MLServer answers 400 while its model loads) until the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        check()
        try:
            return post(url, body, timeout=5)
        except urllib.error.HTTPError as exc:
            last = f"{exc.code}: {exc.read()[:500]!r}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer in {timeout:.0f}s; last: {last}")
        time.sleep(0.01)


def verify(answer: dict[str, Any], expected: np.ndarray[Any, Any]) -> None:
    """The server's logits are ONNX Runtime's own for the same images."""
    output = answer["outputs"][0]
    verify_logits(np.asarray(output["data"], dtype=np.float32).reshape(output["shape"]), expected)


def verify_logits(got: np.ndarray[Any, Any], expected: np.ndarray[Any, Any]) -> None:
    if got.shape != expected.shape or not np.allclose(got, expected, atol=1e-4):
        raise RuntimeError(f"wrong logits: {got[:1]} where ONNX Runtime gives {expected[:1]}")


@contextmanager
def pinned(cpus: str | None) -> Iterator[None]:
    """This process on `cpus` (a taskset list such as "0") for the duration."""
    before = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def session(model: Path) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(
        str(model / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )


def in_process(
    model: Path, name: str, images: np.ndarray[Any, Any], size: int, seconds: float
) -> Load:
    """`InferenceSession.run` in a loop on batches of `size` test images: calls/s, p50, p99."""
    ort = session(model)
    batches = [
        np.take(images, range(i * size, (i + 1) * size), axis=0, mode="wrap") for i in range(16)
    ]
    for batch in batches:
        ort.run(None, {name: batch})
    times = []
    cpu, began = time.process_time(), time.perf_counter()
    while time.perf_counter() - began < seconds:
        start = time.perf_counter()
        ort.run(None, {name: batches[len(times) % len(batches)]})
        times.append(time.perf_counter() - start)
    rate = len(times) / (time.perf_counter() - began)
    cpu_us = (time.process_time() - cpu) / len(times) * 1e6
    times.sort()
    p99 = times[min(int(0.99 * len(times)), len(times) - 1)]
    return Load(rate, statistics.median(times) * 1000, p99 * 1000, len(times), 0, cpu_us)


@dataclass
class Row:
    system: str
    batching: str
    samples: int
    concurrency: int
    load: Load
    role: str = "loom"

    @property
    def samples_per_s(self) -> float:
        return self.load.rps * self.samples


@dataclass
class Measured:
    rows: list[Row] = field(default_factory=list)  # REST
    cold: list[list[str]] = field(default_factory=list)
    grpc_rows: list[Row] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    wrk: str
    pin: Pinning
    scripts: dict[int, Path]  # samples per request → wrk script
    probes: dict[int, tuple[str, np.ndarray[Any, Any]]]  # samples → a body, its logits
    concurrency: list[int]
    duration: float
    warmup: float
    repeat: int = 1
    protocols: frozenset[str] = frozenset({"rest"})
    grpc_files: dict[int, Path] = field(default_factory=dict)  # samples → serialized requests


def under_load(server: Server, plan: Plan, url: str, script: Path, connections: int) -> Load:
    """The best (by req/s) of `plan.repeat` wrk runs: on a shared machine, the least disturbed."""
    runs = [one_load(server, plan, url, script, connections) for _ in range(plan.repeat)]
    return max(runs, key=lambda load: load.rps)


def one_load(server: Server, plan: Plan, url: str, script: Path, connections: int) -> Load:
    """One wrk run, with the server's CPU time per request."""
    before = server.cpu()
    load = run_wrk(plan.wrk, plan.pin, url, script, connections, plan.duration)
    after = server.cpu()
    server.check()
    if before is None or after is None or not load.requests:
        return load
    return replace(load, cpu_us=(after - before) / load.requests * 1e6)


def measure(server: Server, plan: Plan, batching_label: str, into: Measured) -> None:
    """Start the server, time its cold start, check its answers, put it under each load, stop it."""
    print(f"measuring {server.system}, batching {batching_label} ...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    try:
        url = server.start()
        verify(first_infer(url, plan.probes[1][0], server.check), plan.probes[1][1])
        into.cold.append([server.system, batching_label, f"{time.perf_counter() - began:.2f}"])
        for size, script in plan.scripts.items() if "rest" in plan.protocols else ():
            verify(post(url, plan.probes[size][0]), plan.probes[size][1])
            run_wrk(plan.wrk, plan.pin, url, script, 16, plan.warmup)
            for connections in plan.concurrency:
                load = under_load(server, plan, url, script, connections)
                into.rows.append(
                    Row(server.system, batching_label, size, connections, load, server.role)
                )
        address = server.grpc()
        if address and "grpc" in plan.protocols:
            measure_grpc(server, plan, address, batching_label, into)
    finally:
        server.stop()


def measure_grpc(
    server: Server, plan: Plan, address: str, batching_label: str, into: Measured
) -> None:
    """The running server over gRPC: its answers checked, then each load, as over REST (a
    warm-up at 16 calls in flight for each request size, the best of `plan.repeat` runs)."""
    print(f"  ... and over gRPC at {address}", file=sys.stderr, flush=True)
    for size, file in plan.grpc_files.items():
        request = serving_grpc.first_request(file)
        got = serving_grpc.first_infer(address, request, TOKEN, server.check)
        verify_logits(got, plan.probes[size][1])
        if plan.warmup > 0:
            serving_grpc.load(plan.pin, address, file, 16, plan.warmup, TOKEN)
        for connections in plan.concurrency:
            runs = [
                one_grpc_load(server, plan, address, file, connections) for _ in range(plan.repeat)
            ]
            load = max(runs, key=lambda found: found.rps)
            into.grpc_rows.append(
                Row(server.system, batching_label, size, connections, load, server.role)
            )


def one_grpc_load(server: Server, plan: Plan, address: str, file: Path, connections: int) -> Load:
    """One bench/grpc_load.py run, with the server's CPU time per call (its warm-up's calls
    counted, as they fall inside the CPU reading)."""
    before = server.cpu()
    found = serving_grpc.load(plan.pin, address, file, connections, plan.duration, TOKEN)
    after = server.cpu()
    server.check()
    calls = found["requests"] + found["errors"] + found.get("warmup_requests", 0)
    cpu_us = (after - before) / calls * 1e6 if before is not None and after is not None else None
    return Load(
        found["rps"], found["p50_ms"], found["p99_ms"], int(found["requests"]),
        int(found["errors"]), cpu_us if calls else None,
    )  # fmt: skip


# -- the report ------------------------------------------------------------------------------
def row_cells(row: Row, ceiling: dict[int, Load]) -> list[str]:
    share = (
        f"{row.samples_per_s / (ceiling[row.samples].rps * row.samples):.0%}"
        if row.samples > 1 and row.role != "ceiling"
        else ""
    )
    cpu = f"{row.load.cpu_us:,.0f}" if row.load.cpu_us is not None else ""
    return [
        row.system, row.batching, str(row.samples), str(row.concurrency), f"{row.load.rps:,.0f}",
        f"{row.samples_per_s:,.0f}", f"{row.load.p50_ms:.2f}", f"{row.load.p99_ms:.2f}", share,
        cpu, str(row.load.errors or ""),
    ]  # fmt: skip


def speedups(rows: list[Row]) -> list[list[str]]:
    """Aim (a): each Loom row's req/s over the best MLServer row under the same load."""
    out = []
    for row in (r for r in rows if r.role == "loom"):
        peers = [
            p
            for p in rows
            if p.role == "peer"
            and (p.batching, p.samples, p.concurrency)
            == (row.batching, row.samples, row.concurrency)
        ]
        if not peers:
            continue
        best = max(peers, key=lambda p: p.load.rps)
        ratio = row.load.rps / best.load.rps
        met = ratio >= AIM_SPEEDUP and row.load.p99_ms <= best.load.p99_ms
        p99 = f"{row.load.p99_ms:.2f} / {best.load.p99_ms:.2f}"
        cpu = (
            f"{best.load.cpu_us / row.load.cpu_us:.2f}x"
            if row.load.cpu_us and best.load.cpu_us
            else ""
        )
        out.append([
            row.system, row.batching, str(row.samples), str(row.concurrency), best.system,
            f"{ratio:.2f}x", p99, cpu, "yes" if met else "no",
        ])  # fmt: skip
    return out


def ceiling_shares(rows: list[Row], ceiling: Load, size: int) -> list[list[str]]:
    """Aim (b): each Loom row at `size`-sample requests against in-process batch `size`."""
    out = []
    for row in (r for r in rows if r.role == "loom" and r.samples == size):
        share = row.samples_per_s / (ceiling.rps * size)
        out.append([
            row.system, row.batching, str(row.concurrency), f"{row.samples_per_s:,.0f}",
            f"{ceiling.rps * size:,.0f}", f"{share:.0%}", "yes" if share >= AIM_CEILING else "no",
        ])  # fmt: skip
    return out


def grpc_cells(row: Row) -> list[str]:
    cpu = f"{row.load.cpu_us:,.0f}" if row.load.cpu_us is not None else ""
    ratio = f"{row.load.p99_ms / row.load.p50_ms:.1f}" if row.load.p50_ms else ""
    return [
        row.system, row.batching, str(row.samples), str(row.concurrency), f"{row.load.rps:,.0f}",
        f"{row.samples_per_s:,.0f}", f"{row.load.p50_ms:.2f}", f"{row.load.p99_ms:.2f}", ratio,
        cpu, str(row.load.errors or ""),
    ]  # fmt: skip


def peer_label(row: Row) -> str:
    """A MLServer row's configuration, short: "workers=0, batching off"."""
    return (
        f"{row.system.removeprefix(f'MLServer {mlserver_peer.VERSION} ')}, batching {row.batching}"
    )


def comparisons(rows: list[Row], levels: list[int]) -> list[list[str]]:
    """For 1-sample requests: the deployment's req/s ÷ the direct server's (batching off), and
    each as a multiple of MLServer's best row (any configuration) under the same load."""

    def find(system: str, connections: int) -> Row | None:
        return next(
            (
                r
                for r in rows
                if (r.system, r.batching, r.samples, r.concurrency)
                == (system, "off", 1, connections)
            ),
            None,
        )

    def best_peer(connections: int) -> Row | None:
        peers = [
            r for r in rows if r.role == "peer" and (r.samples, r.concurrency) == (1, connections)
        ]
        return max(peers, key=lambda r: r.load.rps) if peers else None

    def ratio(top: Row | None, bottom: Row | None, form: str) -> str:
        return (
            format(top.load.rps / bottom.load.rps, form) + ("" if form.endswith("%") else "x")
            if top and bottom and bottom.load.rps
            else "-"
        )

    out = [
        ["deployment req/s ÷ Loom direct"]
        + [ratio(find(DEPLOYMENT, c), find(LOOM, c), ".0%") for c in levels]
    ]
    if any(find(GATEWAY_ONLY, c) for c in levels):
        out.append(
            ["  the same, gateway alone (before HAProxy)"]
            + [ratio(find(GATEWAY_ONLY, c), find(LOOM, c), ".0%") for c in levels]
        )
    if any(find(OWN_CPU, c) for c in levels):
        out.append(
            ["  the same, HAProxy on the load's CPU"]
            + [ratio(find(OWN_CPU, c), find(LOOM, c), ".0%") for c in levels]
        )
    labels = {
        LOOM: "Loom direct",
        DEPLOYMENT: "Loom deployment",
        OWN_CPU: "deployment, HAProxy on the load's CPU",
        GATEWAY_ONLY: "gateway alone",
    }
    if any(best_peer(c) for c in levels):
        for system, label in labels.items():
            out.append(
                [f"{label} ÷ best MLServer"]
                + [ratio(find(system, c), best_peer(c), ".2f") for c in levels]
            )
        out.append(
            ["best MLServer: req/s, configuration"]
            + [
                f"{peer.load.rps:,.0f}, {peer_label(peer)}" if (peer := best_peer(c)) else "-"
                for c in levels
            ]
        )
    return out


def p99_over_p50(protocols: dict[str, list[Row]], connections: int) -> list[list[str]]:
    """p99/p50 (p50 / p99 ms) of each 1-sample row at `connections`, a column a protocol."""

    def cell(rows: list[Row], key: tuple[str, str]) -> str:
        found = [
            r
            for r in rows
            if (r.system, r.batching, r.samples, r.concurrency) == (*key, 1, connections)
        ]
        if not found or not found[0].load.p50_ms:
            return ""
        load = found[0].load
        return f"{load.p99_ms / load.p50_ms:.1f} ({load.p50_ms:.2f} / {load.p99_ms:.2f})"

    every = [r for rows in protocols.values() for r in rows if r.samples == 1]
    keys = list(dict.fromkeys((r.system, r.batching) for r in every))
    return [[*key, *(cell(rows, key) for rows in protocols.values())] for key in keys]


def aims(protocols: dict[str, list[Row]], levels: list[int]) -> list[list[str]]:
    """Each aim with its figure: the deployment against the direct server and MLServer's best
    (1-sample requests, batching off), the worst p99/p50 of each system, and batching against
    MLServer's batching at 16 connections and more."""
    out = []

    def row(rows: list[Row], system: str, batching: str, size: int, conc: int) -> Row | None:
        key = (system, batching, size, conc)
        return next((r for r in rows if (r.system, r.batching, r.samples, r.concurrency) == key),
                    None)  # fmt: skip

    def best_peer(rows: list[Row], batching: str | None, size: int, conc: int) -> Row | None:
        peers = [
            r
            for r in rows
            if r.role == "peer"
            and (r.samples, r.concurrency) == (size, conc)
            and (batching is None or (r.batching == "off") == (batching == "off"))
        ]
        return max(peers, key=lambda r: r.load.rps) if peers else None

    for name, rows in protocols.items():
        for conc in levels:
            ours, direct = row(rows, DEPLOYMENT, "off", 1, conc), row(rows, LOOM, "off", 1, conc)
            own = row(rows, OWN_CPU, "off", 1, conc)
            for label, found in (("deployment", ours), ("deployment, HAProxy's own CPU", own)):
                if found and direct and direct.load.rps:
                    share = found.load.rps / direct.load.rps
                    out.append([f"{name}: {label} ≥ {AIM_DEPLOYMENT:.0%} of direct, {conc} conn",
                                f"{share:.0%}", _met(share >= AIM_DEPLOYMENT)])  # fmt: skip
            peer = best_peer(rows, None, 1, conc)
            for label, found in (("deployment", ours), ("deployment, HAProxy's own CPU", own)):
                if found and peer and peer.load.rps:
                    ratio = found.load.rps / peer.load.rps
                    out.append([f"{name}: {label} ≥ {AIM_SPEEDUP:.0f}x best MLServer, {conc} conn",
                                f"{ratio:.2f}x", _met(ratio >= AIM_SPEEDUP)])  # fmt: skip
        for system in dict.fromkeys(r.system for r in rows if r.role == "loom"):
            mine = [r for r in rows if r.system == system and r.load.p50_ms]
            worst = max(mine, key=lambda r: r.load.p99_ms / r.load.p50_ms, default=None)
            if worst is not None:
                tail = worst.load.p99_ms / worst.load.p50_ms
                where = (
                    f"{worst.samples} samples, {worst.concurrency} conn, batching {worst.batching}"
                )
                out.append([f"{name}: {system} p99 ≤ {AIM_TAIL:g}x p50, worst row",
                            f"{tail:.1f} ({where})", _met(tail <= AIM_TAIL)])  # fmt: skip
        for size, aim in AIM_BATCHING.items():
            for conc in (c for c in levels if c >= 16):
                ours = next((r for r in rows if r.system == LOOM and r.batching != "off"
                             and (r.samples, r.concurrency) == (size, conc)), None)  # fmt: skip
                peer = best_peer(rows, "on", size, conc)
                if ours and peer and peer.load.rps:
                    ratio = ours.load.rps / peer.load.rps
                    out.append([f"{name}: batching, direct ≥ {aim:g}x best batching MLServer, "
                                f"{size} samples, {conc} conn", f"{ratio:.2f}x",
                                _met(ratio >= aim)])  # fmt: skip
    return out


def _met(yes: bool) -> str:
    return "yes" if yes else "no"


def summary(measured: Measured, levels: list[int]) -> str:
    """For 1-sample requests, REST and gRPC apart: the deployment against the direct server,
    both against MLServer's best, and p99/p50 at the highest concurrency."""
    protocols = {
        name: rows for name, rows in (("REST", measured.rows), ("gRPC", measured.grpc_rows)) if rows
    }
    heads = [f"{c} conn" for c in levels]
    blocks = [
        table(f"summary, {name}: 1-sample requests, Loom batching off; MLServer's best: its "
              "fastest row under that load", [name, *heads], comparisons(rows, levels))
        for name, rows in protocols.items()
    ]  # fmt: skip
    blocks.append(
        table("summary, the aims (issue 38) against this run", ["aim", "figure", "met"],
              aims(protocols, levels))
    )  # fmt: skip
    top = max(levels)
    blocks.append(
        table(
            f"summary, p99/p50 at {top} connections, 1-sample requests (p50 / p99 ms)",
            ["system", "batching", *protocols],
            p99_over_p50(protocols, top),
        )
    )
    return "\n\n".join(blocks)


def report(measured: Measured, ceiling: dict[int, Load], header: str, levels: list[int]) -> None:
    big = max(SIZES)
    ceiling_rows = [Row(CEILING, "-", size, 1, load, "ceiling") for size, load in ceiling.items()]
    print(header)
    print()
    if measured.rows:
        print(
            table(
                "V2 inference, digits CNN (ms: wrk's latency percentiles; in-process: per run "
                "call)",
                ["system", "batching", "samples/req", "conc", "req/s", "samples/s", "p50 ms",
                 "p99 ms", f"% of in-process b{big}", "CPU µs/req", "errors"],
                [row_cells(r, ceiling) for r in [*measured.rows, *ceiling_rows]],
            )
        )  # fmt: skip
        print()
    print(
        table(
            "cold start: spawn → first successful infer", ["system", "batching", "s"], measured.cold
        )
    )
    if measured.rows:
        print()
        print(
            table(
                f"aim (a): Loom req/s ÷ best MLServer req/s, same load (aim ≥ {AIM_SPEEDUP:.0f}x, "
                "p99 no worse)",
                ["system", "batching", "samples/req", "conc", "best MLServer", "ratio",
                 "p99 ms Loom / MLServer", "CPU/req MLServer ÷ Loom", "met"],
                speedups(measured.rows),
            )
        )  # fmt: skip
        print()
        print(
            table(
                f"aim (b): Loom samples/s at {big}-sample requests ÷ in-process batch {big} "
                f"(aim ≥ {AIM_CEILING:.0%})",
                ["system", "batching", "conc", "samples/s", "in-process samples/s", "share", "met"],
                ceiling_shares(measured.rows, ceiling[big], big),
            )
        )
    if measured.grpc_rows:
        print()
        print(
            table(
                "V2 gRPC ModelInfer, digits CNN (bench/grpc_load.py: pre-serialized requests, "
                "raw_input_contents, one channel a connection; ms: its latency percentiles)",
                ["system", "batching", "samples/req", "conc", "req/s", "samples/s", "p50 ms",
                 "p99 ms", "p99/p50", "CPU µs/req", "errors"],
                [grpc_cells(r) for r in measured.grpc_rows],
            )
        )  # fmt: skip
    print()
    print(summary(measured, levels))


# -- main ------------------------------------------------------------------------------------
def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--duration", type=float, default=5, help="seconds per row (wrk or grpc_load.py)"
    )
    parser.add_argument(
        "--warmup", type=float, default=1, help="load seconds before each set (wrk; gRPC too)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs a row, the best reported")
    parser.add_argument(
        "--concurrency", default="1,16,64", help="connections (gRPC: calls in flight), per row"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="when batching is on")
    parser.add_argument(
        "--batch-wait-ms", type=float, default=0.0, help="Loom's, when batching is on"
    )
    parser.add_argument(
        "--peer-batch-wait-ms",
        type=float,
        default=5.0,
        help="MLServer's max_batch_time, when batching is on (its batches need a wait)",
    )
    parser.add_argument("--ceiling-seconds", type=float, default=3.0)
    parser.add_argument("--skip-mlserver", action="store_true")
    parser.add_argument(
        "--skip-mlserver-workers", action="store_true", help="no parallel_workers=1 rows"
    )
    parser.add_argument("--no-pin", action="store_true", help="no taskset pinning")
    parser.add_argument(
        "--skip-proxy-own-cpu",
        action="store_true",
        help="no rows for a deployment whose HAProxy runs on the load's CPU (its own core)",
    )
    parser.add_argument(
        "--skip-gateway-only",
        action="store_true",
        help="no rows for a deployment served by its gateway alone (without HAProxy)",
    )
    parser.add_argument(
        "--protocols",
        default="rest,grpc",
        help="rest, grpc or both (default): REST rows (wrk) and gRPC rows (grpc_load.py), each "
        "server started once for both",
    )
    args = parser.parse_args(argv)
    chosen = {p.strip() for p in args.protocols.split(",") if p.strip()}
    if not chosen or chosen - set(PROTOCOLS):
        parser.error(f"--protocols: some of {','.join(PROTOCOLS)}, got {args.protocols!r}")
    args.protocols = frozenset(chosen)
    return args


def header(args: argparse.Namespace, pin: Pinning, wrk: str) -> str:
    version = (
        subprocess.run([wrk, "-v"], capture_output=True, text=True, check=False).stdout
        if wrk
        else ""
    )
    load = " and ".join(
        name for name, on in (("wrk", wrk), ("grpc_load.py", "grpc" in args.protocols)) if on
    )
    pinning = (
        f"servers and the in-process ceiling pinned to CPU {pin.server}, {load} to CPU "
        f"{pin.load} (taskset)"
        if pin.server
        else "no CPU pinning"
    )
    lines = [
        f"{os.cpu_count()} CPUs; {pinning}; "
        + (f"{version.split(' Copyright')[0].strip()}, -t1, " if wrk else "")
        + f"{args.duration:g} s a row (best of {args.repeat}) after a {args.warmup:g} s warm-up",
        f"batching on: Loom --batch-size {args.batch_size} (samples) --batch-wait-ms "
        f"{args.batch_wait_ms:g}; MLServer max_batch_size {args.batch_size} (requests), "
        f"max_batch_time {args.peer_batch_wait_ms / 1000:g} s",
        "ONNX Runtime 1 intra-op thread everywhere; MLServer access log and metrics off",
    ]
    if "grpc" in args.protocols:
        lines.append(
            "gRPC: the same server processes after their REST rows (Loom direct, the deployment's "
            "grpc_endpoint, MLServer workers=0), batching off; grpc.aio "
            f"{_grpc_version()} in one process, the token sent to every server as over REST"
        )
    lines.append(
        f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work "
        "on the machine skews req/s and latency; CPU µs/req, the servers' own CPU time, less)"
    )
    return "\n".join(lines)


def _grpc_version() -> str:
    import grpc

    return str(grpc.__version__)


def make_plan(args: argparse.Namespace, wrk: str, pin: Pinning, model: Path, work: Path) -> Plan:
    """The requests (real test images), their wrk scripts, their gRPC request files and their
    expected answers."""
    images = test_images()
    name = input_name(model, images)
    ort = session(model)
    bodies = {size: request_bodies(name, images, size, 64 if size == 1 else 8) for size in SIZES}
    probes = {size: (bodies[size][0], ort.run(None, {name: images[:size]})[0]) for size in SIZES}
    scripts = {size: lua_script(work, size, bodies[size]) for size in SIZES}
    concurrency = [int(c) for c in args.concurrency.split(",")]
    files = (
        {size: serving_grpc.requests_file(work, NAME, name, images, size) for size in SIZES}
        if "grpc" in args.protocols
        else {}
    )
    return Plan(
        wrk, pin, scripts, probes, concurrency, args.duration, args.warmup, args.repeat,
        args.protocols, files,
    )  # fmt: skip


def ceilings(model: Path, pin: Pinning, seconds: float) -> dict[int, Load]:
    """In-process ONNX Runtime at each request size, on the servers' CPU."""
    images = test_images()
    name = input_name(model, images)
    with pinned(pin.server):
        return {size: in_process(model, name, images, size, seconds) for size in SIZES}


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    rest = "rest" in args.protocols
    wrk = ensure_wrk() if rest else ""
    two = not args.no_pin and (os.cpu_count() or 1) >= 2
    pin = Pinning("0", "1") if two else Pinning(None, None)
    intro = header(args, pin, wrk)
    model = digits_model()
    ceiling = ceilings(model, pin, args.ceiling_seconds) if rest else {}
    measured = Measured()
    with tempfile.TemporaryDirectory(prefix="loom-bench-wrk-") as work:
        plan = make_plan(args, wrk, pin, model, Path(work))
        for server in servers(args, model, pin):
            wait = args.batch_wait_ms if server.role == "loom" else args.peer_batch_wait_ms
            on = f"on ({args.batch_size}, {wait:g} ms)"
            measure(server, plan, on if server.batching else "off", measured)
    report(measured, ceiling, intro, plan.concurrency)


if __name__ == "__main__":
    main()
