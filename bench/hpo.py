"""What a hyperparameter search costs: Loom's experiments beside Ray Tune, same trials, same
machine, same run.

Each trial is `hpo_trial.py`: a few epochs of CPU work, an `epoch=N accuracy=X` line each.
Both systems search the same space with Optuna's TPE (5 random trials first, seed 0), two
trials at a time, with and without median stopping. Loom runs each trial as a job (a sandboxed
learner process where the machine can sandbox); Tune runs it as a subprocess of its trainable
(as Loom does), and also in the trainable's own process (Tune's usual way, no process start).

Measured: the search's wall time, trials a minute, each trial's overhead (its time less its
script's epochs of work), the gap between one trial ending and the next starting in its slot,
and the best objective found.

    python bench/hpo.py [--trials 24] [--quick]
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

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import start_loom
from peers import peer_python, table

from loom.client import LoomClient
from loom.client.archive import zip_folder

HERE = Path(__file__).resolve().parent
TUNE = ["ray[tune]==2.60.0", "optuna>=5,<6"]
PARALLEL = 2


def experiment(name: str, trials: int, epochs: int, epoch_s: float, median: bool) -> str:
    spec = {
        "objective": {"type": "maximize", "objectiveMetricName": "accuracy"},
        "algorithm": {
            "algorithmName": "tpe",
            "algorithmSettings": [
                {"name": "n_startup_trials", "value": "5"},
                {"name": "random_state", "value": "0"},
            ],
        },
        "parallelTrialCount": PARALLEL,
        "maxTrialCount": trials,
        "parameters": [
            {
                "name": "lr",
                "parameterType": "double",
                "feasibleSpace": {"min": "0.0005", "max": "0.05", "distribution": "logUniform"},
            },
            {"name": "width", "parameterType": "int", "feasibleSpace": {"min": "4", "max": "32"}},
        ],
        "trialTemplate": {
            "trialParameters": [
                {"name": "lr", "reference": "lr"},
                {"name": "width", "reference": "width"},
            ],
            "trialSpec": {
                "name": "hpo-bench",
                "cpus": 1,
                "memory": "256MiB",
                "framework": {
                    "name": "python",
                    "command": "python hpo_trial.py --lr ${trialParameters.lr} --width "
                    f"${{trialParameters.width}} --epochs {epochs} --epoch-s {epoch_s}",
                },
            },
        },
    }
    if median:
        spec["earlyStopping"] = {
            "algorithmName": "medianstop",
            "algorithmSettings": [
                {"name": "min_trials_required", "value": "2"},
                {"name": "start_step", "value": "2"},
            ],
        }
    document = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment",
                "metadata": {"name": name}, "spec": spec}  # fmt: skip
    return yaml.safe_dump(document, sort_keys=False)


def gaps(spans: list[tuple[float, float]]) -> list[float]:
    """For each trial after the first PARALLEL: its start less the end that freed its slot."""
    ends = sorted(end for _, end in spans)
    starts = sorted(start for start, _ in spans)
    return [starts[i] - ends[i - PARALLEL] for i in range(PARALLEL, len(starts))]


def row(system: str, variant: str, wall: float, spans: list[tuple[float, float]],
        work: list[float], best: float) -> list[str]:  # fmt: skip
    overhead = [end - start - w for (start, end), w in zip(spans, work, strict=True)]
    between = gaps(spans)
    return [
        system,
        variant,
        str(len(spans)),
        f"{wall:.1f}",
        f"{len(spans) / wall * 60:.1f}",
        f"{statistics.median(overhead):.2f}",
        f"{statistics.median(between):.2f}" if between else "-",
        f"{best:.4f}",
    ]


def loom_side(client: LoomClient, code: bytes, trials: int, epochs: int, epoch_s: float,
              median: bool) -> list[str]:  # fmt: skip
    name = f"bench-{'median' if median else 'plain'}-{time.monotonic_ns()}"
    began = time.time()
    client.create_experiment(experiment(name, trials, epochs, epoch_s, median), code)
    found = client.wait_experiment(name, timeout_s=1800, every_s=0.2)
    wall = time.time() - began
    spans, work = [], []
    for trial in found["trial_list"]:
        job = client.job(trial["job_id"])
        if not job.get("started_at") or not job.get("finished_at"):
            continue
        spans.append((_seconds(job["started_at"]), _seconds(job["finished_at"])))
        work.append(trial["reports"] * epoch_s)
    best = max(t["objective"] for t in found["trial_list"] if t["objective"] is not None)
    variant = "TPE + medianstop" if median else "TPE"
    return row("Loom (a job per trial)", variant, wall, spans, work, best)


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


def tune_side(trials: int, epochs: int, epoch_s: float, median: bool, how: str) -> list[str]:
    python = peer_python("ray-tune", TUNE)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("PYTHONPATH", None)
    args = [str(trials), str(epochs), str(epoch_s), "median" if median else "none", how]
    done = subprocess.run(
        [str(python), str(HERE / "hpo_tune_probe.py"), *args],
        capture_output=True, text=True, env=env, timeout=1800, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"Ray Tune failed: {done.stderr[-3000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    spans = [(s, e) for s, e, _ in found["spans"]]
    work = [n * epoch_s for _, _, n in found["spans"]]
    variant = ("TPE + median stopping" if median else "TPE") + f", {how}"
    return row("Ray Tune 2.60", variant, found["wall"], spans, work, found["best"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--epoch-s", type=float, default=0.15)
    parser.add_argument("--quick", action="store_true", help="8 trials, no in-process variant")
    args = parser.parse_args()
    trials = 8 if args.quick else args.trials
    rows = []
    server, client, home = start_loom()
    try:
        code = home / "code"
        code.mkdir()
        (code / "hpo_trial.py").write_text((HERE / "hpo_trial.py").read_text())
        zipped = zip_folder(code)
        for median in (False, True):
            rows.append(loom_side(client, zipped, trials, args.epochs, args.epoch_s, median))
    finally:
        server.terminate()
        server.wait(timeout=30)
    for median in (False, True):
        rows.append(tune_side(trials, args.epochs, args.epoch_s, median, "subprocess"))
    if not args.quick:
        rows.append(tune_side(trials, args.epochs, args.epoch_s, False, "in-process"))
    header = ["system", "variant", "trials", "wall s", "trials/min",
              "overhead s (median)", "gap s (median)", "best"]  # fmt: skip
    title = (
        f"HPO: {trials} trials of {args.epochs} × {args.epoch_s} s of work, {PARALLEL} at a "
        f"time, on {os.cpu_count()} cores"
    )
    print(table(title, header, rows))


if __name__ == "__main__":
    main()
