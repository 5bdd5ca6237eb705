"""The objects a job becomes on Kubernetes, validated offline: core objects with
kubernetes-validate (strict, Kubernetes 1.37), TrainJobs against Kubeflow Trainer v2.2's CRD
schema, for every framework, with and without GPUs, with 1 and 4 learners."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import kubernetes_validate
import pytest

from loom.domain.resources import Resources
from loom.kube.objects import JobShape, KubeOptions, host_pattern, object_name, render
from tests.kube import crd

FRAMEWORKS = ["pytorch", "tensorflow", "jax", "horovod"]
VERSION = "1.37.0"
TOKEN = "job-token-that-must-stay-in-the-secret"
PASSWORD = "data-store-password-too"


def shape(framework: str, learners: int, gpus: int) -> JobShape:
    return JobShape(
        job_id="training-abc123def0",
        attempt=2,
        owner="alice@example.com",
        framework=framework,
        learners=learners,
        per_learner=Resources(cpus=1.5, memory=3 * 2**30, gpus=gpus),
        restart_policy="ExitCode",
        max_restarts=3,
    )


def validate(obj: dict[str, Any]) -> None:
    if obj["kind"] == "TrainJob":
        crd.validate(obj)
    else:
        kubernetes_validate.validate(obj, VERSION, strict=True)


def rendered(kind: str, framework: str, learners: int, gpus: int) -> list[dict[str, Any]]:
    specs = [{"job_id": "training-abc123def0", "learner_id": n} for n in range(1, learners + 1)]
    credentials = {"token": TOKEN, "secrets": {"store": {"password": PASSWORD}}}
    return render(
        shape(framework, learners, gpus),
        KubeOptions(image_pull_secrets=("regcred",), node_selector={"pool": "train"}),
        kind,  # type: ignore[arg-type]
        specs=specs,
        credentials=credentials,
    )


@pytest.mark.parametrize("kind", ["job", "trainjob"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("learners", [1, 4])
@pytest.mark.parametrize("gpus", [0, 2])
def test_every_object_validates(kind: str, framework: str, learners: int, gpus: int) -> None:
    objects = rendered(kind, framework, learners, gpus)
    kinds = [obj["kind"] for obj in objects]
    expected = ["Secret", "Service", "NetworkPolicy", "Job"]
    if kind == "trainjob":
        expected = ["Secret", "NetworkPolicy", "TrainJob"]
    assert kinds == expected
    for obj in objects:
        validate(obj)


@pytest.mark.parametrize("kind", ["job", "trainjob"])
def test_credentials_are_only_in_the_secret(kind: str) -> None:
    objects = rendered(kind, "pytorch", 4, 1)
    secret, others = objects[0], objects[1:]
    assert TOKEN in json.dumps(secret)
    assert PASSWORD in json.dumps(secret)
    for obj in others:
        assert TOKEN not in json.dumps(obj)
        assert PASSWORD not in json.dumps(obj)
    container = (
        objects[-1]["spec"]["template"]["spec"]["containers"][0]
        if kind == "job"
        else objects[-1]["spec"]["trainer"]
    )
    (credentials,) = [e for e in container["env"] if e["name"] == "LOOM_POD_CREDENTIALS"]
    assert "value" not in credentials
    assert credentials["valueFrom"]["secretKeyRef"]["name"] == secret["metadata"]["name"]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj["spec"]["template"]["spec"])


def test_the_job_is_an_indexed_gang_never_retried_by_kubernetes() -> None:
    job = rendered("job", "pytorch", 4, 2)[-1]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 4
    assert spec["backoffLimit"] == 0
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "FailJob"
    assert rules[0]["onExitCodes"] == {
        "containerName": "learner",
        "operator": "NotIn",
        "values": [0],
    }
    assert job["metadata"]["annotations"]["loom.dev/restart-policy"] == "ExitCode"
    pod = pod_spec(job)
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["limits"] == {
        "cpu": "1500m",
        "memory": str(3 * 2**30),
        "nvidia.com/gpu": "2",
    }
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert pod["subdomain"] == job["metadata"]["name"]
    # the spec volume holds the specs only, never the credentials key
    specs = next(v for v in pod["volumes"] if v["name"] == "specs")
    assert [item["key"] for item in specs["secret"]["items"]] == [
        f"spec-{n}.json" for n in range(1, 5)
    ]


def test_without_gpus_no_gpu_is_asked_nor_tolerated() -> None:
    pod = pod_spec(rendered("job", "pytorch", 1, 0)[-1])
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"]["limits"]
    assert "tolerations" not in pod


def test_the_trainjob_uses_the_frameworks_runtime_and_its_learners() -> None:
    options = KubeOptions(runtimes={"jax": "jax-distributed", "*": "loom-generic"})
    for framework, runtime in [
        ("pytorch", "torch-distributed"),
        ("jax", "jax-distributed"),
        ("tensorflow", "loom-generic"),
    ]:
        job = render(shape(framework, 4, 1), options, "trainjob")[-1]
        assert job["spec"]["runtimeRef"] == {
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
            "name": runtime,
        }
        assert job["spec"]["trainer"]["numNodes"] == 4
        assert job["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "1"
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    node = patch["replicatedJobs"][0]
    assert node["name"] == "node"
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["name"] == "node"
    assert pod["serviceAccountName"] == "loom-learner"
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_names_and_hostnames_are_dns_labels() -> None:
    long = JobShape("training-" + "x" * 80, 123, "o", "pytorch", 4, Resources(1, 2**30, 0))
    name = object_name(long.job_id, long.attempt)
    assert len(name) <= 52 and name.endswith("-a123")
    for kind in ("job", "trainjob"):
        host = host_pattern(long, kind).replace("{index}", "3").split(".")[0]  # type: ignore[arg-type]
        assert len(host) <= 63, host


def test_a_review_render_holds_no_value() -> None:
    secret = render(shape("pytorch", 2, 0), KubeOptions(), "job")[0]
    assert all(value.startswith("<set at launch") for value in secret["stringData"].values())


def test_storage_and_a_queue_are_asked_of_kubernetes() -> None:
    limited = JobShape(
        "training-abc123def0", 1, "o", "pytorch", 2, Resources(1, 2**30, 0), storage=5 * 2**30
    )
    objects = render(limited, KubeOptions(queue_name="team-a"), "job")
    job = objects[-1]
    validate(job)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert "kueue.x-k8s.io/queue-name" not in objects[0]["metadata"]["labels"]  # the Secret
    pod = pod_spec(job)
    limits = pod["containers"][0]["resources"]["limits"]
    assert limits["ephemeral-storage"] == str(5 * 2**30 + 2**30)
    sizes = {v["name"]: v["emptyDir"].get("sizeLimit") for v in pod["volumes"] if "emptyDir" in v}
    assert sizes == {"scratch": str(5 * 2**30), "tmp": str(2**30), "shm": str(2**29)}
    trainjob = render(limited, KubeOptions(queue_name="team-a"), "trainjob")[-1]
    validate(trainjob)
    assert trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"


def test_the_learner_runs_an_isolated_interpreter() -> None:
    container = pod_spec(rendered("job", "pytorch", 1, 0)[-1])["containers"][0]
    assert container["command"][:2] == ["python", "-I"]  # its scratch is not on its path


@pytest.mark.parametrize("kind", ["job", "trainjob"])
def test_a_manifests_image_is_the_learner_containers(kind: str) -> None:
    """A job naming its image (FfDL's `custom`) runs its learner pods in it; others in Loom's."""
    options = KubeOptions(image="loom-learner:1")
    for image, expected in (
        ("registry.example/team/torch:2", "registry.example/team/torch:2"),
        (None, "loom-learner:1"),
    ):
        made = render(replace(shape("custom", 2, 0), image=image), options, kind)  # type: ignore[arg-type]
        workload = made[-1]
        validate(workload)
        found = json.dumps(workload)
        assert f'"image": "{expected}"' in found, found
