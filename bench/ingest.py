"""Metric ingestion and live-log latency, Loom beside an MLflow tracking server.

In one run on this machine:
  - points/s through Loom's API (`POST /v1/jobs/{id}/metrics`, batched; on SQLite and on a
    PostgreSQL server started by tools/pgtemp.py, fsync on) and through an
    MLflow 3 tracking server with a SQLite backend fed the same points with `log_batch` (its own
    venv, see mlflow_peer.py). A point is one (name, value, step), as MLflow counts them.
    Each side gets an untimed warm-up run, then the median of --runs runs (at least 5; the
    range is printed beside it): one cold run swung MLflow's figure 763 → 1,806 points/s.
  - points/s end to end inside a job: `tracking.log_metrics` → the learner's wrapper → the API.
  - the latency from a learner's `print` to the line reaching a `follow` client, p50/p99.

    python bench/ingest.py [--points 200000] [--mlflow-points 20000] [--runs 5] [--no-mlflow]
                           [--no-postgres]
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

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/

from peers import free_port, table
from tools.pgtemp import TempPostgres

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder

BATCH = 20_000
MIN_RUNS = 5


def start_loom(
    database_url: str | None = None, **env: str
) -> tuple[subprocess.Popen[bytes], LoomClient, Path]:
    """A platform of its own (`LOOM_HOME` a new folder, its output in `server.log` there),
    with these variables (`LOOM_*` settings) added to its environment."""
    home = Path(tempfile.mkdtemp(prefix="loom-bench-"))
    port = free_port()
    environ = {**os.environ, **env, "LOOM_HOME": str(home)}
    if database_url:
        environ["LOOM_DATABASE_URL"] = database_url
    with (home / "server.log").open("wb") as log:  # the child keeps its own copy
        server = subprocess.Popen(
            [sys.executable, "-m", "loom.api", "--port", str(port)],
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with LoomClient(url, None, timeout=1) as probe:
                probe.health()
            break
        except ClientError:
            if server.poll() is not None:
                raise SystemExit("the Loom server exited") from None
            time.sleep(0.1)
    else:
        server.terminate()
        raise SystemExit("the Loom server did not start")
    return server, LoomClient(url, (home / "token").read_text().strip()), home


def job(client: LoomClient, home: Path, script: str) -> str:
    code = home / f"code-{time.monotonic_ns()}"
    code.mkdir()
    (code / "job.py").write_text(script)
    manifest = "name: bench\ncpus: 0.5\nmemory: 256MiB\nframework:\n  name: python\n"
    return client.submit(manifest + "  command: python job.py\n", zip_folder(code))


def wait_done(client: LoomClient, job_id: str) -> None:
    while client.job(job_id)["state"] not in ("COMPLETED", "FAILED", "HALTED"):
        time.sleep(0.05)


def loom_api_rate(client: LoomClient, home: Path, points: int) -> float:
    """Points/s through `POST /v1/jobs/{id}/metrics`, sequential batches of 5,000."""
    job_id = job(client, home, "pass\n")
    wait_done(client, job_id)
    bodies = []
    for start in range(0, points, BATCH):
        batch = [
            {
                "seq": i + 1,
                "group": "train",
                "step": i // 2,
                "time": 1.7e9 + i,
                "values": {("loss" if i % 2 == 0 else "accuracy"): 1.0 / (i + 1)},
            }
            for i in range(start, min(start + BATCH, points))
        ]
        bodies.append(json.dumps({"metrics": batch}).encode())
    headers = {
        "Authorization": client._http.headers["Authorization"],
        "Content-Type": "application/json",
    }
    with httpx.Client(base_url=client.url, headers=headers, timeout=120) as http:
        began = time.perf_counter()
        for body in bodies:
            http.post(f"/v1/jobs/{job_id}/metrics", content=body).raise_for_status()
        seconds = time.perf_counter() - began
    stored = client.metrics(job_id, pos=-1, pagesize=1)["metrics"][0]["seq"]
    assert stored == points, f"stored {stored} of {points}"
    return points / seconds


def loom_sdk_rate(client: LoomClient, home: Path, points: int) -> float:
    """Points/s from `tracking.log_metrics` in a learner to the platform's database, seen by a
    client polling every 10 ms: from the first point visible to the last (the learner's
    start-up is not counted)."""
    script = (
        "from loom import tracking\n"
        f"for i in range({points}):\n"
        "    tracking.log_metrics(step=i // 2, loss=1.0 / (i + 1))\n"
    )
    job_id = job(client, home, script)
    first = None
    while True:
        page = client.metrics(job_id, pos=-1, pagesize=1)["metrics"]
        now = time.perf_counter()
        if page and first is None:
            first = (now, page[0]["seq"])
        if page and page[0]["seq"] == points:
            assert first is not None
            return (points - first[1]) / max(now - first[0], 1e-6)
        time.sleep(0.01)


def follow_latency(client: LoomClient, home: Path, lines: int = 300) -> list[float]:
    """Seconds from a learner's print to the line arriving at a follow client."""
    script = (
        "import time\n"
        f"for i in range({lines}):\n"
        "    print(repr(time.time()), flush=True)\n"
        "    time.sleep(0.01)\n"
    )
    job_id = job(client, home, script)
    delays = []
    for kind, data in client.follow(job_id):
        if kind == "line":
            delays.append(time.time() - float(data["line"]))
    return delays


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(int(q * len(values)), len(values) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--sdk-points", type=int, default=100_000)
    parser.add_argument("--mlflow-points", type=int, default=20_000)
    parser.add_argument("--no-mlflow", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--runs", type=int, default=MIN_RUNS, help=f"timed runs a rate (at least {MIN_RUNS})"
    )
    args = parser.parse_args()
    if args.runs < MIN_RUNS:
        parser.error(f"--runs must be at least {MIN_RUNS}, got {args.runs}")

    api_runs, sdk, delays = measure_loom(None, args)
    api = statistics.median(api_runs)
    rows = [
        ["Loom API, POST /v1/jobs/{id}/metrics (SQLite)", f"{args.points:,}", f"{api:,.0f}",
         spread(api_runs)],
        ["Loom end to end, tracking SDK in a job (SQLite)", f"{args.sdk_points:,}", f"{sdk:,.0f}",
         "1 run"],
    ]  # fmt: skip
    pg_delays: list[float] = []
    if not args.no_postgres:
        with TempPostgres(durable=True) as pg:
            pg_runs, pg_sdk, pg_delays = measure_loom(pg.create_database("ingest"), args)
        pg_api = statistics.median(pg_runs)
        rows += [
            ["Loom API (PostgreSQL)", f"{args.points:,}", f"{pg_api:,.0f}", spread(pg_runs)],
            ["Loom end to end, tracking SDK (PostgreSQL)", f"{args.sdk_points:,}",
             f"{pg_sdk:,.0f}", "1 run"],
        ]  # fmt: skip
    if not args.no_mlflow:
        from mlflow_peer import measure_mlflow

        mlflow = measure_mlflow(points=args.mlflow_points, batch=1000, runs=args.runs)
        rows.append([
            f"{mlflow.get('system', 'MLflow')} log_batch (SQLite)", f"{args.mlflow_points:,}",
            f"{mlflow['points_per_s']:,.0f}", spread(list(mlflow["runs"])),
        ])  # fmt: skip
    header = ["system", "points", "points/s (median)", "runs: min–max"]
    print(table("metric ingestion (points/s), after a warm-up run", header, rows))
    if not args.no_mlflow:
        print(
            f"\nLoom's API ingests {api / mlflow['points_per_s']:.0f}x MLflow's rate on SQLite",
            end="",
        )
        if not args.no_postgres:
            print(f", {pg_api / mlflow['points_per_s']:.0f}x on PostgreSQL", end="")
        print()
    print()
    latency = [latency_row("SQLite", delays)]
    if pg_delays:
        latency.append(latency_row("PostgreSQL", pg_delays))
    header = ["database", "lines", "p50 (ms)", "p99 (ms)", "max (ms)"]
    print(table("print → follow client latency (Loom, SSE)", header, latency))


def spread(rates: list[float]) -> str:
    """How many runs a median is of, and their range."""
    return f"{len(rates)}: {min(rates):,.0f}–{max(rates):,.0f}"


def latency_row(database: str, delays: list[float]) -> list[str]:
    return [
        database,
        str(len(delays)),
        f"{statistics.median(delays) * 1000:.1f}",
        f"{pct(delays, 0.99) * 1000:.1f}",
        f"{max(delays) * 1000:.1f}",
    ]


def measure_loom(
    database_url: str | None, args: argparse.Namespace
) -> tuple[list[float], float, list[float]]:
    """The API's rates (`args.runs` runs after a warm-up run of a tenth the points), the
    tracking SDK's, and print → follow latencies."""
    server, client, home = start_loom(database_url)
    try:
        loom_api_rate(client, home, max(BATCH, args.points // 10))  # the warm-up
        api = [loom_api_rate(client, home, args.points) for _ in range(args.runs)]
        sdk = loom_sdk_rate(client, home, args.sdk_points)
        delays = follow_latency(client, home)
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=30)
    return api, sdk, delays


if __name__ == "__main__":
    main()
