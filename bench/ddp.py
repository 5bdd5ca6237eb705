"""The same 2-process DDP training through Loom and through torchrun, in one run.

The digits example (`examples/digits-pytorch/train.py`, gloo on CPU) with 2 ranks: wall time
from submission (or from starting torchrun) to the end, and to both ranks running (each rank's
first line), median of N runs, alternating the systems:
  - on this machine: torchrun --nproc_per_node=2 beside Loom's local launcher (its learners on
    their job's own network namespace, the default, and on the host's: LOOM_JOB_NETWORK=host),
  - on two nodes: torchrun as two nodes (one agent a node, `--nnodes=2 --node_rank=R`, both here)
    beside Loom with LOOM_LAUNCHER=ray on a two-node Ray cluster (see ray_cluster.py), its
    learners placed `strict_spread` (one a node, each node with the learner's one CPU).

    python bench/ddp.py [--runs 3] [--epochs 40] [--no-cluster]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import start_loom
from peers import free_port, table
from ray_cluster import QUIET, RayCluster

from loom.client import LoomClient
from loom.client.archive import zip_folder

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "digits-pytorch"
TORCHRUN_1, LOOM_LOCAL = "torchrun --nproc_per_node=2", "Loom, 2 learners (local launcher)"
LOOM_HOST_NET = "Loom, 2 learners (local, LOOM_JOB_NETWORK=host)"
TORCHRUN_2 = "torchrun --nnodes=2 --nproc_per_node=1"
LOOM_RAY = "Loom, 2 learners (Ray launcher, strict_spread)"
BESIDE = {LOOM_LOCAL: TORCHRUN_1, LOOM_HOST_NET: TORCHRUN_1, LOOM_RAY: TORCHRUN_2}
WHERE = {TORCHRUN_1: "this machine", LOOM_LOCAL: "this machine", LOOM_HOST_NET: "this machine",
         TORCHRUN_2: "2 nodes, both here", LOOM_RAY: "2-node Ray cluster"}  # fmt: skip


def torchrun(epochs: int, nodes: int = 1) -> tuple[float, float]:
    """torchrun on one node (two ranks), or as two nodes (an agent and a rank each)."""
    work = Path(tempfile.mkdtemp(prefix="torchrun-"))
    env = {**os.environ, "CHECKPOINT_DIR": str(work / "ckpt"), "RESULT_DIR": str(work / "out")}
    script = [str(EXAMPLE / "train.py"), "--epochs", str(epochs)]
    run = [sys.executable, "-m", "torch.distributed.run"]
    if nodes == 1:
        commands = [[*run, "--nproc_per_node=2", *script]]
    else:
        rendezvous = ["--nnodes=2", "--nproc_per_node=1", "--master_addr=127.0.0.1",
                      f"--master_port={free_port()}"]  # fmt: skip
        commands = [[*run, *rendezvous, f"--node_rank={r}", *script] for r in range(nodes)]
    reading, writing = os.pipe()  # every agent's ranks write to one pipe, read here
    began = time.perf_counter()
    children = [
        subprocess.Popen(command, env=env, stdout=writing, stderr=subprocess.DEVNULL)
        for command in commands
    ]
    os.close(writing)
    ranks: dict[str, float] = {}
    with os.fdopen(reading) as lines:
        for line in lines:
            for rank in ("0", "1"):
                if line.startswith(f"rank {rank}/") and rank not in ranks:
                    ranks[rank] = time.perf_counter() - began
    codes = [child.wait() for child in children]
    assert codes == [0] * len(children), f"torchrun exited with {codes}"
    return max(ranks.values()), time.perf_counter() - began


def loom(client: LoomClient, epochs: int, options: str = "") -> tuple[float, float]:
    manifest = (EXAMPLE / "manifest.yml").read_text().replace("--epochs 15", f"--epochs {epochs}")
    code = zip_folder(EXAMPLE)
    began = time.perf_counter()
    job_id = client.submit(manifest + options, code)
    ranks: dict[int, float] = {}
    for kind, data in client.follow(job_id):
        if kind == "line" and data["learner"] not in ranks:
            ranks[data["learner"]] = time.perf_counter() - began
    done = time.perf_counter() - began
    assert client.job(job_id)["state"] == "COMPLETED", client.job(job_id)
    return max(ranks.values()), done


def platform(stack: ExitStack, **env: str) -> LoomClient:
    """A Loom server with these settings, stopped when `stack` closes."""
    server, client, _ = start_loom(**env)
    stack.callback(server.wait, timeout=30)
    stack.callback(server.terminate)
    stack.callback(client.close)
    return client


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument(
        "--no-cluster", action="store_true", help="skip the rows on a two-node Ray cluster"
    )
    args = parser.parse_args()
    with ExitStack() as stack:
        local = platform(stack)
        host_net = platform(stack, LOOM_JOB_NETWORK="host")
        systems = {
            TORCHRUN_1: lambda: torchrun(args.epochs),
            LOOM_LOCAL: lambda: loom(local, args.epochs),
            LOOM_HOST_NET: lambda: loom(host_net, args.epochs),
        }
        loom(local, 2)  # warm-up: the platform's first job pays for its imports
        loom(host_net, 2)
        if not args.no_cluster:
            # Each node has the one CPU a learner asks for: a learner has its node to itself.
            cluster = stack.enter_context(RayCluster(cpus=1))
            on_ray = platform(stack, LOOM_LAUNCHER="ray", LOOM_RAY_ADDRESS=cluster.address, **QUIET)
            spread = "framework_options: {placement: strict_spread}\n"
            systems[TORCHRUN_2] = lambda: torchrun(args.epochs, nodes=2)
            systems[LOOM_RAY] = lambda: loom(on_ray, args.epochs, spread)
            loom(on_ray, 2, spread)  # warm-up, as for the local platform
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in systems}
        for _ in range(args.runs):
            for name, run in systems.items():
                results[name].append(run())
    median = {name: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
              for name, runs in results.items()}  # fmt: skip
    rows = [
        [name, WHERE[name], f"{first:.2f}", f"{done:.2f}",
         f"{done / median[BESIDE.get(name, name)][1]:.3f}"]
        for name, (first, done) in median.items()
    ]  # fmt: skip
    header = ["system", "where", "start→both ranks running (s)", "start→done (s)",
              "÷ torchrun, same nodes"]  # fmt: skip
    title = f"2-rank DDP, digits CNN, {args.epochs} epochs (median of {args.runs})"
    print(table(title, header, rows))
    if LOOM_RAY in median:
        ratio = median[LOOM_RAY][1] / median[TORCHRUN_2][1]
        print(f"\nLoom on the 2-node Ray cluster ÷ torchrun on 2 nodes: {ratio:.3f} (aim ≤ 1.10)")


if __name__ == "__main__":
    main()
