"""Katib v1beta1 Experiments read by `loom.domain.katib`: Katib's own examples carry over with a
Loom manifest as the trial spec, Katib's defaults are filled in, every refusal names its field,
and a trial's manifest is the template with its values put in and its metrics collector set."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from loom.domain.errors import ManifestError
from loom.domain.katib import parse_experiment, placeholders, trial_manifest

# Katib's examples/v1beta1/hp-tuning/random.yaml, its Kubernetes Job replaced by a Loom manifest.
RANDOM = """
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata:
  namespace: kubeflow
  name: random
spec:
  objective:
    type: maximize
    goal: 0.99
    objectiveMetricName: Validation-accuracy
    additionalMetricNames:
      - Train-accuracy
  algorithm:
    algorithmName: random
  parallelTrialCount: 3
  maxTrialCount: 12
  maxFailedTrialCount: 3
  parameters:
    - name: lr
      parameterType: double
      feasibleSpace:
        min: "0.01"
        max: "0.03"
    - name: num-layers
      parameterType: int
      feasibleSpace:
        min: "2"
        max: "5"
    - name: optimizer
      parameterType: categorical
      feasibleSpace:
        list:
          - sgd
          - adam
          - ftrl
  trialTemplate:
    primaryContainerName: training-container
    trialParameters:
      - name: learningRate
        description: Learning rate for the training model
        reference: lr
      - name: numberLayers
        description: Number of training model layers
        reference: num-layers
      - name: optimizer
        description: Training model optimizer (sdg, adam or ftrl)
        reference: optimizer
    trialSpec:
      name: mxnet-mnist
      cpus: 1
      memory: 1Gb
      framework:
        name: python
        command: >-
          python3 mnist.py --batch-size=64 --lr=${trialParameters.learningRate}
          --num-layers=${trialParameters.numberLayers} --optimizer=${trialParameters.optimizer}
"""
# The Kubernetes Job of Katib's examples, as a Katib user would bring it.
KATIB_JOB = """
apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      containers:
        - name: training-container
          image: docker.io/kubeflowkatib/mxnet-mnist:v0.15.0
          command: ["python3", "/opt/mxnet-mnist/mnist.py", "--lr=${trialParameters.learningRate}"]
      restartPolicy: Never
"""
VALUES = {"learningRate": "0.02", "numberLayers": "3", "optimizer": "adam"}


def random_doc() -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(RANDOM)
    return found


def refusal(doc: dict[str, Any]) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        parse_experiment(doc)
    return caught.value


def with_collector(collector: dict[str, Any]) -> dict[str, Any]:
    doc = random_doc()
    doc["spec"]["metricsCollectorSpec"] = collector
    return doc


# -- Katib's examples ----------------------------------------------------------------------------
def test_katibs_random_example_carries_over() -> None:
    """Katib's random example parses from YAML: Katib's string bounds become numbers, the list
    stays text, the trial parameters keep their references and descriptions."""
    spec = parse_experiment(RANDOM)
    lr, layers, optimizer = spec.parameters
    assert (spec.name, spec.algorithm.name, spec.algorithm.settings) == ("random", "random", {})
    assert (lr.name, lr.type, lr.min, lr.max, lr.step) == ("lr", "double", 0.01, 0.03, None)
    assert (layers.type, layers.min, layers.max) == ("int", 2.0, 5.0)
    assert (optimizer.type, optimizer.values) == ("categorical", ("sgd", "adam", "ftrl"))
    assert [(t.name, t.reference) for t in spec.trial_parameters] == [
        ("learningRate", "lr"),
        ("numberLayers", "num-layers"),
        ("optimizer", "optimizer"),
    ]
    assert spec.trial_parameters[0].description == "Learning rate for the training model"
    assert (spec.objective.metric, spec.objective.goal) == ("Validation-accuracy", 0.99)
    assert spec.objective.additional == ("Train-accuracy",)
    assert (spec.parallel_trial_count, spec.max_trial_count, spec.max_failed_trial_count) == (
        3,
        12,
        3,
    )
    assert spec.trial_spec["framework"]["name"] == "python"


def test_the_random_example_warns_about_what_a_loom_job_ignores() -> None:
    """primaryContainerName and metadata.namespace are accepted, each said back as a warning
    naming the field and why it is ignored."""
    warnings = parse_experiment(RANDOM).warnings
    container = [w for w in warnings if "primaryContainerName" in w]
    assert container == [
        "spec.trialTemplate.primaryContainerName is ignored: a Loom trial is one job; "
        "its learners are its containers"
    ]
    assert any(w.startswith("metadata.namespace is ignored") for w in warnings)


def test_every_kubernetes_only_template_field_gets_its_own_warning() -> None:
    """The five trial template fields Katib's examples carry for Kubernetes each give one
    warning naming the field."""
    doc = random_doc()
    doc["spec"]["trialTemplate"].update(
        primaryPodLabels={"training.kubeflow.org/job-role": "master"},
        successCondition='status.conditions.#(type=="Complete")#',
        failureCondition='status.conditions.#(type=="Failed")#',
        retain=True,
    )
    warnings = parse_experiment(doc).warnings
    for field in (
        "primaryContainerName",
        "primaryPodLabels",
        "successCondition",
        "failureCondition",
        "retain",
    ):
        assert sum(w.startswith(f"spec.trialTemplate.{field} is ignored:") for w in warnings) == 1


def test_katibs_grid_example_carries_over_with_its_step() -> None:
    """Katib's grid example: the double parameter's step is read, as the grid needs."""
    doc = random_doc()
    doc["spec"]["algorithm"] = {"algorithmName": "grid"}
    doc["spec"]["parameters"][0]["feasibleSpace"] = {"min": "0.001", "max": "0.01", "step": "0.001"}
    lr = parse_experiment(doc).parameters[0]
    assert (lr.min, lr.max, lr.step) == (0.001, 0.01, 0.001)


def test_katibs_median_stop_example_carries_over() -> None:
    """Katib's median-stop example: the early stopping algorithm and its settings, as text."""
    doc = random_doc()
    doc["spec"]["earlyStopping"] = {
        "algorithmName": "medianstop",
        "algorithmSettings": [
            {"name": "min_trials_required", "value": "1"},
            {"name": "start_step", "value": 2},
        ],
    }
    stopping = parse_experiment(doc).early_stopping
    assert stopping is not None
    assert stopping.name == "medianstop"
    assert stopping.settings == {"min_trials_required": "1", "start_step": "2"}


def test_a_bare_spec_with_a_name_is_an_experiment() -> None:
    """The spec mapping alone, with `name`, parses; its fields are named without `spec.`."""
    bare = random_doc()["spec"]
    bare["name"] = "bare"
    assert parse_experiment(bare).name == "bare"
    bare["maxTrialCount"] = 0
    assert refusal(bare).field == "maxTrialCount"


# -- Katib's defaults ----------------------------------------------------------------------------
def test_katibs_defaults_are_filled_in() -> None:
    """Without them: parallelTrialCount 3, no trial limits, resumePolicy Never, the StdOut
    collector, and every metric's strategy the objective's direction."""
    doc = random_doc()
    for key in ("parallelTrialCount", "maxTrialCount", "maxFailedTrialCount"):
        del doc["spec"][key]
    doc["spec"]["objective"]["type"] = "minimize"
    spec = parse_experiment(doc)
    assert (spec.parallel_trial_count, spec.max_trial_count, spec.max_failed_trial_count) == (
        3,
        None,
        None,
    )
    assert spec.resume_policy == "Never"
    assert spec.metrics_collector.kind == "StdOut"
    assert spec.objective.strategies == {"Validation-accuracy": "min", "Train-accuracy": "min"}
    assert spec.parameters[0].distribution is None


def test_the_default_parallelism_never_exceeds_the_trials() -> None:
    """maxTrialCount 2 without a parallelTrialCount runs 2 at once, not Katib's refused 3."""
    doc = random_doc()
    del doc["spec"]["parallelTrialCount"]
    doc["spec"].update(maxTrialCount=2, maxFailedTrialCount=1)
    assert parse_experiment(doc).parallel_trial_count == 2


def test_given_strategies_and_policies_are_kept() -> None:
    """A metric's own strategy stays, the others get the default; Katib's other resume
    policies are taken as written, and its empty one is Never."""
    doc = random_doc()
    doc["spec"]["objective"]["metricStrategies"] = [{"name": "Train-accuracy", "value": "latest"}]
    doc["spec"]["resumePolicy"] = "FromVolume"
    spec = parse_experiment(doc)
    assert spec.objective.strategies == {"Validation-accuracy": "max", "Train-accuracy": "latest"}
    assert spec.resume_policy == "FromVolume"
    doc["spec"]["resumePolicy"] = ""
    assert parse_experiment(doc).resume_policy == "Never"


def test_discrete_values_and_log_distributions() -> None:
    """A discrete list is kept as Katib's text whatever YAML made of it; a logUniform range
    with min > 0 is accepted and its distribution recorded."""
    doc = random_doc()
    doc["spec"]["parameters"][2] = {
        "name": "optimizer",
        "parameterType": "discrete",
        "feasibleSpace": {"list": [1, 2.5, "4"]},
    }
    doc["spec"]["parameters"][0]["feasibleSpace"]["distribution"] = "logUniform"
    spec = parse_experiment(doc)
    assert spec.parameters[2].values == ("1", "2.5", "4")
    assert spec.parameters[0].distribution == "logUniform"


# -- refusals ------------------------------------------------------------------------------------
Change = Callable[[dict[str, Any]], Any]
REFUSALS: list[tuple[str, Change, str, str]] = [
    ("no objective", lambda s: s.pop("objective"), "spec.objective", "is required"),
    ("no algorithm", lambda s: s.pop("algorithm"), "spec.algorithm", "is required"),
    ("no template", lambda s: s.pop("trialTemplate"), "spec.trialTemplate", "is required"),
    (
        "no trial spec",
        lambda s: s["trialTemplate"].pop("trialSpec"),
        "spec.trialTemplate.trialSpec",
        "Loom manifest",
    ),
    ("no parameters", lambda s: s.update(parameters=[]), "spec.parameters", "at least one"),
    (
        "no objective type",
        lambda s: s["objective"].pop("type"),
        "spec.objective.type",
        "is required one of maximize, minimize",
    ),
    (
        "no metric",
        lambda s: s["objective"].pop("objectiveMetricName"),
        "spec.objective.objectiveMetricName",
        "required",
    ),
    (
        "goal not a number",
        lambda s: s["objective"].update(goal="high"),
        "spec.objective.goal",
        "'high'",
    ),
    (
        "additional metric twice",
        lambda s: s["objective"].update(additionalMetricNames=["loss", "loss"]),
        "spec.objective.additionalMetricNames",
        "'loss' is named twice",
    ),
    (
        "strategy for an unknown metric",
        lambda s: s["objective"].update(metricStrategies=[{"name": "loss", "value": "min"}]),
        "spec.objective.metricStrategies[0].name",
        "'loss' is not one of the metrics",
    ),
    (
        "unknown strategy",
        lambda s: s["objective"].update(
            metricStrategies=[{"name": "Train-accuracy", "value": "mean"}]
        ),
        "spec.objective.metricStrategies[0].value",
        "'mean' is not one of min, max, latest",
    ),
    (
        "strategy twice",
        lambda s: s["objective"].update(
            metricStrategies=[
                {"name": "Train-accuracy", "value": "min"},
                {"name": "Train-accuracy", "value": "max"},
            ]
        ),
        "spec.objective.metricStrategies[1].name",
        "set twice",
    ),
    (
        "int bound not whole",
        lambda s: s["parameters"][1]["feasibleSpace"].update(max="5.5"),
        "spec.parameters[1].feasibleSpace.max",
        "whole numbers, got '5.5'",
    ),
    (
        "no max",
        lambda s: s["parameters"][0]["feasibleSpace"].pop("max"),
        "spec.parameters[0].feasibleSpace.max",
        "needs min and max",
    ),
    (
        "bound not a number",
        lambda s: s["parameters"][0]["feasibleSpace"].update(min="small"),
        "spec.parameters[0].feasibleSpace.min",
        "'small'",
    ),
    (
        "step too large",
        lambda s: s["parameters"][0]["feasibleSpace"].update(step="0.05"),
        "spec.parameters[0].feasibleSpace.step",
        "≤ max − min",
    ),
    (
        "step zero",
        lambda s: s["parameters"][0]["feasibleSpace"].update(step="0"),
        "spec.parameters[0].feasibleSpace.step",
        "> 0",
    ),
    (
        "int step not whole",
        lambda s: s["parameters"][1]["feasibleSpace"].update(step="1.5"),
        "spec.parameters[1].feasibleSpace.step",
        "whole",
    ),
    (
        "range with a list",
        lambda s: s["parameters"][0]["feasibleSpace"].update(list=["0.1"]),
        "spec.parameters[0].feasibleSpace.list",
        "not a list",
    ),
    (
        "list with a range",
        lambda s: s["parameters"][2]["feasibleSpace"].update(min="1"),
        "spec.parameters[2].feasibleSpace.min",
        "takes a list",
    ),
    (
        "discrete not numeric",
        lambda s: s["parameters"][2].update(
            parameterType="discrete", feasibleSpace={"list": ["1", "two"]}
        ),
        "spec.parameters[2].feasibleSpace.list[1]",
        "'two'",
    ),
    (
        "log distribution from 0",
        lambda s: s["parameters"][1]["feasibleSpace"].update(min="0", distribution="logNormal"),
        "spec.parameters[1].feasibleSpace.min",
        "logNormal parameter needs min > 0",
    ),
    (
        "unknown distribution",
        lambda s: s["parameters"][0]["feasibleSpace"].update(distribution="gaussian"),
        "spec.parameters[0].feasibleSpace.distribution",
        "not one of uniform, logUniform, normal, logNormal",
    ),
    (
        "distribution outside feasibleSpace",
        lambda s: s["parameters"][0].update(distribution="logUniform"),
        "spec.parameters[0].distribution",
        "goes in feasibleSpace",
    ),
    (
        "no feasible space",
        lambda s: s["parameters"][0].pop("feasibleSpace"),
        "spec.parameters[0].feasibleSpace",
        "is required",
    ),
    (
        "setting twice",
        lambda s: s["algorithm"].update(
            algorithmSettings=[{"name": "random_state", "value": "1"}] * 2
        ),
        "spec.algorithm.algorithmSettings[1].name",
        "'random_state' is set twice",
    ),
    (
        "unknown early stopping",
        lambda s: s.update(earlyStopping={"algorithmName": "random"}),
        "spec.earlyStopping.algorithmName",
        "not one of medianstop",
    ),
    (
        "more failures than trials",
        lambda s: s.update(maxFailedTrialCount=13),
        "spec.maxFailedTrialCount",
        "13 is more than maxTrialCount (12)",
    ),
    (
        "negative failures",
        lambda s: s.update(maxFailedTrialCount=-1),
        "spec.maxFailedTrialCount",
        "≥ 0",
    ),
    (
        "count as text",
        lambda s: s.update(parallelTrialCount="3"),
        "spec.parallelTrialCount",
        "whole number",
    ),
    (
        "brace in a trial parameter",
        lambda s: s["trialTemplate"]["trialParameters"][0].update(name="learning{Rate}"),
        "spec.trialTemplate.trialParameters[0].name",
        "brace",
    ),
    (
        "trial parameter twice",
        lambda s: s["trialTemplate"]["trialParameters"].append(
            {"name": "optimizer", "reference": "lr"}
        ),
        "spec.trialTemplate.trialParameters[3].name",
        "declared twice",
    ),
    (
        "a Kubernetes metadata reference",
        lambda s: s["trialTemplate"]["trialParameters"][0].update(
            reference="${trialSpec.Labels[app]}"
        ),
        "spec.trialTemplate.trialParameters[0].reference",
        "nor the trial's name",
    ),
    (
        "unknown nested field",
        lambda s: s["objective"].update(objectiveMetricNames=["x"]),
        "spec.objective.objectiveMetricNames",
        "did you mean `objectiveMetricName`?",
    ),
    (
        "unknown template field",
        lambda s: s["trialTemplate"].update(trialParams=[]),
        "spec.trialTemplate.trialParams",
        "did you mean `trialParameters`?",
    ),
    (
        "bad manifest field",
        lambda s: s["trialTemplate"]["trialSpec"].update(lerners=2),
        "spec.trialTemplate.trialSpec.lerners",
        "did you mean `learners`?",
    ),
]


@pytest.mark.parametrize(
    ("change", "field", "words"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_each_refusal_names_its_field(change: Change, field: str, words: str) -> None:
    """The error's field is the dotted path, with indices, of what is wrong; its message says
    what and why."""
    doc = random_doc()
    change(doc["spec"])
    error = refusal(doc)
    assert error.field == field, error.message
    assert words in error.message


def test_a_parameter_referred_to_twice_is_refused() -> None:
    """Katib's rule: two trial parameters may not refer to the same parameter."""
    doc = random_doc()
    template = doc["spec"]["trialTemplate"]
    template["trialParameters"].append({"name": "rate", "reference": "lr"})
    template["trialSpec"]["description"] = "lr ${trialParameters.rate}"
    error = refusal(doc)
    assert error.field == "spec.trialTemplate.trialParameters[3].reference"
    assert "'lr' is referred to twice" in error.message


def test_an_undeclared_placeholder_is_named_with_where_it_is() -> None:
    """A placeholder naming no trial parameter: the message gives its path in the trial spec."""
    doc = random_doc()
    doc["spec"]["trialTemplate"]["trialSpec"]["description"] = "${trialParameters.momentum}"
    error = refusal(doc)
    assert error.field == "spec.trialTemplate.trialSpec"
    assert "${trialParameters.momentum} in description is not declared" in error.message


def test_an_unreferenced_parameter_is_said_aloud() -> None:
    """Katib lets a searched parameter go without a trial parameter; Loom warns about it."""
    doc = random_doc()
    doc["spec"]["parameters"].append(
        {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": 0.1, "max": 0.9}}
    )
    warnings = parse_experiment(doc).warnings
    assert "parameter momentum is searched but no trial parameter refers to it" in warnings


def test_the_grid_needs_every_doubles_step() -> None:
    """Katib's grid: a double without a step is refused, the parameter named."""
    doc = random_doc()
    doc["spec"]["algorithm"]["algorithmName"] = "grid"
    error = refusal(doc)
    assert error.field == "spec.parameters[0].feasibleSpace.step"
    assert "double parameter lr" in error.message


def test_the_document_around_the_spec_is_checked() -> None:
    """apiVersion, kind and metadata.name are checked, each error naming its field."""
    cases: list[tuple[Change, str, str]] = [
        (lambda d: d.update(apiVersion="kubeflow.org/v1alpha3"), "apiVersion", "v1beta1"),
        (lambda d: d.update(kind="Trial"), "kind", "kind: Experiment"),
        (lambda d: d.pop("metadata"), "metadata", "is required"),
        (lambda d: d["metadata"].pop("name"), "metadata.name", "got None"),
        (lambda d: d["metadata"].update(name="a/b"), "metadata.name", "'a/b'"),
        (lambda d: d["metadata"].update(name="x" * 201), "metadata.name", "≤ 200"),
        (lambda d: d["metadata"].update(uid="1"), "metadata.uid", "unknown field"),
        (lambda d: d.update(status={}), "status", "unknown field"),
    ]
    for change, field, words in cases:
        doc = random_doc()
        change(doc)
        error = refusal(doc)
        assert (error.field, words in error.message) == (field, True), error.message
    doc = random_doc()
    doc["metadata"]["name"] = "x" * 200
    assert parse_experiment(doc).name == "x" * 200


def test_yaml_that_is_not_an_experiment_is_refused() -> None:
    """Broken YAML, YAML anchors and a YAML list are refused with the reason."""
    for text, words in (
        ("spec: [unclosed", "not valid YAML"),
        ("a: &x 1\nb: *x\n", "anchors"),
        ("- 1\n- 2\n", "a YAML mapping, got list"),
    ):
        with pytest.raises(ManifestError) as caught:
            parse_experiment(text)
        assert words in caught.value.message
    assert parse_experiment(RANDOM.encode()).name == "random"


def test_a_kubernetes_job_as_trial_spec_is_refused() -> None:
    """Katib's Job trial spec is refused at trialSpec, saying a Loom manifest goes there."""
    doc = random_doc()
    doc["spec"]["trialTemplate"]["trialSpec"] = yaml.safe_load(KATIB_JOB)
    error = refusal(doc)
    assert error.field == "spec.trialTemplate.trialSpec"
    assert "Loom manifest (name, framework, learners" in error.message


@pytest.mark.parametrize(
    ("kind", "words"),
    [("Push", "tracking SDK"), ("Custom", "sidecar")],
)
def test_kubernetes_collectors_are_refused(kind: str, words: str) -> None:
    """Katib's sidecar and push collectors are refused at collector.kind, saying why (Custom
    even with its container spec, which would otherwise be an unknown field)."""
    collector: dict[str, Any] = {"kind": kind}
    if kind == "Custom":
        collector["customCollector"] = {"image": "kubeflowkatib/custom-metrics-collector"}
    error = refusal(with_collector({"collector": collector}))
    assert error.field == "spec.metricsCollectorSpec.collector.kind"
    assert words in error.message and "TensorFlowEvent, PrometheusMetric or None" in error.message


COLLECTOR_REFUSALS: list[tuple[dict[str, Any], str, str]] = [
    (
        {"source": {"httpGet": {"path": "/metrics", "port": 8080}}},
        "source.httpGet",
        "only a PrometheusMetric collector",
    ),
    (
        {
            "collector": {"kind": "File"},
            "source": {"fileSystemPath": {"path": "/m", "kind": "Directory"}},
        },
        "source.fileSystemPath.kind",
        "Directory: a File collector reads a file",
    ),
    (
        {
            "collector": {"kind": "TensorFlowEvent"},
            "source": {"fileSystemPath": {"kind": "Directory"}},
        },
        "source.fileSystemPath.path",
        "needs a path",
    ),
    (
        {
            "collector": {"kind": "TensorFlowEvent"},
            "source": {"fileSystemPath": {"path": "/train", "format": "TEXT"}},
        },
        "source.fileSystemPath.format",
        "leave it out",
    ),
    (
        {"source": {"fileSystemPath": {"path": "/m.log"}}},
        "source.fileSystemPath",
        "a StdOut collector reads no file",
    ),
    (
        {
            "collector": {"kind": "File"},
            "source": {
                "fileSystemPath": {"path": "/m.json", "format": "JSON"},
                "filter": {"metricsFormat": ["(\\w+)=(\\d+)"]},
            },
        },
        "source.filter",
        "JSON file's metrics are its keys",
    ),
    (
        {
            "collector": {"kind": "File"},
            "source": {"fileSystemPath": {"path": "/m", "format": "CSV"}},
        },
        "source.fileSystemPath.format",
        "'CSV' is not one of TEXT, JSON",
    ),
    (
        {"source": {"filter": {"metricsFormat": ["(unclosed"]}}},
        "source.filter.metricsFormat[0]",
        "not a regular expression",
    ),
    ({"collector": {"kind": "Stdout"}}, "collector.kind", "'Stdout' is not one of"),
]


@pytest.mark.parametrize(("collector", "field", "words"), COLLECTOR_REFUSALS)
def test_each_collector_refusal_names_its_field(
    collector: dict[str, Any], field: str, words: str
) -> None:
    """Katib's collector rules (File reads a file, TensorFlowEvent a directory with no format,
    JSON takes no filter, filters are regexes) and Loom's (no file for StdOut), each named."""
    error = refusal(with_collector(collector))
    assert error.field == f"spec.metricsCollectorSpec.{field}", error.message
    assert words in error.message


# -- trials --------------------------------------------------------------------------------------
def test_a_trial_gets_its_values_in_every_string() -> None:
    """Placeholders are replaced inside longer strings, in lists and nested mappings; keys and
    the experiment's own template are left as they were."""
    doc = random_doc()
    trial_spec = doc["spec"]["trialTemplate"]["trialSpec"]
    trial_spec["environment"] = {
        "pip": ["optimizer-${trialParameters.optimizer}"],
        "env": {"OPTIMIZER": "${trialParameters.optimizer}"},
    }
    spec = parse_experiment(doc)
    before = copy.deepcopy(spec.trial_spec)
    manifest = trial_manifest(spec, VALUES)
    assert "--lr=0.02 --num-layers=3 --optimizer=adam" in manifest["framework"]["command"]
    assert manifest["environment"] == {"pip": ["optimizer-adam"], "env": {"OPTIMIZER": "adam"}}
    assert spec.trial_spec == before
    assert placeholders(manifest) == set()


def test_a_whole_placeholder_becomes_a_number_when_its_value_is_one() -> None:
    """`cpus: ${…}` gets 2 or 0.5, so numeric manifest fields can be searched; text a number
    would change (`007`) and text that is no number stay text."""
    doc = random_doc()
    trial_spec = doc["spec"]["trialTemplate"]["trialSpec"]
    trial_spec["learners"] = "${trialParameters.numberLayers}"
    trial_spec["cpus"] = "${trialParameters.learningRate}"
    trial_spec["description"] = "${trialParameters.optimizer}"
    spec = parse_experiment(doc)
    found = trial_manifest(spec, {"learningRate": "0.5", "numberLayers": "2", "optimizer": "007"})
    assert (found["learners"], found["cpus"], found["description"]) == (2, 0.5, "007")
    assert trial_manifest(spec, {**VALUES, "learningRate": "1e-1"})["cpus"] == 0.1
    assert trial_manifest(spec, VALUES)["description"] == "adam"


def test_a_bad_trial_names_the_field_and_the_values() -> None:
    """A value that makes the manifest invalid: the manifest's field under trialSpec, and the
    assignments in the message."""
    doc = random_doc()
    doc["spec"]["trialTemplate"]["trialSpec"]["cpus"] = "${trialParameters.learningRate}"
    spec = parse_experiment(doc)
    with pytest.raises(ManifestError) as caught:
        trial_manifest(spec, {**VALUES, "learningRate": "-1"})
    assert caught.value.field == "spec.trialTemplate.trialSpec.cpus"
    assert "learningRate=-1, numberLayers=3, optimizer=adam" in caught.value.message


def test_a_trial_without_a_value_for_a_placeholder_is_refused() -> None:
    """Missing assignments are named, not a KeyError."""
    spec = parse_experiment(RANDOM)
    with pytest.raises(ManifestError) as caught:
        trial_manifest(spec, {"learningRate": "0.02"})
    assert caught.value.field == "spec.trialTemplate.trialParameters"
    assert "numberLayers, optimizer" in caught.value.message


def test_the_template_is_checked_at_both_ends_of_the_space_when_created() -> None:
    """A template valid at the parameters' minimum but not at their maximum fails when the
    experiment is created, not at some later trial."""
    doc = random_doc()
    doc["spec"]["parameters"][1]["feasibleSpace"]["max"] = "300"
    doc["spec"]["trialTemplate"]["trialSpec"]["learners"] = "${trialParameters.numberLayers}"
    error = refusal(doc)
    assert error.field == "spec.trialTemplate.trialSpec.learners"
    assert "numberLayers=300" in error.message


def test_the_trials_name_stands_for_katibs_metadata_references() -> None:
    """`${trialSpec.Name}` is accepted as a reference; the trial's value goes in like any other."""
    doc = random_doc()
    template = doc["spec"]["trialTemplate"]
    template["trialParameters"].append({"name": "trialName", "reference": "${trialSpec.Name}"})
    template["trialSpec"]["description"] = "trial ${trialParameters.trialName}"
    spec = parse_experiment(doc)
    assert spec.trial_parameters[-1].reference == "${trialSpec.Name}"
    manifest = trial_manifest(spec, {**VALUES, "trialName": "random-7"})
    assert manifest["description"] == "trial random-7"


def test_placeholders_lists_the_names_in_strings() -> None:
    """placeholders() finds names in nested strings and lists, never in keys."""
    found = placeholders(
        {
            "a": "${trialParameters.x} and ${trialParameters.y}",
            "b": [{"c": "${trialParameters.z}"}],
            "${trialParameters.key}": 1,
        }
    )
    assert found == {"x", "y", "z"}


COLLECTED: list[tuple[dict[str, Any] | None, dict[str, Any] | None]] = [
    (None, {"type": "katib"}),
    (
        {"source": {"filter": {"metricsFormat": ["([\\w-]+)=([\\d.]+)"]}}},
        {"type": "katib", "filters": ["([\\w-]+)=([\\d.]+)"]},
    ),
    (
        {
            "collector": {"kind": "File"},
            "source": {"fileSystemPath": {"path": "/katib/mnist.log", "kind": "File"}},
        },
        {"type": "katib", "in": "/katib/mnist.log", "format": "TEXT"},
    ),
    (
        {
            "collector": {"kind": "File"},
            "source": {
                "fileSystemPath": {"path": "$RESULT_DIR/m.log"},
                "filter": {
                    "metricsFormat": ["{metricName: ([\\w|-]+), metricValue: ((-?\\d+)(\\.\\d+)?)}"]
                },
            },
        },
        {
            "type": "katib",
            "in": "$RESULT_DIR/m.log",
            "format": "TEXT",
            "filters": ["{metricName: ([\\w|-]+), metricValue: ((-?\\d+)(\\.\\d+)?)}"],
        },
    ),
    (
        {
            "collector": {"kind": "File"},
            "source": {"fileSystemPath": {"path": "/m.json", "format": "JSON"}},
        },
        {"type": "katib", "in": "/m.json", "format": "JSON"},
    ),
    (
        {
            "collector": {"kind": "TensorFlowEvent"},
            "source": {"fileSystemPath": {"path": "/train", "kind": "Directory"}},
        },
        {"type": "tensorboard", "in": "/train"},
    ),
    ({"collector": {"kind": "None"}}, None),
]


@pytest.mark.parametrize(("collector", "expected"), COLLECTED)
def test_the_metrics_collector_becomes_evaluation_metrics(
    collector: dict[str, Any] | None, expected: dict[str, Any] | None
) -> None:
    """StdOut, File (TEXT by default, or JSON), TensorFlowEvent and None, with their filters,
    as the trial manifest's evaluation_metrics (None: none)."""
    doc = random_doc() if collector is None else with_collector(collector)
    manifest = trial_manifest(parse_experiment(doc), VALUES)
    assert manifest.get("evaluation_metrics") == expected


def test_a_trial_specs_own_metrics_win_unless_a_collector_is_given() -> None:
    """The template's evaluation_metrics is kept when the spec names no collector, and
    refused beside an explicit one: two sources of metrics."""
    doc = random_doc()
    own = {"type": "tensorboard", "in": "$LOG_DIR"}
    doc["spec"]["trialTemplate"]["trialSpec"]["evaluation_metrics"] = own
    assert trial_manifest(parse_experiment(doc), VALUES)["evaluation_metrics"] == own
    doc["spec"]["metricsCollectorSpec"] = {"collector": {"kind": "StdOut"}}
    error = refusal(doc)
    assert error.field == "spec.metricsCollectorSpec"
    assert "one source of metrics" in error.message
