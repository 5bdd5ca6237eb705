"""Ray Tune's side of bench/hpo_target.py, run in Ray's own venv: ASHA over random search on the
same space, two trials at a time, each trial the same training script run by Loom's Python (so
the work is the same); every trial stops once one reaches the target. Prints one JSON document.

    python hpo_target_tune.py TRAINER_PYTHON TRAIN_PY SEED TARGET TRIALS
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler
from ray.tune.stopper import Stopper

MAX_EPOCHS = 8


class Reached(Stopper):
    """Every trial stops once one has reached the target."""

    def __init__(self, target: float) -> None:
        self.target = target
        self.done = False

    def __call__(self, trial_id: str, result: dict[str, float]) -> bool:
        self.done = self.done or result.get("accuracy", 0.0) >= self.target
        return self.done

    def stop_all(self) -> bool:
        return self.done


def main() -> None:
    python, train = sys.argv[1], sys.argv[2]
    seed, target, trials = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

    def trainable(config: dict[str, float]) -> None:
        command = [
            python, train, "--learning-rate", str(config["lr"]), "--width", str(config["width"]),
            "--epochs", str(MAX_EPOCHS),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        for line in child.stdout:
            if not line.startswith("epoch="):
                continue
            pairs = dict(p.split("=") for p in line.split())
            tune.report({"accuracy": float(pairs["accuracy"]), "epoch": int(pairs["epoch"])})

    space = {"lr": tune.loguniform(1e-6, 10), "width": tune.randint(1, 33)}
    scheduler = ASHAScheduler(
        time_attr="epoch", max_t=MAX_EPOCHS, grace_period=1, reduction_factor=3
    )
    began = time.monotonic()
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 1}),
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="accuracy",
            mode="max",
            scheduler=scheduler,
            num_samples=trials,
            max_concurrent_trials=2,
            search_alg=tune.search.BasicVariantGenerator(random_state=seed),
        ),
        run_config=tune.RunConfig(stop=Reached(target), verbose=0),
    )
    results = tuner.fit()
    wall = time.monotonic() - began
    epochs = sum(int(r.metrics.get("training_iteration", 0)) for r in results if r.metrics)
    best = max((r.metrics.get("accuracy", 0.0) for r in results if r.metrics), default=0.0)
    print(
        json.dumps(
            {"epochs": epochs, "wall": wall, "reached": best >= target, "trials": len(results)}
        )
    )


if __name__ == "__main__":
    main()
