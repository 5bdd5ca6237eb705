"""`loom experiments` as a user types it: create and follow, the trial table with the objective
chart, list, halt, resume and delete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import loom
from tests.conftest import Server
from tests.hpo.trial_code import TRAIN, experiment

pytestmark = pytest.mark.integration


def test_create_follow_show_list_and_delete(server: Server, tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    spec = tmp_path / "experiment.yml"
    spec.write_text(
        experiment(
            "cli-search",
            "tpe",
            max_trials=4,
            parallel=2,
            settings={"n_startup_trials": "2", "random_state": "1"},
        )
    )
    made = loom(server, "experiments", "create", str(spec), str(code), "--follow")
    assert made.returncode == 0, made.stderr
    assert "Created experiment cli-search" in made.stdout
    assert "SUCCEEDED" in made.stdout and "MaxTrialsReached" in made.stdout
    assert "accuracy over trials" in made.stdout  # the chart
    assert "best so far" in made.stdout
    assert "loom deploy hpo-test@best" in made.stdout

    shown = json.loads(loom(server, "experiments", "show", "cli-search", "--json").stdout)
    assert len(shown["trial_list"]) == 4
    table = loom(server, "experiments", "show", "cli-search").stdout
    best = shown["best_trial"]["number"]
    assert f"{best} ★" in table  # the best trial is marked
    for trial in shown["trial_list"]:
        assert trial["job_id"] in table  # each trial's job, whole
    first = shown["trial_list"][0]
    job = loom(server, "show", first["job_id"]).stdout
    assert "trial 0 of experiment cli-search: " in job
    assert f"lr={first['parameters']['lr']}" in job
    listed = loom(server, "experiments", "list").stdout
    assert "cli-search" in listed and "4/4" in listed

    again = loom(server, "experiments", "halt", "cli-search")
    assert again.returncode != 0 and "only a running one halts" in again.stderr
    gone = loom(server, "experiments", "delete", "cli-search")
    assert gone.returncode == 0
    assert "cli-search" not in loom(server, "experiments", "list").stdout
    for trial in shown["trial_list"]:  # its trials' jobs went with it
        assert loom(server, "show", trial["job_id"]).returncode != 0


def test_a_bad_experiment_is_told_with_its_field(server: Server, tmp_path: Path) -> None:
    spec = tmp_path / "experiment.yml"
    spec.write_text(experiment("bad", "annealing"))
    (tmp_path / "code").mkdir()
    result = loom(server, "experiments", "create", str(spec), str(tmp_path / "code"))
    assert result.returncode != 0
    assert result.returncode == 2  # told before the code is sent
    assert "spec.algorithm.algorithmName" in result.stderr
    assert "Traceback" not in result.stderr
