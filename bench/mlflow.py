"""MLflow's API on Loom beside the real MLflow tracking server (3.17.2, one worker), the same
data in each, on SQLite and on PostgreSQL:

  - `log_batch`: metric values a second, 1000 a batch, through MLflow's stock client and as
    plain REST calls (the client's JSON made once: the server alone);
  - `search_runs` over 10,000 runs: all of them a page of 1000 at a time, and a filtered,
    ordered search (`mlflow_data.FILTER`), through the stock client and as REST calls.

Both stores are filled straight into their databases before the searches (the same runs:
bench/mlflow_data.py). Both servers run on this machine at once and are asked in turns, the
order swapped each round, so that the machine's other load falls on both alike; medians.

    python bench/mlflow.py [--runs 10000] [--points 20000] [--rounds 3] [--no-postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/

from ingest import start_loom
from mlflow_data import runs
from peers import table
from sqlalchemy import insert, select
from tools.foreign import python
from tools.mlflow_server import QUIET, MlflowServer
from tools.pgtemp import TempPostgres

from loom.domain.runs import Stage, stored_value
from loom.store import projects as project_rows
from loom.store.db import Database
from loom.store.runs import artifact_uri, new_run_id
from loom.store.tables import Run, RunInfo, RunLatestMetric, RunMetric, User

HERE = Path(__file__).resolve().parent
EXPERIMENT = "bench-search"
RESULTS = HERE / "results"


def probe(uri: str, token: str | None, *args: str) -> dict[str, Any]:
    env = {**os.environ, **QUIET, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    env.pop("MLFLOW_TRACKING_TOKEN", None)
    if token:
        env["MLFLOW_TRACKING_TOKEN"] = token
    done = subprocess.run(
        [
            str(python("mlflow-client")),
            "-P",  # bench/ off sys.path: bench/mlflow.py would stand for MLflow's package
            str(HERE / "mlflow_client_probe.py"),
            args[0],
            uri,
            *args[1:],
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the probe failed ({done.returncode}):\n{done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def fill_mlflow(uri: str, home: Path, count: int) -> float:
    done = subprocess.run(
        [
            str(python("mlflow-server")),
            "-P",
            str(HERE / "mlflow_fill.py"),
            uri,
            "mlflow-artifacts:/",
            EXPERIMENT,
            str(count),
        ],
        env={**os.environ, **QUIET},
        cwd=home,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"filling MLflow's store failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.splitlines()[-1])["seconds"])


def fill_loom(url: str, count: int) -> float:
    """The same runs in Loom's database, as the admin's, in a project of their own."""
    db = Database(url)
    began = time.perf_counter()
    with db.session() as session:
        owner = session.scalars(select(User).where(User.name == "admin")).one()
        project = project_rows.create(session, owner.id, EXPERIMENT, int(time.time() * 1000))
        made: dict[str, list[dict[str, Any]]] = {
            "runs": [],
            "info": [],
            "metrics": [],
            "latest": [],
        }
        for planned in runs(count):
            run_id = new_run_id()
            made["runs"].append(
                {
                    "id": run_id,
                    "project_id": project.id,
                    "owner_id": owner.id,
                    "job_id": None,
                    "name": planned["name"],
                    "user_id": "bench",
                    "status": "FINISHED",
                    "start_time": planned["start"],
                    "end_time": planned["start"] + 60_000,
                    "stage": Stage.ACTIVE.value,
                    "deleted_at": None,
                    "artifact_uri": artifact_uri(project.id, run_id),
                    "inputs": [],
                    "outputs": [],
                }
            )
            for kind, key in (("params", "param"), ("tags", "tag")):
                made["info"] += [
                    {"run_id": run_id, "kind": key, "key": k, "value": v, "set_at": 0.0}
                    for k, v in planned[kind].items()
                ]
            for key, values in planned["metrics"].items():
                rows = [
                    {
                        "run_id": run_id,
                        "key": key,
                        "value": stored_value(v)[0],
                        "is_nan": False,
                        "step": s,
                        "timestamp": planned["start"] + s,
                    }
                    for s, v in enumerate(values)
                ]
                made["metrics"] += rows
                made["latest"].append(rows[-1])
        for model, rows in (
            (Run, made["runs"]),
            (RunInfo, made["info"]),
            (RunMetric, made["metrics"]),
            (RunLatestMetric, made["latest"]),
        ):
            for start in range(0, len(rows), 5000):
                session.execute(insert(model), rows[start : start + 5000])
    db.close()
    return time.perf_counter() - began


def measure(
    backend: str, database: str | None, mlflow_uri: str, count: int, points: int, rounds: int
) -> dict[str, Any]:
    """Both servers, filled alike and up at once, asked in turns (`rounds` times each, the
    order swapped every round): the machine's other load falls on both alike. Medians."""
    home = Path(tempfile.mkdtemp(prefix="loom-bench-mlflow-"))
    print(f"[{backend}] filling both stores with {count} runs ...", file=sys.stderr, flush=True)
    fill_mlflow(mlflow_uri, home, count)
    server, client, loom_home = start_loom(database)
    try:
        fill_loom(database or f"sqlite:///{loom_home / 'loom.db'}", count)
        token = (loom_home / "token").read_text().strip()
        with MlflowServer(home / "mlflow", backend=mlflow_uri) as peer:
            ends = {"mlflow": (peer.url, None), "loom": (client.url, token)}
            taken: dict[str, list[dict[str, Any]]] = {
                f"{s}_{w}": [] for s in ends for w in ("search", "log")
            }
            for n in range(rounds):
                print(f"[{backend}] round {n + 1} of {rounds} ...", file=sys.stderr, flush=True)
                for side in ("mlflow", "loom") if n % 2 == 0 else ("loom", "mlflow"):
                    url, secret = ends[side]
                    taken[f"{side}_search"].append(probe(url, secret, "search", EXPERIMENT))
                    taken[f"{side}_log"].append(probe(url, secret, "log", str(points)))
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=30)
    return {"backend": backend, **{k: medians(v) for k, v in taken.items()}}


def medians(found: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        key: statistics.median(r[key] for r in found) if isinstance(value, float) else value
        for key, value in found[0].items()
    }


def rows_of(found: dict[str, Any]) -> list[list[str]]:
    b = found["backend"]
    log_m, log_l = found["mlflow_log"], found["loom_log"]
    search_m, search_l = found["mlflow_search"], found["loom_search"]
    rows = []
    for label, key in (
        ("log_batch, stock client", "client_points_per_s"),
        ("log_batch, REST", "rest_points_per_s"),
    ):
        m, lo = log_m[key], log_l[key]
        rows.append([b, label, f"{m:,.0f} values/s", f"{lo:,.0f} values/s", f"{lo / m:.1f}x"])
    for label, key in (
        ("search all runs, stock client", "all_pages"),
        ("search all runs, REST", "rest_all_pages"),
        ("filtered + ordered search", "filtered"),
    ):
        m, lo = search_m[key], search_l[key]
        rows.append([b, label, f"{m * 1000:,.0f} ms", f"{lo * 1000:,.0f} ms", f"{m / lo:.1f}x"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="turns each server is asked")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        sqlite = f"sqlite:///{Path(folder) / 'mlflow.db'}"
        results.append(measure("SQLite", None, sqlite, args.runs, args.points, args.rounds))
    if not args.no_postgres:
        with TempPostgres() as pg:
            loom_db = pg.create_database("loom_bench")
            peer_db = pg.create_database("mlflow_bench").replace("+psycopg", "+psycopg2", 1)
            results.append(
                measure("PostgreSQL", loom_db, peer_db, args.runs, args.points, args.rounds)
            )
    rows = [row for found in results for row in rows_of(found)]
    print(
        table(
            f"MLflow's API: Loom beside MLflow {MLFLOW_VERSION} ({args.runs:,} runs, "
            f"{args.points:,} values logged)",
            ["database", "what", "MLflow", "Loom", "Loom's advantage"],
            rows,
        )
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "mlflow.json").write_text(json.dumps(results, indent=2))


MLFLOW_VERSION = "3.17.2"

if __name__ == "__main__":
    main()
