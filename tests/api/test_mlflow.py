"""Training code written for MLflow runs unchanged: the real `mlflow` client, installed in the
job's environment, logs through the learner's MLflow endpoint to the platform. The run it starts
is a child run of the job's own run, with its params, tags, metrics and artifacts; its metrics
are in the job's charts too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, database_free, make_zip, manifest, wait_for_state

pytestmark = [pytest.mark.integration, database_free]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
SCRIPT = """
import mlflow, pathlib
mlflow.set_experiment("digits")
with mlflow.start_run(run_name="baseline") as run:
    mlflow.log_param("lr", 0.01)
    mlflow.log_params({"layers": 3, "optimizer": "adam"})
    mlflow.set_tag("dataset", "digits-v1")
    for step in range(1, 4):
        mlflow.log_metric("loss", 1.0 / step, step=step)
        mlflow.log_metrics({"test/accuracy": 0.5 + step / 10}, step=step)
    pathlib.Path("notes.txt").write_text("what this run tried")
    mlflow.log_artifact("notes.txt")
    try:
        mlflow.log_param("lr", 0.5)
    except mlflow.exceptions.MlflowException as exc:
        print("refused:", str(exc)[:60])
    print("run", run.info.run_id)
"""


def test_mlflow_client_logs_into_the_job(server: Server, tmp_path: Path) -> None:
    """A run the job's code starts is the job's child run, found with MLflow's API from outside
    the job; its metrics are the job's series, its params and tags its own."""
    text = manifest("python train.py", environment="{pip: [mlflow-skinny==3.17.2]}")
    with server.client() as client:
        job_id = client.submit(text, make_zip({"train.py": SCRIPT}))
        job = wait_for_state(client, job_id, FINAL, timeout=180)
        lines = [x["line"] for x in client.logs(job_id, pagesize=10_000)]
        assert job["state"] == "COMPLETED", (job, lines[-30:])
        shown = client.job(job_id)
        series = client.metrics(job_id, form="series")["series"]
        children = client.runs(filter=f"tags.mlflow.parentRunId = '{job_id}'")["runs"]
        own = client.run(job_id)
    assert any(line.startswith("refused:") and "Changing param values" in line for line in lines), [
        x for x in lines if "refused" in x
    ]
    (child,) = children
    assert (child["name"], child["project"], child["job_id"]) == ("baseline", "digits", job_id)
    assert child["params"] == {"layers": "3", "lr": "0.01", "optimizer": "adam"}
    assert child["tags"]["dataset"] == "digits-v1"
    assert child["metrics"]["loss"] == pytest.approx(1 / 3)
    assert (own["status"], own["is_job"], [c["id"] for c in own["children"]]) == (
        "FINISHED",
        True,
        [child["id"]],
    )
    assert shown["runs"][0]["params"]["lr"] == "0.01"
    assert series["mlflow"]["loss"] == {"steps": [1, 2, 3], "values": [1.0, 0.5, 1 / 3]}
    assert series["test"]["accuracy"]["values"] == pytest.approx([0.6, 0.7, 0.8])
    files = httpx.get(
        f"{server.url}/api/2.0/mlflow/artifacts/list",
        params={"run_id": child["id"]},
        headers={"Authorization": f"Bearer {server.admin_token}"},
        timeout=30,
    ).json()["files"]
    assert [f["path"] for f in files] == ["notes.txt"]

    shown_cli = loom_cli(server, "show", job_id)
    assert "lr" in shown_cli and "0.01" in shown_cli and "digits-v1" in shown_cli
    assert "loss" in loom_cli(server, "metrics", job_id, "--metric", "loss")


def loom_cli(server: Server, *args: str) -> str:
    env = {**os.environ, "LOOM_HOME": str(server.home), "COLUMNS": "100"}
    env.pop("LOOM_URL", None)
    command = [sys.executable, "-m", "loom", *args]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout
