"""Runs inside the MLflow peer's venv: times logging metric points to a tracking server.

    python mlflow_probe.py TRACKING_URI POINTS BATCH [RUNS]

A point is one (key, value, step) metric; the keys alternate "loss" and "accuracy" with
step = i // 2, like a training run. Points go out with `log_batch`, BATCH at a time (at most
1000, MLflow's cap), into a run of their own. A first, untimed run warms the server (its
imports, SQLAlchemy's caches, SQLite's pages: the first run's rate swung more than 2x between
two runs of the benchmark); then RUNS (default 5) timed runs. Prints one JSON line:
{"points", "runs": [points/s each], "points_per_s": their median, "verified"}.
"""

from __future__ import annotations

import json
import statistics
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


def one_run(client: MlflowClient, experiment_id: str, chunks: list[list[Metric]]) -> float:
    """Seconds to log the chunks into a new run; the run's count is checked."""
    run_id = client.create_run(experiment_id).info.run_id
    began = time.perf_counter()
    for chunk in chunks:
        client.log_batch(run_id, metrics=chunk)
    seconds = time.perf_counter() - began
    client.set_terminated(run_id)
    stored = len(client.get_metric_history(run_id, "loss"))
    expected = (sum(len(c) for c in chunks) + 1) // 2
    if stored != expected:
        raise SystemExit(f"the server stored {stored} loss points of {expected}")
    return seconds


def main() -> None:
    """A warm-up run, then RUNS timed runs of the points in batches; prints JSON."""
    uri, count, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    batch = max(1, min(batch, MAX_BATCH))
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(f"loom-bench-{time.time_ns()}")
    metrics = points(count)
    chunks = [metrics[i : i + batch] for i in range(0, count, batch)]
    one_run(client, experiment_id, chunks)  # the warm-up
    rates = [count / max(one_run(client, experiment_id, chunks), 1e-9) for _ in range(runs)]
    result = {
        "points": count,
        "runs": rates,
        "points_per_s": statistics.median(rates),
        "batch": batch,
        "verified": True,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
