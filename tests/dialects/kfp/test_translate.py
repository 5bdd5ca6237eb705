"""KFP's IR, as the real SDK compiles our pipelines, translated into Loom's spec: the DAG's
control flow, a task's inputs, environment and policies, and refusals naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from loom.dialects.kfp.translate import KfpDialect
from loom.domain.errors import ManifestError
from loom.domain.pipeline import parse_pipeline
from loom.domain.pipeline_dialects import Translation
from loom.domain.safe_yaml import safe_load_all


def documents(text: str) -> list[Any]:
    return safe_load_all(text, max_nodes=50_000)


def translated(text: str | list[Any], parameters: dict[str, Any] | None = None) -> Translation:
    found = KfpDialect().translate(
        documents(text) if isinstance(text, str) else text, parameters, lambda k, n: None
    )
    parse_pipeline(found.document)  # what the dialect writes, Loom's own checks take
    return found


def step(document: dict[str, Any], *path: str) -> dict[str, Any]:
    """A step by its names down the sub-pipelines (`exit-handler-1`, `train`)."""
    found: dict[str, Any] = {"pipeline": document}
    for name in path:
        found = next(s for s in found["pipeline"]["steps"] if s["name"] == name)
    return found


def test_the_dags_become_sub_pipelines_with_their_control_flow(compiled: dict[str, str]) -> None:
    """ExitHandler, ParallelFor over an upstream list, If/Else, a nested pipeline and `.after`
    become pipeline steps, `for_each`, `when`, `trigger` and `after`."""
    document = translated(compiled["features"]).document
    assert {s["name"] for s in document["steps"]} == {"exit-handler-1", "report"}
    assert step(document, "report")["trigger"] == "all_done"
    assert step(document, "report")["after"] == ["exit-handler-1"]
    status = step(document, "report")["values"]["parameters"]["status"]
    assert status["state"] == "${{ steps.exit-handler-1.state }}"
    loop = step(document, "exit-handler-1", "for-loop-2")
    assert loop["kind"] == "pipeline" and loop["parallelism"] == 2
    assert loop["for_each"] == "${{ steps.make-data.outputs.values.parameters.Output }}"
    collected = step(document, "exit-handler-1", "total")["values"]["parameters"]["xs"]
    assert collected == "${{ steps.for-loop-2.outputs.pipelinechannel--square-Output }}"
    branches = step(document, "exit-handler-1", "condition-branches-3")["pipeline"]["steps"]
    whens = sorted(b["when"] for b in branches)
    assert whens[0].startswith("${{ parameters.pipelinechannel--train-Output }} > 5.0")
    assert whens[1].startswith("not (")
    nested = step(document, "exit-handler-1", "doubled")
    assert (
        nested["after"] == ["train"]
        and nested["parameters"]["v"] == "${{ parameters.pipelinechannel--n }}"
    )
    assert step(document, "exit-handler-1", "doubled", "square")["values"]["parameters"] == {
        "x": "${{ parameters.v }}"
    }
    flaky = step(document, "exit-handler-1", "condition-6", "flaky")
    assert flaky["retry"] == {"limit": 1, "backoff_s": 0.0, "factor": 2.0, "max_backoff_s": 3600.0}


def test_an_artifact_passes_as_a_reference_and_its_files_as_an_input(
    compiled: dict[str, str],
) -> None:
    """A task's artifact input is the producer's descriptor list, in its values and inputs."""
    train = step(translated(compiled["features"]).document, "exit-handler-1", "train")
    reference = "${{ steps.make-data.outputs.values.artifacts.data }}"
    assert train["values"]["artifacts"] == {"data": reference}
    assert train["inputs"] == {"data": reference}
    assert train["values"]["outputs"]["artifacts"]["model"]["schemaTitle"] == "system.Model"
    assert train["model_name"] == "kfp-features-train"


def test_the_preamble_becomes_the_environment_and_kfp_is_installed_alone(
    compiled: dict[str, str],
) -> None:
    """`pip install kfp==… --no-deps` is `pip_no_deps`; the command keeps what runs the
    function, without the install."""
    train = step(translated(compiled["features"]).document, "exit-handler-1", "train")
    assert "kfp==2.17.3" in train["environment"]["pip_no_deps"]
    assert train["values"]["command"][:2] == ["sh", "-ec"]
    assert not any("pip install" in word for word in train["values"]["command"])
    assert train["command"] == "python -m loom.dialects.kfp.executor"


def test_a_container_task_keeps_its_placeholders_and_takes_its_settings(
    compiled: dict[str, str],
) -> None:
    """Resources, env, retry policy and caching options become the step's; the image is said
    to be not pulled."""
    found = translated(compiled["container"])
    write = step(found.document, "write")
    assert write["cpus"] == 0.5 and write["memory"] == "512MiB" and write["gpus"] == 1
    assert write["environment"] == {"env": {"GREETING": "hi"}}
    assert write["retry"] == {"limit": 3, "backoff_s": 2.0, "factor": 3.0, "max_backoff_s": 10.0}
    assert write["cache"] is False
    assert "{{$.outputs.artifacts['out'].path}}" in write["values"]["args"]
    assert any("alpine:3.20 is not pulled" in w for w in found.warnings)


def test_parameters_are_typed_as_the_pipeline_declares_them(compiled: dict[str, str]) -> None:
    """The IR's 3.0 for an int is 3; `-p` text is read by type; an unknown one is refused."""
    found = translated(compiled["features"], {"n": "4", "fail": "true"})
    assert found.document["parameters"] == {"n": 3, "scale": 2.0, "fail": False}
    assert found.parameters == {"n": 4, "fail": True}
    with pytest.raises(ManifestError) as caught:
        translated(compiled["features"], {"n": "many"})
    assert caught.value.field == "parameters.n"
    with pytest.raises(ManifestError) as caught:
        translated(compiled["features"], {"epochs": 3})
    assert caught.value.field == "parameters.epochs"


def test_loops_in_loops_selectors_elif_and_importers(compiled: dict[str, str]) -> None:
    """A nested loop over dicts reads `item.k`; Elif's condition excludes the If's; an
    importer of a loom:// URI is a constant artifact with its job and path."""
    document = translated(compiled["shapes"]).document
    inner = step(document, "for-loop-1", "for-loop-3")
    assert inner["for_each"] == [{"k": 1}, {"k": 2}]
    use = step(document, "for-loop-1", "for-loop-3", "use-3")
    assert (
        use["values"]["parameters"]["x"] == "${{ parameters.pipelinechannel--loop-item-param-2.k }}"
    )
    elif_when = step(document, "condition-branches-4", "condition-6")["when"]
    assert elif_when.startswith("not (") and " and " in elif_when
    read = step(document, "read")
    assert read["inputs"]["data"][0] == {
        "name": "artifact",
        "uri": "loom://jobs/training-abc/artifacts/data",
        "metadata": {"origin": "earlier"},
        "type": "system.Dataset",
        "job_id": "training-abc",
        "path": "artifacts/data",
    }


def ir(text: str) -> list[Any]:
    return copy.deepcopy(documents(text))


def refusal(found: list[Any]) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        KfpDialect().translate(found, None, lambda k, n: None)
    return caught.value


def test_what_loom_cannot_honour_is_refused_naming_the_task_and_field(
    compiled: dict[str, str],
) -> None:
    """A Kubernetes secret, a retry count past 20, an executor that is not a container and a
    task field Loom does not know are refused with their path."""
    with_secret = [
        *ir(compiled["container"]),
        {
            "platforms": {
                "kubernetes": {
                    "deploymentSpec": {
                        "executors": {
                            "exec-write": {
                                "secretAsEnv": [
                                    {
                                        "secretName": "s",
                                        "keyToEnv": [{"secretKey": "k", "envVar": "K"}],
                                    }
                                ]
                            }
                        }
                    }
                }
            }
        },
    ]
    caught = refusal(with_secret)
    assert caught.field == "platforms.kubernetes.deploymentSpec.executors.exec-write.secretAsEnv"
    assert "Secrets" in caught.message

    too_many = ir(compiled["container"])
    too_many[0]["root"]["dag"]["tasks"]["write"]["retryPolicy"]["maxRetryCount"] = 50
    assert refusal(too_many).field == "root.dag.tasks.write.retryPolicy.maxRetryCount"

    custom = ir(compiled["container"])
    custom[0]["deploymentSpec"]["executors"]["exec-write"] = {"customJob": {"x": 1}}
    assert refusal(custom).field == "deploymentSpec.executors.exec-write"

    unknown = ir(compiled["container"])
    unknown[0]["root"]["dag"]["tasks"]["write"]["taskConfig"] = {}
    assert refusal(unknown).field == "root.dag.tasks.write.taskConfig"


def test_kubernetes_settings_that_place_a_pod_are_reported_as_ignored(
    compiled: dict[str, str],
) -> None:
    """A node selector is said in the warnings; a deadline becomes the step's timeout."""
    found = [
        *ir(compiled["container"]),
        {
            "platforms": {
                "kubernetes": {
                    "deploymentSpec": {
                        "executors": {
                            "exec-write": {
                                "nodeSelector": {"labels": {"disk": "ssd"}},
                                "activeDeadlineSeconds": 30,
                            }
                        }
                    }
                }
            }
        },
    ]
    translation = translated(found)
    assert step(translation.document, "write")["timeout_s"] == 30.0
    assert any("nodeSelector: ignored" in w for w in translation.warnings)
