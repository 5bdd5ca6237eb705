"""Model serving throughput and latency: Loom beside Seldon MLServer and in-process ONNX Runtime.

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

On a 2-core machine the servers (and the ceiling) run on core 0 and wrk on core 1 (`taskset`),
unless --no-pin.

    python bench/serving.py [--duration 5] [--repeat 1] [--concurrency 1,16,64] [--skip-mlserver]
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
TOKEN = "loom_bench-token"  # sent to every server; only the deployment's gateway checks it
CEILING = "onnxruntime in-process"


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


@dataclass
class Server:
    """One way of serving the model. `start` spawns it and returns its V2 infer URL at once (it
    may not answer yet); `check` raises once it has died; `stop` ends it and what it started;
    `cpu` is the CPU seconds all its processes have used so far (None: not known).
    Servers with role "loom" are held to the aims; "peer" servers are what they are held to."""

    system: str
    batching: bool
    start: Callable[[], str]
    stop: Callable[[], None]
    check: Callable[[], None] = _nothing
    cpu: Callable[[], float | None] = _no_cpu
    role: str = "loom"


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
        total = 0.0
        for process in processes:
            with suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                total += times.user + times.system
        return total


def process_server(
    system: str, batching: bool, role: str, launch: Callable[[int, Path], list[str]]
) -> Server:
    """A Server from a command line: `launch(port, folder)` gives the command, run in a fresh
    temporary `folder` on a free port; the folder goes when the server stops."""
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

    return Server(system, batching, start, end, check, cpu, role)


@dataclass(frozen=True)
class Batching:
    size: int  # Loom: samples per batch; MLServer: requests per batch
    wait_ms: float


def loom(model: Path, pin: Pinning, batching: Batching | None) -> Server:
    def launch(port: int, _folder: Path) -> list[str]:
        command = [*pin.prefix(pin.server), sys.executable, "-m", "loom.serving", str(model)]
        command += ["--name", NAME, "--port", str(port)]
        if batching:
            command += [
                "--batch-size",
                str(batching.size),
                "--batch-wait-ms",
                str(batching.wait_ms),
            ]
        return command

    return process_server("Loom", batching is not None, "loom", launch)


def loom_deployment(model: Path, pin: Pinning, batching: Batching | None) -> Server:
    """A Loom deployment as the platform runs one: the gateway with one replica behind it on a
    unix socket, private (the gateway checks each request's token); the gateway inherits the
    pinning and so does its replica."""
    from loom.domain.accounts import hash_token
    from loom.serving.access import ACCESS, render
    from loom.serving.spec import DeploymentSpec
    from loom.store.private import write_private

    def launch(port: int, folder: Path) -> list[str]:
        DeploymentSpec(
            name=NAME,
            model_dir=str(model),
            model_version="1",
            port=port,
            min_replicas=1,
            max_replicas=1,
            batch_size=batching.size if batching else 1,
            batch_wait_ms=batching.wait_ms if batching else 0.0,
        ).write(folder)
        write_private(folder / ACCESS, render(False, {hash_token(TOKEN): "token"}))
        return [*pin.prefix(pin.server), sys.executable, "-m", "loom.serving.gateway", str(folder)]

    return process_server("Loom deployment (gateway + 1)", batching is not None, "loom", launch)


def mlserver(model: Path, pin: Pinning, batching: Batching | None, workers: int) -> Server:
    def launch(port: int, folder: Path) -> list[str]:
        ports = mlserver_peer.Ports(port, free_port())
        batch = (batching.size, batching.wait_ms / 1000) if batching else None
        repository = folder / "repository"
        mlserver_peer.write_repository(
            repository, model / "model.onnx", NAME, ports, workers=workers, batch=batch
        )
        return [*pin.prefix(pin.server), *mlserver_peer.command(repository)]

    system = f"MLServer {mlserver_peer.VERSION} workers={workers}"
    return process_server(system, batching is not None, "peer", launch)


def servers(args: argparse.Namespace, model: Path, pin: Pinning) -> list[Server]:
    """Every server to measure, batching off and on; add another target here."""
    batching = Batching(args.batch_size, args.batch_wait_ms)
    peer_batching = Batching(args.batch_size, args.peer_batch_wait_ms)
    found = [loom(model, pin, None), loom(model, pin, batching)]
    found += [loom_deployment(model, pin, None), loom_deployment(model, pin, batching)]
    workers = [] if args.skip_mlserver else [0] if args.skip_mlserver_workers else [0, 1]
    for count in workers:
        found += [mlserver(model, pin, None, count), mlserver(model, pin, peer_batching, count)]
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
    got = np.asarray(output["data"], dtype=np.float32).reshape(output["shape"])
    if not np.allclose(got, expected, atol=1e-4):
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
    rows: list[Row] = field(default_factory=list)
    cold: list[list[str]] = field(default_factory=list)


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
        for size, script in plan.scripts.items():
            verify(post(url, plan.probes[size][0]), plan.probes[size][1])
            run_wrk(plan.wrk, plan.pin, url, script, 16, plan.warmup)
            for connections in plan.concurrency:
                load = under_load(server, plan, url, script, connections)
                into.rows.append(
                    Row(server.system, batching_label, size, connections, load, server.role)
                )
    finally:
        server.stop()


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


def report(measured: Measured, ceiling: dict[int, Load], header: str) -> None:
    big = max(SIZES)
    ceiling_rows = [Row(CEILING, "-", size, 1, load, "ceiling") for size, load in ceiling.items()]
    print(header)
    print()
    print(
        table(
            "V2 inference, digits CNN (ms: wrk's latency percentiles; in-process: per run call)",
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


# -- main ------------------------------------------------------------------------------------
def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5, help="seconds per wrk row")
    parser.add_argument("--warmup", type=float, default=1, help="wrk seconds before each set")
    parser.add_argument("--repeat", type=int, default=1, help="runs a row, the best reported")
    parser.add_argument("--concurrency", default="1,16,64", help="wrk connections, per row")
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
    return parser.parse_args()


def header(args: argparse.Namespace, pin: Pinning, wrk: str) -> str:
    version = subprocess.run([wrk, "-v"], capture_output=True, text=True, check=False).stdout
    pinning = (
        f"servers and the in-process ceiling pinned to CPU {pin.server}, wrk to CPU {pin.load} "
        "(taskset)"
        if pin.server
        else "no CPU pinning"
    )
    return "\n".join([
        f"{os.cpu_count()} CPUs; {pinning}; {version.split(' Copyright')[0].strip()}, -t1, "
        f"{args.duration:g} s a row (best of {args.repeat}) after a {args.warmup:g} s warm-up",
        f"batching on: Loom --batch-size {args.batch_size} (samples) --batch-wait-ms "
        f"{args.batch_wait_ms:g}; MLServer max_batch_size {args.batch_size} (requests), "
        f"max_batch_time {args.peer_batch_wait_ms / 1000:g} s",
        "ONNX Runtime 1 intra-op thread everywhere; MLServer access log and metrics off",
        f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work "
        "on the machine skews req/s and latency; CPU µs/req, the servers' own CPU time, less)",
    ])  # fmt: skip


def make_plan(args: argparse.Namespace, wrk: str, pin: Pinning, model: Path, work: Path) -> Plan:
    """The requests (real test images), their wrk scripts and their expected answers."""
    images = test_images()
    name = input_name(model, images)
    ort = session(model)
    bodies = {size: request_bodies(name, images, size, 64 if size == 1 else 8) for size in SIZES}
    probes = {size: (bodies[size][0], ort.run(None, {name: images[:size]})[0]) for size in SIZES}
    scripts = {size: lua_script(work, size, bodies[size]) for size in SIZES}
    concurrency = [int(c) for c in args.concurrency.split(",")]
    return Plan(wrk, pin, scripts, probes, concurrency, args.duration, args.warmup, args.repeat)


def ceilings(model: Path, pin: Pinning, seconds: float) -> dict[int, Load]:
    """In-process ONNX Runtime at each request size, on the servers' CPU."""
    images = test_images()
    name = input_name(model, images)
    with pinned(pin.server):
        return {size: in_process(model, name, images, size, seconds) for size in SIZES}


def main() -> None:
    args = arguments()
    wrk = ensure_wrk()
    two = not args.no_pin and (os.cpu_count() or 1) >= 2
    pin = Pinning("0", "1") if two else Pinning(None, None)
    intro = header(args, pin, wrk)
    model = digits_model()
    ceiling = ceilings(model, pin, args.ceiling_seconds)
    measured = Measured()
    with tempfile.TemporaryDirectory(prefix="loom-bench-wrk-") as work:
        plan = make_plan(args, wrk, pin, model, Path(work))
        for server in servers(args, model, pin):
            wait = args.batch_wait_ms if server.role == "loom" else args.peer_batch_wait_ms
            on = f"on ({args.batch_size}, {wait:g} ms)"
            measure(server, plan, on if server.batching else "off", measured)
    report(measured, ceiling, intro)


if __name__ == "__main__":
    main()
