"""Runs inside MLflow's client venv: times `log_batch` and `search_runs` against one tracking
server, through the stock client and as plain REST calls (the same JSON the client sends, made
once, so that only the server is timed).

    python mlflow_client_probe.py log URI POINTS      # POINTS metric values, 1000 a batch
    python mlflow_client_probe.py search URI EXPERIMENT_NAME

`MLFLOW_TRACKING_TOKEN` is the token, if the server wants one. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import requests
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

# Run with `python -P`: bench/ would shadow MLflow's package with bench/mlflow.py; it comes
# last, for mlflow_data alone.
sys.path.append(str(Path(__file__).resolve().parent))

from mlflow_data import FILTER, ORDER

BATCH = 1000  # MLflow's largest log_batch
REPEATS = 1  # bench/mlflow.py repeats, taking turns with the other server


def session(uri: str) -> requests.Session:
    found = requests.Session()
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        found.headers["Authorization"] = f"Bearer {token}"
    return found


def batches(points: int) -> list[list[Metric]]:
    now = int(time.time() * 1000)
    metrics = [
        Metric("loss" if i % 2 == 0 else "accuracy", 1.0 / (2 + i), now + i // 2, i // 2)
        for i in range(points)
    ]
    return [metrics[i : i + BATCH] for i in range(0, points, BATCH)]


def log(uri: str, points: int) -> dict[str, Any]:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment(f"bench-log-{time.time_ns()}")
    run = client.create_run(experiment).info.run_id
    chunks = batches(points)
    began = time.perf_counter()
    for n, chunk in enumerate(chunks):  # params ride with the first batch, as autolog's do
        client.log_batch(run, metrics=chunk, params=[Param("lr", "0.1")] if n == 0 else [])
    by_client = time.perf_counter() - began
    raw = session(uri)
    bodies = [
        json.dumps(
            {
                "run_id": client.create_run(experiment).info.run_id,
                "metrics": [
                    {"key": m.key, "value": m.value, "timestamp": m.timestamp, "step": m.step}
                    for m in chunk
                ],
            }
        ).encode()
        for chunk in chunks
    ]
    began = time.perf_counter()
    for body in bodies:
        answer = raw.post(
            f"{uri}/api/2.0/mlflow/runs/log-batch",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        answer.raise_for_status()
    by_rest = time.perf_counter() - began
    stored = len(client.get_metric_history(run, "loss")) * 2
    return {
        "points": points,
        "client_points_per_s": points / by_client,
        "rest_points_per_s": points / by_rest,
        "verified": stored == points,
    }


def search(uri: str, experiment_name: str) -> dict[str, Any]:
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(experiment_name).experiment_id
    timings: dict[str, list[float]] = {"all_pages": [], "filtered": [], "rest_all_pages": []}
    found = 0
    raw = session(uri)
    for _ in range(REPEATS):
        began = time.perf_counter()
        token, found = None, 0
        while True:
            page = client.search_runs([experiment], max_results=1000, page_token=token)
            found += len(page)
            token = page.token
            if not token:
                break
        timings["all_pages"].append(time.perf_counter() - began)
        began = time.perf_counter()
        matched = client.search_runs([experiment], FILTER, order_by=ORDER, max_results=1000)
        timings["filtered"].append(time.perf_counter() - began)
        began = time.perf_counter()
        body: dict[str, Any] = {"experiment_ids": [experiment], "max_results": 1000}
        while True:
            answer = raw.post(f"{uri}/api/2.0/mlflow/runs/search", json=body)
            answer.raise_for_status()
            next_token = answer.json().get("next_page_token")
            if not next_token:
                break
            body["page_token"] = next_token
        timings["rest_all_pages"].append(time.perf_counter() - began)
    return {
        "runs": found,
        "matched": len(matched),
        **{k: statistics.median(v) for k, v in timings.items()},
    }


def main() -> None:
    mode, uri = sys.argv[1], sys.argv[2]
    result = log(uri, int(sys.argv[3])) if mode == "log" else search(uri, sys.argv[3])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
