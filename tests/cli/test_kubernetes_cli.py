"""`loom kubernetes render`: the objects of a job, as YAML, with no cluster and no platform."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import yaml
from typer.testing import CliRunner

from loom.cli.main import app
from tests.conftest import ROOT

runner = CliRunner()
DIGITS = ROOT / "examples" / "digits-pytorch" / "manifest.yml"


def test_render_prints_valid_objects_of_the_digits_job() -> None:
    result = runner.invoke(app, ["kubernetes", "render", str(DIGITS), "--image", "reg/learner:1"])
    assert result.exit_code == 0, result.output
    objects = list(yaml.safe_load_all(result.output))
    assert [obj["kind"] for obj in objects] == ["Secret", "Service", "NetworkPolicy", "Job"]
    for obj in objects:
        kubernetes_validate.validate(obj, "1.37.0", strict=True)
    job = objects[-1]
    learners = yaml.safe_load(DIGITS.read_text())["learners"]
    assert job["spec"]["completions"] == learners
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/learner:1"


def test_render_a_trainjob_on_the_runtime_asked() -> None:
    result = runner.invoke(
        app,
        ["kubernetes", "render", str(DIGITS), "--kind", "trainjob"],
        env={"LOOM_KUBE_RUNTIMES": '{"pytorch": "my-torch"}'},
    )
    assert result.exit_code == 0, result.output
    trainjob = list(yaml.safe_load_all(result.output))[-1]
    assert trainjob["kind"] == "TrainJob"
    assert trainjob["spec"]["runtimeRef"]["name"] == "my-torch"


def test_render_names_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\nlearners: zero\nframework: {name: pytorch, command: x}\n")
    result = runner.invoke(app, ["kubernetes", "render", str(bad)])
    assert result.exit_code == 2
    assert "learners" in result.output
    wrong = runner.invoke(app, ["kubernetes", "render", str(DIGITS), "--kind", "pod"])
    assert wrong.exit_code == 2 and "choose job or trainjob" in wrong.output
    missing = runner.invoke(app, ["kubernetes", "render", str(tmp_path / "none.yml")])
    assert missing.exit_code == 2 and "cannot read" in missing.output
