"""The in-job KFP executor, run as a job would run it (its values file, RESULT_DIR, MODEL_DIR),
without the platform: placeholders filled in, the component run, its outputs left for the
next task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loom.dialects.kfp.executor import Task, TaskError
from loom.dialects.kfp.translate import KfpDialect
from loom.domain.safe_yaml import safe_load_all
from tests.venvs import kfp_python


def values_of(source: str, *path: str, **parameters: Any) -> dict[str, Any]:
    """A step's values as the driver hands them over: references replaced by `parameters`."""
    document = KfpDialect().translate(
        safe_load_all(source, max_nodes=50_000), None, lambda k, n: None
    )
    found: dict[str, Any] = {"pipeline": document.document}
    for name in path:
        found = next(s for s in found["pipeline"]["steps"] if s["name"] == name)
    values: dict[str, Any] = json.loads(json.dumps(found["values"]))
    values["parameters"].update(parameters)
    return values


def run(values: dict[str, Any], folder: Path, path: str = "") -> tuple[int, dict[str, Any], str]:
    """The executor in a job's folders: its exit code, outputs.json and output."""
    code, results = folder / "code", folder / "results"
    code.mkdir(parents=True, exist_ok=True)
    results.mkdir(parents=True, exist_ok=True)
    (code / "values.json").write_text(json.dumps(values))
    env = {
        **os.environ,
        "STEP_VALUES": str(code / "values.json"),
        "RESULT_DIR": str(results),
        "MODEL_DIR": str(code),
        "TRAINING_ID": "training-test",
        "LOG_DIR": str(folder / "logs"),
        "PATH": f"{path}:{os.environ['PATH']}" if path else os.environ["PATH"],
    }
    done = subprocess.run(
        [sys.executable, "-m", "loom.dialects.kfp.executor"],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    outputs = results / "outputs.json"
    found = json.loads(outputs.read_text()) if outputs.exists() else {}
    return done.returncode, found, done.stdout + done.stderr


def test_a_container_component_gets_its_placeholders_and_leaves_its_outputs(
    compiled: dict[str, str], tmp_path: Path
) -> None:
    """Concat, IfPresent (absent), an output artifact's path and an output parameter's file
    are filled in; the parameter is read back typed and the artifact described."""
    values = values_of(compiled["container"], "write", text="hello")
    code, outputs, said = run(values, tmp_path)
    assert code == 0, said
    assert outputs["parameters"] == {"count": 3}
    (artifact,) = outputs["artifacts"]["out"]
    assert artifact == {
        "name": "out",
        "type": "system.Dataset",
        "uri": "loom://jobs/training-test/artifacts/out",
        "metadata": {},
        "job_id": "training-test",
        "path": "artifacts/out",
    }
    assert (tmp_path / "results" / "artifacts" / "out").read_text() == "hello\n"


def test_placeholders_loom_does_not_know_are_refused_by_name(tmp_path: Path) -> None:
    """A placeholder that is not KFP's is an error naming it, before anything runs."""
    values = {
        "task": "t",
        "pipeline": "p",
        "command": ["echo", "{{$.inputs.nonsense}}"],
        "args": [],
        "parameters": {},
        "types": {},
        "artifacts": {},
        "artifact_types": {},
        "outputs": {"parameters": {}, "artifacts": {}},
    }
    with pytest.raises(TaskError, match="nonsense"):
        Task(values, tmp_path, tmp_path, tmp_path).argv()


def test_a_lightweight_component_runs_with_its_input_artifact_and_metrics(
    compiled: dict[str, str], tmp_path: Path
) -> None:
    """`train` reads the dataset the step's inputs put under inputs/data/0 (with its metadata),
    writes its model and metrics; the model is put where Loom registers it."""
    data = tmp_path / "code" / "inputs" / "data" / "0"
    data.parent.mkdir(parents=True)
    data.write_text("0,1,2")
    descriptor = {
        "name": "data",
        "uri": "loom://jobs/j1/artifacts/data",
        "job_id": "j1",
        "path": "artifacts/data",
        "metadata": {"rows": 3},
        "type": "system.Dataset",
    }
    values = values_of(compiled["features"], "exit-handler-1", "train", scale=2.0)
    values["artifacts"]["data"] = [descriptor]
    code, outputs, said = run(values, tmp_path, str(kfp_python().parent))
    assert code == 0, said
    assert outputs["parameters"] == {"Output": 6.0}
    (metrics,) = outputs["artifacts"]["metrics"]
    assert metrics["metadata"] == {"accuracy": 0.53}
    assert (tmp_path / "results" / "model" / "model").read_text() == "weights 6.0"
    (record,) = (tmp_path / "logs" / "evaluation-metrics.txt").read_text().splitlines()
    assert json.loads(record)["grouplabel"] == "metrics"
    assert json.loads(record)["values"]["accuracy"]["value"] == "0.53"


def test_a_failing_component_fails_the_task_with_its_exit_code(
    compiled: dict[str, str], tmp_path: Path
) -> None:
    """`flaky` raises; the executor exits as it did and leaves no outputs."""
    values = values_of(compiled["features"], "exit-handler-1", "condition-6", "flaky")
    code, outputs, said = run(values, tmp_path, str(kfp_python().parent))
    assert code != 0 and outputs == {}
    assert "failing on purpose" in said
