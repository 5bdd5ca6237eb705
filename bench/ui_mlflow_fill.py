"""Runs inside the MLflow peer's venv: one experiment of runs, written into a new tracking store's
SQLite database before its server starts, as bench/ui.py writes Loom's jobs into Loom's.

    python ui_mlflow_fill.py DB_URI ARTIFACT_ROOT PLAN_JSON

PLAN_JSON holds [{"name", "state", "at"}], oldest first (Loom's job states, `at` in seconds).
Each run gets its name, 3 params and 2 metrics (their history and their latest value), through
the store's own table models in one session: the store's `create_run` + `log_batch` take ~35 ms
a run here, 6 minutes for 10,000. Prints one JSON line: {"experiment_id", "runs", "seconds"}.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

from mlflow.entities import ExperimentTag
from mlflow.store.tracking.dbmodels.models import (
    SqlLatestMetric,
    SqlMetric,
    SqlParam,
    SqlRun,
    SqlTag,
)
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

STATUS = {"COMPLETED": "FINISHED", "FAILED": "FAILED", "QUEUED": "SCHEDULED"}
# MLflow 3 opens an experiment on its GenAI pages unless the experiment says it is model training.
KIND = ExperimentTag("mlflow.experimentKind", "custom_model_development")


def sql_run(n: int, planned: dict[str, object], experiment_id: str, root: str) -> SqlRun:
    run_id = uuid.uuid4().hex
    name, state = str(planned["name"]), str(planned["state"])
    start = int(float(planned["at"]) * 1000)  # type: ignore[arg-type]
    end = start + 60_000 if state in ("COMPLETED", "FAILED") else None
    run = SqlRun(
        name=name, run_uuid=run_id, experiment_id=experiment_id, user_id="bench",
        artifact_uri=f"{root}/{run_id}/artifacts", source_type="UNKNOWN", source_name="",
        entry_point_name="", source_version="", status=STATUS.get(state, "RUNNING"),
        start_time=start, end_time=end, lifecycle_stage="active",
    )  # fmt: skip
    run.tags = [SqlTag(key="mlflow.runName", value=name), SqlTag(key="mlflow.user", value="bench")]
    params = {"lr": str(10 ** -(2 + n % 3)), "batch_size": str(32 << n % 3), "epochs": "10"}
    run.params = [SqlParam(key=k, value=v) for k, v in params.items()]
    metrics = {"loss": 1.0 / (2 + n % 7), "accuracy": 0.5 + (n % 50) / 100}
    at = end or start
    run.metrics = [SqlMetric(key=k, value=v, timestamp=at, step=9) for k, v in metrics.items()]
    run.latest_metrics = [
        SqlLatestMetric(key=k, value=v, timestamp=at, step=9) for k, v in metrics.items()
    ]
    return run


def main() -> None:
    uri, root, plan_file = sys.argv[1], sys.argv[2], sys.argv[3]
    plan = json.loads(Path(plan_file).read_text())
    store = SqlAlchemyStore(uri, root)  # creates the tables, as the server would
    experiment_id = store.create_experiment("loom-bench-ui", tags=[KIND])
    location = store.get_experiment(experiment_id).artifact_location
    began = time.perf_counter()
    with store.ManagedSessionMaker() as session:
        for n, planned in enumerate(plan):
            session.add(sql_run(n, planned, experiment_id, location))
    seconds = time.perf_counter() - began
    print(json.dumps({"experiment_id": experiment_id, "runs": len(plan), "seconds": seconds}))


if __name__ == "__main__":
    main()
