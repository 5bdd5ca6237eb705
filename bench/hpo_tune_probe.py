"""Ray Tune's side of bench/hpo.py, run in Ray's own venv: the same trials, the same TPE (Optuna's,
through OptunaSearch), two at a time; prints one JSON document.

    python hpo_tune_probe.py TRIALS EPOCHS EPOCH_S median|none subprocess|inprocess
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")

import optuna
import ray
from ray import tune
from ray.tune.schedulers import MedianStoppingRule
from ray.tune.search.optuna import OptunaSearch

TRIAL = str(Path(__file__).resolve().parent / "hpo_trial.py")


def main() -> None:
    trials, epochs, epoch_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    stopping, how = sys.argv[4], sys.argv[5]
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

    def trainable(config: dict[str, float]) -> None:
        began = time.time()
        command = [
            sys.executable,
            TRIAL,
            "--lr",
            str(config["lr"]),
            "--width",
            str(config["width"]),
            "--epochs",
            str(epochs),
            "--epoch-s",
            str(epoch_s),
        ]
        if how == "inprocess":
            import importlib.util
            import io
            from contextlib import redirect_stdout

            spec = importlib.util.spec_from_file_location("hpo_trial", TRIAL)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.argv = command[1:]
            out = io.StringIO()
            with redirect_stdout(out):
                module.main()
            lines = out.getvalue().splitlines()
        else:
            child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            assert child.stdout is not None
            lines = child.stdout  # type: ignore[assignment]
        for line in lines:
            pairs = dict(p.split("=") for p in line.split())
            tune.report(
                {
                    "accuracy": float(pairs["accuracy"]),
                    "epoch": int(pairs["epoch"]),
                    "began": began,
                    "at": time.time(),
                }
            )

    search = OptunaSearch(
        metric="accuracy",
        mode="max",
        sampler=optuna.samplers.TPESampler(n_startup_trials=5, seed=0),
    )
    scheduler = (
        MedianStoppingRule(
            time_attr="epoch", metric="accuracy", mode="max", grace_period=2, min_samples_required=2
        )
        if stopping == "median"
        else None
    )
    space = {"lr": tune.loguniform(0.0005, 0.05), "width": tune.randint(4, 33)}
    started = time.time()
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            search_alg=search, scheduler=scheduler, num_samples=trials, max_concurrent_trials=2
        ),
        run_config=tune.RunConfig(verbose=0, storage_path=f"/tmp/tune-bench-{os.getpid()}"),
    )
    results = tuner.fit()
    wall = time.time() - started
    spans = []
    for result in results:
        frame = result.metrics_dataframe
        if frame is None or frame.empty:
            continue
        spans.append((float(frame["began"].iloc[0]), float(frame["at"].iloc[-1]), len(frame)))
    best = results.get_best_result(metric="accuracy", mode="max").metrics["accuracy"]
    print(json.dumps({"wall": wall, "spans": spans, "best": best}))
    ray.shutdown()


if __name__ == "__main__":
    main()
