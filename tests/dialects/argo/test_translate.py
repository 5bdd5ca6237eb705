"""Argo Workflows written by hand (in the shape of Argo's examples) translated into Loom's
spec: DAGs, steps, templates of WorkflowTemplates, conditions and fan-outs; refusals naming
the template and field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from loom.dialects.argo.translate import ArgoDialect
from loom.domain.errors import ManifestError
from loom.domain.pipeline import parse_pipeline
from loom.domain.pipeline_dialects import Translation

HERE = Path(__file__).parent


def load(name: str) -> list[Any]:
    return list(yaml.safe_load_all((HERE / name).read_text()))


def translated(
    documents: list[Any], parameters: dict[str, Any] | None = None, stored: Any = None
) -> Translation:
    found = ArgoDialect().translate(
        documents, parameters, lambda kind, name: (stored or {}).get(name)
    )
    parse_pipeline(found.document)  # what the dialect writes, Loom's own checks take
    return found


def step(document: dict[str, Any], *path: str) -> dict[str, Any]:
    found: dict[str, Any] = {"pipeline": document}
    for name in path:
        found = next(s for s in found["pipeline"]["steps"] if s["name"] == name)
    return found


def test_a_dag_becomes_steps_with_their_references_and_fan_outs() -> None:
    """withParam over a script's result, withItems, an output parameter in a condition, an
    artifact as the next step's input, depends and onExit."""
    found = translated(load("dag-workflow.yaml"))
    document = found.document
    assert document["parameters"] == {"count": "3"}
    numbers = step(document, "numbers")
    assert numbers["values"]["source"].startswith(
        "import json\nprint(json.dumps(list(range(1, ${{ parameters.count }}"
    )
    square = step(document, "square")
    assert square["for_each"] == "${{ steps.numbers.outputs.values.result }}"
    assert square["retry"] == {"limit": 2} and square["trigger"] == "none_failed"
    assert step(document, "greet")["for_each"] == ["a", "b"]
    assert step(document, "greet")["values"]["command"] == ["echo", "hello ${{ item }}"]
    read = step(document, "read")
    assert read["inputs"] == {
        "data": {"job_id": "${{ steps.write.outputs.job_id }}", "path": "artifacts/data"}
    }
    assert read["values"]["inputs"] == [{"name": "data", "path": "/tmp/in.txt"}]
    big = step(document, "big")
    assert big["trigger"] == "all_done" and big["after"] == ["read", "square"]
    assert "${{ steps.write.outputs.values.parameters.size }} > 2" in big["when"]
    assert document["on_exit"] == "on-exit-goodbye"
    assert (
        step(document, "on-exit-goodbye")["values"]["command"][1]
        == "workflow ended ${{ run.state }}"
    )
    assert any("alpine:3.20 is not pulled" in w for w in found.warnings)


def test_steps_groups_templates_of_a_workflow_template_and_a_dag_template() -> None:
    """Each group waits for the one before; a templateRef into the file's WorkflowTemplate is
    run; a DAG template is a sub-pipeline with its output; a bare word is quoted in `when`."""
    document = translated(load("steps-workflow.yaml")).document
    assert document["name"] == "coin" and document["timeout_s"] == 600
    won = step(document, "won")
    assert (
        won["kind"] == "pipeline" and won["after"] == ["flip"] and won["trigger"] == "none_failed"
    )
    assert won["when"] == "${{ steps.flip.outputs.values.result }} == 'heads'"
    assert won["pipeline"]["outputs"] == {"said": "${{ steps.say.outputs.values.result }}"}
    assert won["parameters"]["word"] == "won with ${{ steps.flip.outputs.values.result }}"
    assert won["parameters"]["workflow--side"] == "${{ parameters.side }}"
    say = step(document, "won", "say")
    assert say["values"]["source"] == 'print("${{ parameters.word }}".upper())\n'
    after = step(document, "after")
    assert sorted(after["after"]) == ["lost", "won"]
    assert after["values"]["source"] == 'print("${{ steps.won.outputs.said }}".upper())\n'


def test_a_workflow_template_stored_before_is_found_by_reference() -> None:
    """workflowTemplateRef names a WorkflowTemplate the owner stored; the workflow's own
    arguments are taken over the template's."""
    template, workflow = load("steps-workflow.yaml")
    stored = {"shared": template}
    library = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "WorkflowTemplate",
        "metadata": {"name": "coin-template"},
        "spec": copy.deepcopy(workflow["spec"]),
    }
    running = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "from-template-"},
        "spec": {
            "workflowTemplateRef": {"name": "coin-template"},
            "arguments": {"parameters": [{"name": "side", "value": "tails"}]},
        },
    }
    document = translated([running], None, {**stored, "coin-template": library}).document
    assert document["name"] == "from-template" and document["parameters"] == {"side": "tails"}


def test_a_cron_workflow_brings_its_schedule() -> None:
    """A CronWorkflow is its workflowSpec, with its cron and whether it is suspended."""
    _template, workflow = load("steps-workflow.yaml")
    cron = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "CronWorkflow",
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "0 3 * * *",
            "suspend": True,
            "concurrencyPolicy": "Forbid",
            "workflowSpec": workflow["spec"],
        },
    }
    found = translated([_template, cron])
    assert found.schedule == {"cron": "0 3 * * *", "enabled": False}
    assert any("concurrencyPolicy" in w for w in found.warnings)


def refusal(documents: list[Any]) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        ArgoDialect().translate(documents, None, lambda kind, name: None)
    return caught.value


def test_what_loom_cannot_honour_is_refused_naming_the_template_and_field() -> None:
    """Volumes, a resource template, an S3 artifact, Argo's expression syntax, a path outside
    the sandbox's writable places and a variable with no value are each refused by field."""
    (workflow,) = [d for d in load("dag-workflow.yaml")]

    def changed(edit: Any) -> ManifestError:
        document = copy.deepcopy(workflow)
        edit(document)
        return refusal([document])

    templates = {t["name"]: t for t in workflow["spec"]["templates"]}
    index = {name: i for i, name in enumerate(templates)}

    def template(document: dict[str, Any], name: str) -> dict[str, Any]:
        return document["spec"]["templates"][index[name]]

    assert changed(lambda d: d["spec"].update(volumes=[{"name": "v"}])).field == "spec.volumes"
    resource = changed(lambda d: template(d, "echo").update(resource={"action": "create"}))
    assert resource.field == "templates.echo.resource"
    s3 = changed(
        lambda d: template(d, "read-file")["inputs"]["artifacts"][0].update(s3={"key": "k"})
    )
    assert s3.field == "templates.read-file.inputs.artifacts[0].s3"
    expression = changed(
        lambda d: template(d, "echo")["container"].update(
            command=["echo", "{{=sprig.upper(inputs.parameters.message)}}"]
        )
    )
    assert expression.field == "templates.echo.container.command"
    outside = changed(
        lambda d: template(d, "write-file")["outputs"]["artifacts"][0].update(path="/data/out")
    )
    assert outside.field == "templates.write-file.outputs.artifacts[0].path"
    unknown = changed(
        lambda d: template(d, "echo")["container"].update(command=["echo", "{{pod.name}}"])
    )
    assert "pod.name" in unknown.message
    missing = changed(lambda d: d["spec"]["arguments"]["parameters"][0].pop("value"))
    assert missing.field == "parameters.count"


def test_a_recursive_template_is_refused_not_followed_for_ever() -> None:
    """Argo's coin-flip recursion (a steps template that calls itself) has no fixed shape: it is
    refused naming the step that calls it again."""
    recursive = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "again"},
        "spec": {
            "entrypoint": "flip",
            "templates": [
                {"name": "flip", "steps": [[{"name": "again", "template": "flip"}]]},
            ],
        },
    }
    caught = refusal([recursive])
    assert "calls itself" in caught.message
    assert caught.field == "templates.flip.steps[0][0]"
