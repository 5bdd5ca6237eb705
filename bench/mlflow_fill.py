"""Runs inside MLflow's server venv: `bench/mlflow_data.py`'s runs written into a new tracking
store's database through its own table models, before its server starts (its `create_run` and
`log_batch` take ~35 ms a run here: 6 minutes for 10,000).

    python mlflow_fill.py DB_URI ARTIFACT_ROOT EXPERIMENT COUNT

Prints one JSON line: {"experiment_id", "runs", "seconds"}.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

from mlflow.store.tracking.dbmodels.models import (
    SqlLatestMetric,
    SqlMetric,
    SqlParam,
    SqlRun,
    SqlTag,
)
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

# Run with `python -P`: bench/ would shadow MLflow's package with bench/mlflow.py; it comes
# last, for mlflow_data alone.
sys.path.append(str(Path(__file__).resolve().parent))

from mlflow_data import runs


def sql_run(planned: dict[str, object], experiment_id: str, root: str) -> SqlRun:
    run_id = uuid.uuid4().hex
    start = int(planned["start"])  # type: ignore[call-overload]
    run = SqlRun(
        name=planned["name"],
        run_uuid=run_id,
        experiment_id=experiment_id,
        user_id="bench",
        artifact_uri=f"{root}/{run_id}/artifacts",
        source_type="UNKNOWN",
        source_name="",
        entry_point_name="",
        source_version="",
        status="FINISHED",
        start_time=start,
        end_time=start + 60_000,
        lifecycle_stage="active",
    )
    run.params = [SqlParam(key=k, value=v) for k, v in planned["params"].items()]  # type: ignore[attr-defined]
    run.tags = [SqlTag(key=k, value=v) for k, v in planned["tags"].items()]  # type: ignore[attr-defined]
    run.metrics, run.latest_metrics = [], []
    for key, values in planned["metrics"].items():  # type: ignore[attr-defined]
        run.metrics += [
            SqlMetric(key=key, value=v, timestamp=start + s, step=s) for s, v in enumerate(values)
        ]
        last = len(values) - 1
        run.latest_metrics.append(
            SqlLatestMetric(key=key, value=values[last], timestamp=start + last, step=last)
        )
    return run


def main() -> None:
    uri, root, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = SqlAlchemyStore(uri, root)  # creates the tables, as the server would
    experiment_id = store.create_experiment(name)
    location = store.get_experiment(experiment_id).artifact_location
    began = time.perf_counter()
    with store.ManagedSessionMaker() as session:
        for planned in runs(count):
            session.add(sql_run(planned, experiment_id, location))
    seconds = time.perf_counter() - began
    print(json.dumps({"experiment_id": experiment_id, "runs": count, "seconds": seconds}))


if __name__ == "__main__":
    main()
