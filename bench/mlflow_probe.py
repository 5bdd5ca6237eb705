"""Runs inside the MLflow peer's venv: times logging metric points to a tracking server.

    python mlflow_probe.py TRACKING_URI POINTS BATCH

A point is one (key, value, step) metric; the keys alternate "loss" and "accuracy" with
step = i // 2, like a training run. Points go out with `log_batch`, BATCH at a time (at most
1000, MLflow's cap). Prints one JSON line: {"points", "seconds", "points_per_s", "verified"}.
"""

from __future__ import annotations

import json
import sys
import time

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

MAX_BATCH = 1000  # the server rejects a log_batch with more metrics than this


def points(count: int) -> list[Metric]:
    """COUNT metric points, "loss" and "accuracy" in turn, two to a step."""
    now = int(time.time() * 1000)
    out = []
    for i in range(count):
        step = i // 2
        if i % 2 == 0:
            out.append(Metric("loss", 1.0 / (1 + step), now + step, step))
        else:
            out.append(Metric("accuracy", 1.0 - 1.0 / (2 + step), now + step, step))
    return out


def main() -> None:
    """Create a run, log the points in batches, time it, check the count, print JSON."""
    uri, count, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batch = max(1, min(batch, MAX_BATCH))
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(f"loom-bench-{time.time_ns()}")
    run_id = client.create_run(experiment_id).info.run_id
    metrics = points(count)
    chunks = [metrics[i : i + batch] for i in range(0, count, batch)]

    began = time.perf_counter()
    for chunk in chunks:
        client.log_batch(run_id, metrics=chunk)
    seconds = time.perf_counter() - began

    client.set_terminated(run_id)
    stored = len(client.get_metric_history(run_id, "loss"))
    result = {
        "points": count,
        "seconds": seconds,
        "points_per_s": count / seconds if seconds > 0 else 0.0,
        "batch": batch,
        "verified": stored == (count + 1) // 2,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
