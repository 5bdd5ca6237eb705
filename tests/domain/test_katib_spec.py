"""Katib v1beta1 Experiments as Loom reads them, changed one field at a time from Katib's random
example (in `test_katib`): defaults are Katib's; every refusal names its field."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from loom.domain.errors import ManifestError
from loom.domain.katib import parse_experiment, trial_manifest
from tests.domain.test_katib import RANDOM


def document() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(RANDOM)
    return found


def refused(doc: dict[str, Any]) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        parse_experiment(doc)
    return caught.value


def test_defaults_and_strategies() -> None:
    doc = document()
    spec = doc["spec"]
    for key in ("parallelTrialCount", "maxTrialCount", "maxFailedTrialCount"):
        del spec[key]
    spec["objective"] = {
        "type": "minimize",
        "objectiveMetricName": "loss",
        "additionalMetricNames": ["accuracy"],
        "metricStrategies": [{"name": "accuracy", "value": "latest"}],
    }
    found = parse_experiment(doc)
    assert found.parallel_trial_count == 3
    assert found.max_trial_count is None
    assert found.objective.strategies == {"loss": "min", "accuracy": "latest"}


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (
            lambda s: s["parameters"][0]["feasibleSpace"].update(min="0.5"),
            "spec.parameters[0].feasibleSpace.max",
            "less than min",
        ),
        (
            lambda s: s["parameters"][1]["feasibleSpace"].update(min="2.5"),
            "spec.parameters[1].feasibleSpace.min",
            "whole numbers",
        ),
        (
            lambda s: s["parameters"][2]["feasibleSpace"].update(list=[]),
            "spec.parameters[2].feasibleSpace.list",
            "non-empty",
        ),
        (
            lambda s: s["parameters"][2]["feasibleSpace"].update(list=["a", "a"]),
            "spec.parameters[2].feasibleSpace.list",
            "twice",
        ),
        (
            lambda s: s["parameters"][0].update(parameterType="float"),
            "spec.parameters[0].parameterType",
            "not one of",
        ),
        (
            lambda s: s["parameters"][0]["feasibleSpace"].update(
                distribution="logUniform", min="0"
            ),
            "spec.parameters[0].feasibleSpace.min",
            "min > 0",
        ),
        (
            lambda s: s["parameters"].append(dict(s["parameters"][0])),
            "spec.parameters[3].name",
            "named twice",
        ),
        (
            lambda s: s["algorithm"].update(algorithmName="annealing"),
            "spec.algorithm.algorithmName",
            "not one of",
        ),
        (
            lambda s: s["algorithm"].update(algorithmName="grid"),
            "spec.parameters[0].feasibleSpace.step",
            "needs a step",
        ),
        (
            lambda s: s.update(parallelTrialCount=20),
            "spec.parallelTrialCount",
            "more than maxTrialCount",
        ),
        (lambda s: s.update(maxTrialCount=0), "spec.maxTrialCount", "≥ 1"),
        (lambda s: s.update(resumePolicy="Always"), "spec.resumePolicy", "not one of"),
        (lambda s: s["objective"].update(type="max"), "spec.objective.type", "not one of"),
        (
            lambda s: s["objective"].update(additionalMetricNames=["Validation-accuracy"]),
            "spec.objective.additionalMetricNames",
            "objective already",
        ),
        (lambda s: s.update(nasConfig={}), "spec.nasConfig", "refused"),
        (
            lambda s: s.update(maxTrialCounts=3),
            "spec.maxTrialCounts",
            "did you mean `maxTrialCount`",
        ),
        (
            lambda s: s["trialTemplate"].update(configMap={"configMapName": "x"}),
            "spec.trialTemplate.configMap",
            "ConfigMap",
        ),
        (
            lambda s: s["trialTemplate"]["trialParameters"][0].update(reference="learning-rate"),
            "spec.trialTemplate.trialParameters[0].reference",
            "not a parameter",
        ),
        (
            lambda s: s["trialTemplate"]["trialParameters"].pop(),
            "spec.trialTemplate.trialSpec",
            "not declared",
        ),
        (
            lambda s: s["trialTemplate"]["trialParameters"].append(
                {"name": "unused", "reference": "lr"}
            ),
            "spec.trialTemplate.trialParameters",
            "never used",
        ),
        (
            lambda s: s["trialTemplate"]["trialSpec"].update(apiVersion="batch/v1", kind="Job"),
            "spec.trialTemplate.trialSpec",
            "Loom manifest",
        ),
        (
            lambda s: s["trialTemplate"]["trialSpec"].update(learners=0),
            "spec.trialTemplate.trialSpec.learners",
            "with learningRate=",
        ),
        (
            lambda s: s.update(metricsCollectorSpec={"collector": {"kind": "Custom"}}),
            "spec.metricsCollectorSpec.collector.kind",
            "sidecar",
        ),
        (
            lambda s: s.update(metricsCollectorSpec={"collector": {"kind": "File"}}),
            "spec.metricsCollectorSpec.source.fileSystemPath.path",
            "needs a path",
        ),
        (
            lambda s: s.update(
                metricsCollectorSpec={"source": {"filter": {"metricsFormat": ["(\\w+)=1"]}}}
            ),
            "spec.metricsCollectorSpec.source.filter.metricsFormat[0]",
            "two groups",
        ),
    ],
)
def test_each_refusal_names_its_field(change: Any, field: str, words: str) -> None:
    doc = document()
    change(doc["spec"])
    error = refused(doc)
    assert error.field == field, error.message
    assert words in error.message


def test_the_whole_document_is_checked() -> None:
    doc = document()
    doc["apiVersion"] = "kubeflow.org/v1alpha3"
    assert refused(doc).field == "apiVersion"
    doc = document()
    doc["metadata"]["name"] = "no spaces allowed"
    assert refused(doc).field == "metadata.name"
    with pytest.raises(ManifestError) as bad_yaml:
        parse_experiment("spec: [unclosed")
    assert "not valid YAML" in bad_yaml.value.message
    bare = document()["spec"]
    bare["name"] = "bare"
    assert parse_experiment(bare).name == "bare"


def test_metrics_collectors_become_evaluation_metrics() -> None:
    values = {"learningRate": "0.02", "numberLayers": "3", "optimizer": "adam"}
    cases = [
        (
            {"source": {"filter": {"metricsFormat": ["([\\w-]+):\\s*(\\d+\\.\\d+)"]}}},
            {"type": "katib", "filters": ["([\\w-]+):\\s*(\\d+\\.\\d+)"]},
        ),
        (
            {
                "collector": {"kind": "File"},
                "source": {
                    "fileSystemPath": {"path": "/tmp/m.log", "kind": "File", "format": "JSON"}
                },
            },
            {"type": "katib", "in": "/tmp/m.log", "format": "JSON"},
        ),
        (
            {
                "collector": {"kind": "TensorFlowEvent"},
                "source": {"fileSystemPath": {"path": "$LOG_DIR/tb", "kind": "Directory"}},
            },
            {"type": "tensorboard", "in": "$LOG_DIR/tb"},
        ),
    ]
    for collector, expected in cases:
        doc = document()
        doc["spec"]["metricsCollectorSpec"] = collector
        assert trial_manifest(parse_experiment(doc), values)["evaluation_metrics"] == expected
    doc = document()
    doc["spec"]["metricsCollectorSpec"] = {"collector": {"kind": "None"}}
    assert "evaluation_metrics" not in trial_manifest(parse_experiment(doc), values)
    doc = document()
    doc["spec"]["metricsCollectorSpec"] = {"collector": {"kind": "StdOut"}}
    doc["spec"]["trialTemplate"]["trialSpec"]["evaluation_metrics"] = {"type": "logger"}
    assert refused(doc).field == "spec.metricsCollectorSpec"
