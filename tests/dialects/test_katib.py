"""Katib Experiments in the shapes of Katib's own examples, applied unchanged (Kubernetes trial
specs, Katib's paths) to one real platform: every algorithm and every metrics collector runs
to success with tiny trials and reads back Katib's status; what cannot run is refused when
applied, naming the field."""

from __future__ import annotations

import copy
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder

pytestmark = pytest.mark.integration

CODE = Path(__file__).parent / "katib_code"
IMAGE = "ghcr.io/example/katib-trial:latest"
PARAMETERS = [
    {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.05"}},
    {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": "0.5", "max": "0.9"}},
]
TRIAL_PARAMETERS = [
    {"name": "learningRate", "description": "learning rate", "reference": "lr"},
    {"name": "momentum", "description": "momentum", "reference": "momentum"},
]
ARGS = ["--lr=${trialParameters.learningRate}", "--momentum=${trialParameters.momentum}"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def job(args: list[str], **container: Any) -> dict[str, Any]:
    """A batch Job trial spec running the objective from its image's path."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "training-container",
                            "image": IMAGE,
                            "command": ["python3", "/opt/trial/objective.py", *args],
                            "resources": {"limits": {"cpu": "250m", "memory": "256Mi"}},
                            **container,
                        }
                    ],
                    "restartPolicy": "Never",
                }
            }
        },
    }


def experiment(
    name: str,
    algorithm: str,
    settings: dict[str, str] | None = None,
    *,
    trial_spec: dict[str, Any] | None = None,
    objective: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    found = {
        "objective": objective
        or {"type": "minimize", "goal": 0.001, "objectiveMetricName": "loss"},
        "algorithm": {
            "algorithmName": algorithm,
            "algorithmSettings": [{"name": k, "value": v} for k, v in (settings or {}).items()],
        },
        "parallelTrialCount": 2,
        "maxTrialCount": 2,
        "maxFailedTrialCount": 1,
        "parameters": copy.deepcopy(PARAMETERS),
        "trialTemplate": {
            "primaryContainerName": "training-container",
            "trialParameters": copy.deepcopy(TRIAL_PARAMETERS),
            "trialSpec": trial_spec or job(ARGS),
        },
        **spec,
    }
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": "kubeflow"},
        "spec": found,
    }


def algorithms() -> list[dict[str, Any]]:
    """Every algorithm, each with its Katib settings."""
    one = {"maxTrialCount": 1, "parallelTrialCount": 1}  # the sampler runs: one trial shows it
    made = [
        experiment("random", "random"),
        experiment("tpe", "tpe", **one),
        experiment("multivariate-tpe", "multivariate-tpe", **one),
        experiment("cmaes", "cmaes", {"restart_strategy": "ipop"}, **one),
        experiment("sobol", "sobol", **one),
        experiment(
            "bayesianoptimization", "bayesianoptimization", {"n_initial_points": "2"}, **one
        ),
        experiment(
            "medianstop",
            "random",
            earlyStopping={
                "algorithmName": "medianstop",
                "algorithmSettings": [{"name": "min_trials_required", "value": "1"}],
            },
        ),
    ]
    grid = experiment("grid", "grid")
    for parameter in grid["spec"]["parameters"]:
        parameter["feasibleSpace"]["step"] = "0.2" if parameter["name"] == "momentum" else "0.02"
    hyperband = experiment(
        "hyperband", "hyperband", {"resource_name": "num-epochs", "eta": "2", "r_l": "2"}
    )
    hyperband["spec"]["parameters"].append(
        {"name": "num-epochs", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "1"}}
    )
    hyperband["spec"]["trialTemplate"]["trialParameters"].append(
        {"name": "numberEpochs", "reference": "num-epochs"}
    )
    hyperband["spec"]["trialTemplate"]["trialSpec"] = job(
        [*ARGS, "--epochs=${trialParameters.numberEpochs}"]
    )
    distributions = experiment("distributions", "random", **one)
    distributions["spec"]["parameters"] = [
        {"name": "lr", "parameterType": "double",
         "feasibleSpace": {"min": "0.01", "max": "0.05", "step": "0.01", "distribution": "normal"}},
        {"name": "momentum", "parameterType": "double",
         "feasibleSpace": {"min": "0.5", "max": "0.9", "distribution": "logNormal"}},
    ]  # fmt: skip
    pbt = experiment(
        "pbt",
        "pbt",
        {
            "suggestion_trial_dir": "/var/log/katib/checkpoints/",
            "n_population": "5",
            "truncation_threshold": "0.2",
        },
        objective={"type": "maximize", "goal": 0.999, "objectiveMetricName": "accuracy"},
        trial_spec=job([*ARGS, "--checkpoint=/var/log/katib/checkpoints/"]),
        maxTrialCount=6,
        parallelTrialCount=3,
        resumePolicy="FromVolume",
    )
    for parameter in pbt["spec"]["parameters"]:
        parameter["feasibleSpace"]["step"] = "0.01"
    return [*made, grid, hyperband, distributions, pbt]


def collectors(prometheus_port: int) -> list[dict[str, Any]]:
    """Every metrics collector, each as Katib's examples use it."""
    accuracy = {
        "type": "maximize",
        "goal": 0.999,
        "objectiveMetricName": "accuracy",
        "additionalMetricNames": ["loss"],
    }
    text = experiment(
        "file-text",
        "random",
        maxTrialCount=1,
        parallelTrialCount=1,
        objective=accuracy,
        trial_spec=job([*ARGS, "--log-path=/katib/mnist.log"]),
        metricsCollectorSpec={
            "source": {
                "filter": {"metricsFormat": [r"([\w|-]+)=((-?\d+)(\.\d+)?)"]},
                "fileSystemPath": {"path": "/katib/mnist.log", "kind": "File"},
            },
            "collector": {"kind": "File"},
        },
    )
    json_file = experiment(
        "file-json",
        "random",
        maxTrialCount=1,
        parallelTrialCount=1,
        objective=accuracy,
        trial_spec=job([*ARGS, "--log-path=/katib/mnist.json", "--logger=hypertune"]),
        metricsCollectorSpec={
            "source": {
                "fileSystemPath": {"path": "/katib/mnist.json", "kind": "File", "format": "JSON"}
            },
            "collector": {"kind": "File"},
        },
    )
    events = experiment(
        "tfevent",
        "random",
        maxTrialCount=1,
        parallelTrialCount=1,
        objective=accuracy,
        trial_spec=job([*ARGS, "--tf-dir=/logs-with-summaries/test"]),
        metricsCollectorSpec={
            "source": {
                "fileSystemPath": {"path": "/logs-with-summaries/test", "kind": "Directory"}
            },
            "collector": {"kind": "TensorFlowEvent"},
        },
    )
    prometheus = experiment(
        "prometheus",
        "random",
        objective=accuracy,
        trial_spec=job([*ARGS, f"--prometheus-port={prometheus_port}"]),
        maxTrialCount=1,
        parallelTrialCount=1,
        metricsCollectorSpec={
            "source": {"httpGet": {"path": "/metrics", "port": prometheus_port}},
            "collector": {"kind": "PrometheusMetric"},
        },
    )
    custom = experiment(
        "custom",
        "random",
        maxTrialCount=1,
        parallelTrialCount=1,
        objective=accuracy,
        trial_spec=job([*ARGS, "--log-path=/katib/mnist.log"]),
        metricsCollectorSpec={
            "source": {"fileSystemPath": {"path": "/katib/mnist.log", "kind": "File"}},
            "collector": {
                "kind": "Custom",
                "customCollector": {
                    "image": "example/collector",
                    "name": "custom",
                    "args": ["-m", "accuracy"],
                },
            },
        },
    )
    return [text, json_file, events, prometheus, custom]


def metadata_and_config_map() -> list[dict[str, Any]]:
    """Katib's trial metadata references, and a trial template kept in a ConfigMap."""
    references = experiment(
        "metadata",
        "random",
        trial_spec=job(
            ARGS,
            env=[
                {"name": "TRIAL_NAME", "value": "${trialParameters.trialName}"},
                {"name": "TRIAL_KIND", "value": "${trialParameters.trialKind}"},
                {"name": "TRIAL_API_VERSION", "value": "${trialParameters.trialAPIVersion}"},
                {"name": "TRIAL_LABEL", "value": "${trialParameters.trialLabel}"},
                {"name": "TRIAL_NAMESPACE", "value": "${trialParameters.trialNamespace}"},
            ],
        ),
        maxTrialCount=1,
        parallelTrialCount=1,
    )
    references["spec"]["trialTemplate"]["trialSpec"]["metadata"] = {
        "labels": {"custom-key": "custom-label"}
    }
    references["spec"]["trialTemplate"]["trialParameters"] += [
        {"name": "trialName", "reference": "${trialSpec.Name}"},
        {"name": "trialKind", "reference": "${trialSpec.Kind}"},
        {"name": "trialAPIVersion", "reference": "${trialSpec.APIVersion}"},
        {"name": "trialLabel", "reference": "${trialSpec.Labels[custom-key]}"},
        {"name": "trialNamespace", "reference": "${trialSpec.Namespace}"},
    ]
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "trial-templates", "namespace": "kubeflow"},
        "data": {"defaultTrialTemplate.yaml": yaml.safe_dump(job(ARGS))},
    }
    from_config = experiment("configmap", "random", maxTrialCount=1, parallelTrialCount=1)
    template = from_config["spec"]["trialTemplate"]
    del template["trialSpec"]
    template["configMap"] = {
        "configMapName": "trial-templates",
        "configMapNamespace": "kubeflow",
        "templatePath": "defaultTrialTemplate.yaml",
    }
    return [references, config_map, from_config]


def ended(client: LoomClient, name: str, timeout: float = 240) -> dict[str, Any]:
    """The experiment once it has ended and no trial of it runs."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.object("experiment", name).get("status", {})
        kinds = {c["type"] for c in status.get("conditions", []) if c["status"] == "True"}
        if (
            kinds & {"Succeeded", "Failed"}
            and not status.get("trialsRunning")
            and not status.get("trialsPending")
        ):
            return status
        assert time.monotonic() < deadline, f"experiment {name} never ended: {status}"
        time.sleep(0.5)


def lines(client: LoomClient, experiment_id: str, prefix: str) -> list[str]:
    found = client.experiment(experiment_id)
    return [
        line["line"].removeprefix(prefix)
        for trial in found["trial_list"]
        for line in client.all_logs(trial["job_id"])
        if line["line"].startswith(prefix)
    ]


def test_every_algorithm_and_collector_runs_to_success(tenant: LoomClient) -> None:
    """Fifteen Experiments and a ConfigMap, applied in one request with the trial's code: each
    ends Succeeded (its trials done, its best trial named with Katib's observation), each
    collector reads its metrics from where the trial wrote them under Katib's paths, Hyperband
    gives the budget parameter its bracket's value, PBT's next generation starts from its
    parent's checkpoints, and Katib's metadata references reach the trial."""
    documents = [*algorithms(), *collectors(free_port()), *metadata_and_config_map()]
    applied = tenant.apply(yaml.safe_dump_all(documents), zip_folder(CODE))
    assert all(o["action"] == "created" for o in applied)
    notes = {n["why"] for o in applied for n in o["notes"]}
    assert any("the code's objective.py runs in its place" in n for n in notes)
    assert any("the custom collector is not run" in n for n in notes)
    refs = {o["name"]: o["refs"].get("experiment") for o in applied}
    names = [d["metadata"]["name"] for d in documents if d["kind"] == "Experiment"]
    statuses = {name: ended(tenant, name) for name in names}
    for name, status in statuses.items():
        succeeded = [c for c in status["conditions"] if c["type"] == "Succeeded"]
        assert succeeded and succeeded[0]["status"] == "True", (name, status)
        assert status["trialsSucceeded"] == status["trials"], (name, status)
        best = status["currentOptimalTrial"]
        assert best["bestTrialName"].startswith(name + "-")
        observed = {m["name"] for m in best["observation"]["metrics"]}
        assert observed >= {"loss"} or observed >= {"accuracy"}, (name, best)
    assert statuses["pbt"]["trials"] == 6

    hyperband = tenant.experiment(refs["hyperband"])
    assert {t["parameters"]["num-epochs"] for t in hyperband["trial_list"]} == {"1"}
    resumed = lines(tenant, refs["pbt"], "RESUMED ")
    assert resumed and all(json.loads(r)["trial"].startswith("training-") for r in resumed)
    normal = tenant.experiment(refs["distributions"])
    assert all(0.01 <= float(t["parameters"]["lr"]) <= 0.05 for t in normal["trial_list"])
    (env,) = [json.loads(e) for e in lines(tenant, refs["metadata"], "ENV ")]
    assert env == {
        "TRIAL_NAME": "metadata-0",
        "TRIAL_KIND": "Job",
        "TRIAL_API_VERSION": "batch/v1",
        "TRIAL_LABEL": "custom-label",
        "TRIAL_NAMESPACE": "kubeflow",
    }


def test_what_cannot_run_is_refused_naming_the_field(tenant: LoomClient) -> None:
    """Refused when applied, never accepted and then failed: neural architecture search, a
    container whose image's entrypoint would run (no command), a Custom collector with no file,
    a Hyperband budget that is no parameter, a PBT population under Katib's minimum, a grid
    over a normal distribution, and a ConfigMap template that was never applied."""
    nas = experiment("nas", "random", nasConfig={"graphConfig": {"numLayers": 8}})
    no_command = experiment("entrypoint", "random", trial_spec=job(ARGS))
    container = no_command["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    container["args"] = container.pop("command")[2:]
    custom = experiment(
        "custom",
        "random",
        maxTrialCount=1,
        parallelTrialCount=1,
        metricsCollectorSpec={"collector": {"kind": "Custom", "customCollector": {"image": "x"}}},
    )
    budget = experiment("budget", "hyperband", {"resource_name": "epochs", "r_l": "2"})
    population = experiment(
        "population", "pbt", {"n_population": "3", "truncation_threshold": "0.2"}
    )
    grid = experiment("normal-grid", "grid")
    grid["spec"]["parameters"][0]["feasibleSpace"].update(step="0.01", distribution="normal")
    grid["spec"]["parameters"][1]["feasibleSpace"]["step"] = "0.1"
    missing = metadata_and_config_map()[2]
    cases = {
        "spec.nasConfig": nas,
        "containers[0].command": no_command,
        "spec.metricsCollectorSpec.collector.kind": custom,
        "algorithmSettings[resource_name]": budget,
        "algorithmSettings[n_population]": population,
        "spec.parameters[0].feasibleSpace.distribution": grid,
        "spec.trialTemplate.configMap.configMapName": missing,
    }
    for field, document in cases.items():
        with pytest.raises(ClientError) as refused:
            tenant.apply(yaml.safe_dump(document), zip_folder(CODE))
        assert refused.value.status == 400, refused.value.message
        assert field in refused.value.message, (field, refused.value.message)
    assert tenant.objects("experiments") == []


def test_a_long_running_experiment_goes_on_with_a_larger_budget(tenant: LoomClient) -> None:
    """Applied again with a larger maxTrialCount, an ended LongRunning experiment resumes and
    runs the new trials, as Katib's resume does; any other change is refused."""
    made = experiment(
        "longrunning", "random", resumePolicy="LongRunning", maxTrialCount=1, parallelTrialCount=1
    )
    tenant.apply(yaml.safe_dump(made), zip_folder(CODE))
    assert ended(tenant, "longrunning")["trials"] == 1
    made["spec"]["maxTrialCount"] = 2
    (again,) = tenant.apply(yaml.safe_dump(made), zip_folder(CODE))
    assert again["action"] == "configured"
    assert ended(tenant, "longrunning")["trials"] == 2
    made["spec"]["algorithm"]["algorithmName"] = "tpe"
    with pytest.raises(ClientError) as changed:
        tenant.apply(yaml.safe_dump(made), zip_folder(CODE))
    assert changed.value.status == 409
