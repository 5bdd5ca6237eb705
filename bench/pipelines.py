"""Pipelines: what a step costs beyond its own work — 50 no-op steps in a chain, and 50 as one
fan-out — beside a bare process per step (the floor, measured here) and Kubeflow Pipelines' pod
per step (published figures: no Kubernetes on this machine).

    .venv/bin/python bench/pipelines.py [--steps 50]

"Overhead per step" is the run's wall time less the time the steps' own jobs ran (first
learner start to last learner end), divided by the steps: queueing, submitting, launching the
learner wrapper, following the job and opening the next step.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ingest import start_loom  # noqa: E402
from peers import table  # noqa: E402

from loom.client import LoomClient  # noqa: E402

# Published, not measured here: Argo (under Kubeflow Pipelines v1/v2) runs each step as a pod.
KFP_PUBLISHED = [
    [
        "Kubeflow Pipelines (Argo), chain",
        "published",
        "14",
        "281.0",
        "20.1",
        "~10.6",
        "argo-workflows#6262: 133 s in pods, 281 s in all",
    ],
    [
        "Kubeflow Pipelines (Argo), chain",
        "published",
        "-",
        "-",
        "-",
        "up to 10",
        "argo-workflows#12381: completion seen on a 10 s requeue",
    ],
]


def _seconds(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


def pipeline(steps: int, shape: str) -> dict[str, Any]:
    noop = {"kind": "shell", "command": "true", "cpus": 0.25, "memory": "256Mb", "cache": False}
    if shape == "chain":
        chain = [
            {"name": f"s{i}", **noop, **({"after": [f"s{i - 1}"]} if i else {})}
            for i in range(steps)
        ]
        return {"name": "bench-chain", "steps": chain}
    fan = {
        "name": "fan",
        **noop,
        "for_each": list(range(steps)),
        "parallelism": steps,
    }
    return {"name": "bench-fan", "steps": [fan]}


def loom_side(client: LoomClient, steps: int, shape: str) -> list[str]:
    began = time.monotonic()
    made = client.run_pipeline(pipeline(steps, shape))
    run = client.wait_pipeline_run(made["id"], timeout_s=1800, poll_s=0.2)
    wall = time.monotonic() - began
    assert run["state"] == "SUCCEEDED", run
    spans = []
    for step in run["steps"]:
        for task in step["tasks"]:
            job = client.job(task["job_id"])
            start, end = _seconds(job.get("started_at")), _seconds(job.get("finished_at"))
            if start is not None and end is not None:
                spans.append((start, end))
    busy = _union(spans)
    per_step = (wall - busy) / steps if shape == "chain" else wall / steps
    note = "wall less the jobs' own time" if shape == "chain" else "wall / steps, all at once"
    return [
        f"Loom pipeline, {shape}",
        "measured",
        str(steps),
        f"{wall:.1f}",
        f"{wall / steps:.2f}",
        f"{per_step:.2f}",
        note,
    ]


def _union(spans: list[tuple[float, float]]) -> float:
    """The time covered by at least one span."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def bare_side(steps: int) -> list[str]:
    """The floor: one Python process per step, one after another, nothing else."""
    began = time.monotonic()
    for _ in range(steps):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    wall = time.monotonic() - began
    return ["a bare process per step", "measured", str(steps), f"{wall:.1f}", f"{wall / steps:.2f}",
            f"{wall / steps:.2f}", "python -c pass, in a loop"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    rows = []
    server, client, _home = start_loom()
    try:
        for shape in ("chain", "fan-out"):
            rows.append(loom_side(client, args.steps, shape))
    finally:
        server.terminate()
        server.wait(timeout=30)
    rows.append(bare_side(args.steps))
    rows.extend(KFP_PUBLISHED)
    header = ["system", "", "steps", "wall s", "wall s/step", "overhead s/step", "how"]
    title = f"Pipelines: {args.steps} no-op steps, on {os.cpu_count()} cores"
    print(table(title, header, rows))


if __name__ == "__main__":
    main()
