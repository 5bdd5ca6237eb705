"""The pipeline DSL: the spec it writes is the one docs/pipelines.md documents."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from loom.client.pipeline_dsl import Pipeline, Step, item, param, run_ref

DOCS = Path(__file__).resolve().parents[2] / "docs" / "pipelines.md"


def documented_spec() -> dict[str, Any]:
    """The example under "## The spec" in docs/pipelines.md."""
    text = DOCS.read_text()
    block = re.search(r"## The spec\s+```yaml\n(.*?)```", text, re.S)
    assert block is not None
    spec: dict[str, Any] = yaml.safe_load(block.group(1))
    return spec


def documented_pipeline() -> Pipeline:
    p = Pipeline(
        "digits-workflow",
        parameters={"epochs": 3, "widths": [8, 16, 32], "min_accuracy": 0.9},
        description="train three variants, keep the best, serve it",
        timeout_s=7200,
    )
    data = p.python("data", file="make_data.py", args=["--out", "digits.npz"])
    width = item()
    train = p.job(
        "train",
        manifest={
            "name": f"digits-w{width}",
            "framework": {
                "name": "pytorch",
                "command": f"python train.py --width {width} --epochs {param('epochs')}",
            },
            "evaluation_metrics": {"type": "tensorboard"},
        },
        for_each=param("widths"),
        parallelism=2,
        after=[data],
        retry={"limit": 2, "backoff_s": 5},
        timeout_s=600,
    )
    pick = p.select("pick", from_=[train], metric="accuracy", mode="max")
    p.deploy(
        "serve",
        deployment="digits",
        model=pick.output("model"),
        when=f"{pick.output('metrics.accuracy')} >= {param('min_accuracy')}",
    )
    p.shell("predict", command="python predict.py --deployment digits", after=["serve"])
    report = p.shell("report", command=f'echo "run {run_ref("id")} ended"')
    p.on_exit(report)
    p.outputs = {"best": pick.output("model")}
    return p


def test_the_documented_example_is_written_as_documented() -> None:
    assert documented_pipeline().to_dict() == documented_spec()


def test_to_yaml_reads_back_as_the_dict() -> None:
    p = documented_pipeline()
    text = p.to_yaml()
    assert yaml.safe_load(text) == p.to_dict()
    assert text.startswith("name: digits-workflow\n")  # in the spec's order, not sorted
    assert list(p.to_dict()) == [
        *("name", "description", "parameters", "steps", "on_exit", "outputs", "timeout_s")
    ]


def test_references_render_as_the_spec_spells_them() -> None:
    step = Step("pick", "select")
    assert param("epochs") == "${{ parameters.epochs }}"
    assert item() == "${{ item }}"
    assert item("lr") == "${{ item.lr }}"
    assert run_ref("id") == "${{ run.id }}"
    assert step.output("model") == "${{ steps.pick.outputs.model }}"
    assert step.output("metrics.accuracy") == "${{ steps.pick.outputs.metrics.accuracy }}"


def test_a_duplicate_step_name_is_refused_by_name() -> None:
    p = Pipeline("twice")
    p.shell("hello", command="echo hi")
    with pytest.raises(ValueError, match="'hello'"):
        p.python("hello", script="print('hi')")
    assert [s.name for s in p.steps] == ["hello"]


def test_fields_left_none_are_not_in_the_spec() -> None:
    p = Pipeline("lean")
    p.python("small", script="print(1)", memory="2Gb", cache=False)
    assert p.to_dict() == {
        "name": "lean",
        "steps": [
            {
                "name": "small",
                "kind": "python",
                "cache": False,
                "script": "print(1)",
                "memory": "2Gb",
            },
        ],
    }


def test_after_takes_steps_or_names_and_on_exit_a_step() -> None:
    p = Pipeline("order")
    first = p.shell("first", command="true")
    p.shell("second", command="true", after=[first, "first"])
    report = p.shell("report", command="true")
    p.on_exit(report)
    spec = p.to_dict()
    assert spec["steps"][1]["after"] == ["first", "first"]
    assert spec["on_exit"] == "report"


def test_every_kind_with_its_fields() -> None:
    p = Pipeline("kinds")
    p.job("j", manifest_file="manifest.yml", cache_max_age_s=3600)
    p.experiment("e", experiment={"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment"})
    p.select("s", model="digits", metric="loss", mode="min")
    p.deploy("d", deployment="digits", model="digits@3", min_replicas=1, max_replicas=2)
    p.shell("sh", command="ls", for_each=[{"a": 1}], parallelism=1, env={"X": "1"})
    steps = {s["name"]: s for s in p.to_dict()["steps"]}
    assert steps["j"] == {
        "name": "j",
        "kind": "job",
        "cache_max_age_s": 3600,
        "manifest_file": "manifest.yml",
    }
    assert steps["e"]["experiment"]["kind"] == "Experiment"
    assert steps["s"] == {
        "name": "s",
        "kind": "select",
        "model": "digits",
        "metric": "loss",
        "mode": "min",
    }
    assert steps["d"]["min_replicas"] == 1 and steps["d"]["max_replicas"] == 2
    assert steps["sh"]["for_each"] == [{"a": 1}] and steps["sh"]["env"] == {"X": "1"}


def test_one_of_each_pair_of_alternatives() -> None:
    p = Pipeline("either")
    with pytest.raises(ValueError, match="`manifest` or `manifest_file`"):
        p.job("j")
    with pytest.raises(ValueError, match="`file` or `script`"):
        p.python("p", file="a.py", script="print(1)")
    with pytest.raises(ValueError, match="`from` or `model`"):
        p.select("s", metric="accuracy")


def test_the_spec_is_a_copy() -> None:
    widths = [8, 16]
    p = Pipeline("copied", parameters={"widths": widths})
    p.shell("a", command="true", for_each=widths)
    spec = p.to_dict()
    spec["parameters"]["widths"].append(32)
    spec["steps"][0]["for_each"].append(32)
    assert p.to_dict()["parameters"] == {"widths": [8, 16]}
    assert p.to_dict()["steps"][0]["for_each"] == [8, 16]
