"""The platform's own overhead on a trivial job, beside the bare command and Ray Jobs.

For `python -c "print(1)"`: the time from submission to the first log line reaching a client,
and to the job's end, median over N runs after a warm-up run, measured in one run on this
machine for
  - the bare command (a subprocess, its stdout read by this process),
  - Loom (the embedded platform: REST submit, queue, learner wrapper, log stream over SSE),
    with its learners sandboxed (bubblewrap + cgroup + a network namespace per job, the default
    where it can), sandboxed on the host's network (LOOM_JOB_NETWORK=host: the difference is
    the namespace's cost) and unconfined (LOOM_ISOLATION=off: the sandbox's whole cost),
  - Ray Jobs (its JobSubmissionClient, see ray_jobs_probe.py) to a local Ray head, in its own venv,
  - on one two-node Ray cluster (see ray_cluster.py): Loom with LOOM_LAUNCHER=ray (the job's
    learner a Ray actor, sandboxed on its node) beside Ray Jobs.

    python bench/launch.py [--runs 10] [--no-ray] [--no-cluster]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import start_loom
from peers import peer_python, table
from ray_cluster import QUIET, RayCluster

from loom.client.archive import zip_folder

COMMAND = 'python -c "print(1)"'
# A whole core, so that the kernel's CPU quota (which the sandbox enforces) does not slow the
# interpreter's start: what is measured is the sandbox's own cost.
MANIFEST = f"""name: trivial
cpus: 1
memory: 64MiB
framework:
  name: python
  command: {COMMAND}
"""
RAY = ["ray[default]==2.60.0"]
RAY_JOBS = "Ray Jobs 2.60"
LOOM_ON_RAY = "Loom (Ray launcher, sandboxed)"
HERE, HEAD, CLUSTER = "this machine", "1-node Ray head", "2-node Ray cluster"
AIM_FIRST_S, AIM_DONE_S = 0.10, 0.15  # Loom's time over the bare command's, sandboxed
AIM_ON_RAY = 0.3  # Loom on Ray ÷ Ray Jobs, to the first line and to done


@dataclass
class Measured:
    system: str
    where: str
    runs: list[tuple[float, float]]  # (submit → first line, submit → done), seconds

    @property
    def first(self) -> float:
        return statistics.median(r[0] for r in self.runs)

    @property
    def done(self) -> float:
        return statistics.median(r[1] for r in self.runs)


def bare(runs: int) -> list[tuple[float, float]]:
    out = []
    for _ in range(runs):
        began = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-c", "print(1)"], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        child.stdout.readline()
        first = time.perf_counter() - began
        child.wait()
        out.append((first, time.perf_counter() - began))
    return out


def loom(runs: int, **env: str) -> list[tuple[float, float]]:
    """Loom with these settings (`LOOM_*` variables): the first job warms the server's imports
    and caches, the next `runs` are measured."""
    return interleaved(runs, {"": env})[""]


def interleaved(
    runs: int, configs: dict[str, dict[str, str]]
) -> dict[str, list[tuple[float, float]]]:
    """One platform per configuration, all started first; then their jobs in turn (one of
    each, `runs + 1` times, the first round a warm-up), so that what the machine is doing at
    the time weighs on each of them alike."""
    started = {name: start_loom(**env) for name, env in configs.items()}
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    try:
        codes = {}
        for name, (_server, _client, home) in started.items():
            code_dir = home / "code"
            code_dir.mkdir()
            (code_dir / "README").write_text("a trivial job\n")
            codes[name] = zip_folder(code_dir)
        for i in range(runs + 1):
            for name, (_server, client, _home) in started.items():
                measured = one_job(client, codes[name])
                if i > 0:
                    out[name].append(measured)
    finally:
        for server, client, _home in started.values():
            client.close()
            server.terminate()
            server.wait(timeout=30)
    return out


def one_job(client: Any, code: bytes) -> tuple[float, float]:
    began = time.perf_counter()
    job_id = client.submit(MANIFEST, code)
    first = None
    for kind, _data in client.follow(job_id):
        if kind == "line" and first is None:
            first = time.perf_counter() - began
    done = time.perf_counter() - began
    return first or done, done


def ray_jobs(runs: int, cluster: RayCluster) -> list[tuple[float, float]]:
    """Ray Jobs on a running cluster, through its dashboard: one warm-up job, then `runs`."""
    probe = Path(__file__).resolve().parent / "ray_jobs_probe.py"
    result = subprocess.run(
        [cluster.python, str(probe), cluster.dashboard, str(runs + 1)],
        check=True, env=cluster.env, capture_output=True, text=True,
    )  # fmt: skip
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return [(r["first_line"], r["done"]) for r in rows[1:]]


def on_cluster(runs: int) -> list[Measured]:
    """Loom on Ray and Ray Jobs, on the same two-node cluster (this venv's Ray: Loom's node code
    imports on its nodes)."""
    with RayCluster(cpus=1) as cluster:
        ray = {"LOOM_LAUNCHER": "ray", "LOOM_RAY_ADDRESS": cluster.address, **QUIET}
        return [
            Measured(LOOM_ON_RAY, CLUSTER, loom(runs, **ray)),
            Measured(RAY_JOBS, CLUSTER, ray_jobs(runs, cluster)),
        ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-ray", action="store_true", help="skip Ray Jobs on a local head")
    parser.add_argument(
        "--no-cluster", action="store_true", help="skip the rows on a two-node Ray cluster"
    )
    args = parser.parse_args()

    bare_command = Measured("bare command", HERE, bare(args.runs))
    locally = interleaved(
        args.runs,
        {
            "Loom (local launcher, sandboxed)": {"LOOM_ISOLATION": "auto"},
            "Loom (sandboxed, LOOM_JOB_NETWORK=host)": {
                "LOOM_ISOLATION": "auto",
                "LOOM_JOB_NETWORK": "host",
            },
            "Loom (local launcher, LOOM_ISOLATION=off)": {"LOOM_ISOLATION": "off"},
        },
    )
    loom_local, host_network, unconfined = (Measured(n, HERE, r) for n, r in locally.items())
    measured = [bare_command, loom_local, host_network, unconfined]
    if not args.no_ray:
        with RayCluster(cpus=2, nodes=1, python=str(peer_python("ray", RAY))) as head:
            measured.append(Measured(RAY_JOBS, HEAD, ray_jobs(args.runs, head)))
    if not args.no_cluster:
        measured += on_cluster(args.runs)
    rows = [
        [m.system, m.where, str(len(m.runs)), f"{m.first:.3f}", f"{m.done:.3f}",
         f"+{m.done - bare_command.done:.3f}" if m is not bare_command else "—"]
        for m in measured
    ]  # fmt: skip
    header = ["system", "where", "runs", "submit→first line (s)", "submit→done (s)", "overhead (s)"]
    print(table(f"launch overhead of `{COMMAND}` (median)", header, rows))
    namespace_ms = (loom_local.done - host_network.done) * 1000
    print(f"\nThe job's network namespace costs {namespace_ms:+.1f} ms per job (one learner)")
    print()
    print(table("summary", ["measure", "value", "aim", "met"], summary(measured, bare_command)))


def summary(measured: list[Measured], bare_command: Measured) -> list[list[str]]:
    """The issue's aims, each with its figure from this run."""
    found = {(m.system, m.where): m for m in measured}
    loom_local = found["Loom (local launcher, sandboxed)", HERE]
    first = loom_local.first - bare_command.first
    done = loom_local.done - bare_command.done
    rows = [
        ["Loom sandboxed, submit → first line, over bare", f"+{first:.3f} s",
         f"≤ {AIM_FIRST_S} s", _met(first <= AIM_FIRST_S)],
        ["Loom sandboxed, submit → done, over bare", f"+{done:.3f} s",
         f"≤ {AIM_DONE_S} s", _met(done <= AIM_DONE_S)],
    ]  # fmt: skip
    if (RAY_JOBS, HEAD) in found:
        ratio = found[RAY_JOBS, HEAD].done / loom_local.done
        rows.append(["Ray Jobs ÷ Loom (local), to done", f"{ratio:.1f}x", "", ""])
    if (LOOM_ON_RAY, CLUSTER) in found:
        ours, theirs = found[LOOM_ON_RAY, CLUSTER], found[RAY_JOBS, CLUSTER]
        for what, mine, peer in (("first line", ours.first, theirs.first),
                                 ("done", ours.done, theirs.done)):  # fmt: skip
            ratio = mine / peer
            rows.append([f"Loom on Ray ÷ Ray Jobs ({CLUSTER}), to {what}", f"{ratio:.2f}",
                         f"≤ {AIM_ON_RAY}", _met(ratio <= AIM_ON_RAY)])  # fmt: skip
    return rows


def _met(yes: bool) -> str:
    return "yes" if yes else "no"


if __name__ == "__main__":
    main()
