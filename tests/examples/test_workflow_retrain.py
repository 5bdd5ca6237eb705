"""The workflow's retrain-on-drift example as its README gives it, on a real platform: `loom
pipelines schedule examples/workflow/retrain.yml examples/ --on-drift digits-workflow`, then a
window of that deployment's requests that drifted starts a run of digits-retrain. The window is
stored as the supervisor stores a detector's (tests/monitoring runs a real detector); the run is
halted once started (its training is the workflow's own, run by the demo's test)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from loom.domain.pipeline import parse_pipeline
from loom.store.db import Database
from loom.store.tables import DriftWindow, User
from tests.conftest import ROOT, Seat, eventually

WORKFLOW = ROOT / "examples" / "workflow"
LOOM = Path(sys.executable).parent / "loom"


def readme_command() -> list[str]:
    """The schedule command of the workflow's README, as words."""
    text = (WORKFLOW / "README.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("loom pipelines schedule"))
    return line.split("#")[0].split()[1:]


def test_the_retrain_pipeline_trains_and_serves_what_the_workflow_serves() -> None:
    """retrain.yml is a valid pipeline that trains the workflow's model again (cache off) and
    rolls the workflow's deployment, public as the workflow made it."""
    retrain = yaml.safe_load((WORKFLOW / "retrain.yml").read_text())
    workflow = yaml.safe_load((WORKFLOW / "pipeline.yml").read_text())
    parse_pipeline(retrain)
    steps = {s["name"]: s for s in retrain["steps"]}
    served = {s["name"]: s for s in workflow["steps"]}["serve"]
    assert steps["train"]["cache"] is False
    assert steps["train"]["manifest"]["model_name"] == "digits-workflow"
    assert steps["serve"]["deployment"] == served["deployment"] == "digits-workflow"
    assert steps["serve"]["public"] is served["public"] is True
    assert readme_command()[:3] == ["pipelines", "schedule", "examples/workflow/retrain.yml"]


@pytest.mark.integration
def test_a_drifted_window_of_the_deployment_starts_the_retraining(seat: Seat) -> None:
    """The README's schedule command waits for drift of digits-workflow; a drifted window
    stored for it starts one run of digits-retrain, and the schedule says why."""
    env = {**os.environ, "LOOM_URL": seat.url, "LOOM_TOKEN": seat.token}
    made = subprocess.run(
        [str(LOOM), *readme_command()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    assert "runs when deployment digits-workflow drifts" in made.stdout
    with seat.client() as loom:
        assert loom.pipeline_runs("digits-retrain") == []
        db = Database(seat.database_url)
        with db.session() as session:
            owner = session.scalars(select(User).where(User.name == seat.name)).one()
            now = time.time()
            session.add(
                DriftWindow(
                    deployment_id="d-example",
                    window_key="w1",
                    owner_id=owner.id,
                    deployment="digits-workflow",
                    model_name="digits-workflow",
                    model_version=1,
                    at=now,
                    since=now - 60,
                    drift=True,
                    score=0.5,
                    p_value=1e-8,
                    size=200,
                    outliers=0,
                    features=[],
                    detail={},
                )
            )
        eventually(lambda: loom.pipeline_runs("digits-retrain"), timeout=60)
        [run] = loom.pipeline_runs("digits-retrain")
        loom.halt_pipeline_run(run["id"])
        [schedule] = loom.pipeline_schedules()
        assert schedule["runs"] == 1 and schedule["last_run_id"] == run["id"]
        assert schedule["triggered_by"] == "deployment digits-workflow drifted (embedding)"
        eventually(lambda: loom.pipeline_run(run["id"], spec=False)["state"] == "HALTED", 60)
