"""Hyperparameter search to a target: how many trial-epochs (and how much wall time) each search
spends on the digits CNN (examples/digits-hpo/train.py) before a trial reaches a target test
accuracy — Loom's random search, TPE, and random search with ASHA early stopping, beside Ray
Tune's ASHA on the same space, budget and training script, median over seeds.

Loom's experiments end when a trial reaches the target (Katib's `goal`); their trial-epochs are
the epochs every trial reported until then, halted ones included. Tune's run is stopped the same
way (a stopper that ends every trial once one reaches the target).

    .venv/bin/python bench/hpo_target.py [--seeds 5] [--target 0.97] [--trials 30]

The space is wide on purpose (learning rates from 1e-6 to 10, widths from 1): most of it
trains badly in 8 epochs, as in a real search, which is where early stopping pays.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ingest import start_loom  # noqa: E402
from peers import peer_python, table  # noqa: E402

from hpo import TUNE  # noqa: E402
from loom.client import LoomClient  # noqa: E402
from loom.client.archive import zip_folder  # noqa: E402

EXAMPLE = HERE.parent / "examples" / "digits-hpo"
PARALLEL = 2
MAX_EPOCHS = 8
SPACE = [
    {
        "name": "lr",
        "parameterType": "double",
        "feasibleSpace": {"min": "0.000001", "max": "10", "distribution": "logUniform"},
    },
    {"name": "width", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "32"}},
]


def experiment(name: str, variant: str, seed: int, target: float, trials: int) -> str:
    algorithm: dict[str, Any] = {
        "algorithmName": "tpe" if variant == "TPE" else "random",
        "algorithmSettings": [{"name": "random_state", "value": str(seed)}],
    }
    spec: dict[str, Any] = {
        "objective": {"type": "maximize", "goal": target, "objectiveMetricName": "accuracy"},
        "algorithm": algorithm,
        "parallelTrialCount": PARALLEL,
        "maxTrialCount": trials,
        "parameters": SPACE,
        "trialTemplate": {
            "trialParameters": [
                {"name": "lr", "reference": "lr"},
                {"name": "width", "reference": "width"},
            ],
            "trialSpec": {
                "name": "bench-target",
                "cpus": 1,
                "memory": "1Gb",
                "framework": {
                    "name": "pytorch",
                    "command": (
                        "python train.py --learning-rate ${trialParameters.lr} "
                        f"--width ${{trialParameters.width}} --epochs {MAX_EPOCHS}"
                    ),
                },
            },
        },
    }
    if variant == "ASHA":
        spec["earlyStopping"] = {
            "algorithmName": "asha",
            "algorithmSettings": [
                {"name": "min_resource", "value": "1"},
                {"name": "reduction_factor", "value": "3"},
            ],
        }
    document = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name},
        "spec": spec,
    }
    return yaml.safe_dump(document, sort_keys=False)


def loom_side(
    client: LoomClient, variant: str, seed: int, target: float, trials: int
) -> dict[str, Any]:
    name = f"target-{variant.lower()}-{seed}-{time.monotonic_ns()}"
    began = time.monotonic()
    client.create_experiment(experiment(name, variant, seed, target, trials), zip_folder(EXAMPLE))
    found = client.wait_experiment(name, timeout_s=3600, every_s=0.5)
    wall = time.monotonic() - began
    epochs = sum(int(t["reports"]) for t in found["trial_list"])
    reached = found["reason"] == "GoalReached"
    return {"epochs": epochs, "wall": wall, "reached": reached, "trials": len(found["trial_list"])}


def tune_side(seed: int, target: float, trials: int) -> dict[str, Any]:
    python = peer_python("ray-tune", TUNE)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("PYTHONPATH", None)
    args = [sys.executable, str(EXAMPLE / "train.py"), str(seed), str(target), str(trials)]
    done = subprocess.run(
        [str(python), str(HERE / "hpo_target_tune.py"), *args],
        capture_output=True, text=True, env=env, timeout=3600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"Ray Tune failed: {done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def summary(system: str, variant: str, runs: list[dict[str, Any]], base: float | None) -> list[str]:
    epochs = statistics.median(r["epochs"] for r in runs)
    wall = statistics.median(r["wall"] for r in runs)
    reached = sum(r["reached"] for r in runs)
    share = f"{epochs / base:.2f}" if base else "1.00"
    return [
        system,
        variant,
        f"{reached}/{len(runs)}",
        f"{epochs:.0f}",
        share,
        f"{wall:.0f}",
        " ".join(str(r["epochs"]) for r in runs),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.97)
    parser.add_argument("--trials", type=int, default=30)
    args = parser.parse_args()
    seeds = range(args.seeds)
    results: dict[str, list[dict[str, Any]]] = {}
    server, client, _home = start_loom()
    try:
        for variant in ("random", "TPE", "ASHA"):
            results[variant] = [
                loom_side(client, variant, s, args.target, args.trials) for s in seeds
            ]
    finally:
        server.terminate()
        server.wait(timeout=30)
    tune = [tune_side(s, args.target, args.trials) for s in seeds]
    base = statistics.median(r["epochs"] for r in results["random"])
    rows = [summary("Loom", v, results[v], base) for v in ("random", "TPE", "ASHA")]
    rows.append(summary("Ray Tune 2.60", "ASHA (random)", tune, base))
    header = [
        "system",
        "search",
        "reached",
        "trial-epochs (median)",
        "of random's",
        "wall s (median)",
        "trial-epochs per seed",
    ]
    title = (
        f"HPO to a target: test accuracy ≥ {args.target} on the digits CNN, ≤ {args.trials} "
        f"trials of ≤ {MAX_EPOCHS} epochs, {PARALLEL} at a time, seeds {list(seeds)}, "
        f"{os.cpu_count()} cores"
    )
    print(table(title, header, rows))


if __name__ == "__main__":
    main()
