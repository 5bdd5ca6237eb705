"""The Kubernetes launcher's calls, over an in-memory API (what it creates, patches and deletes,
and in which order); its reconcile rules are in test_kube_states, the pods run for real (as local
processes) in test_kubernetes_pods."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loom.domain.errors import LaunchError
from loom.domain.resources import Resources
from loom.kube.objects import KubeOptions
from loom.launchers.base import LearnerLaunch, Liveness
from loom.launchers.kubernetes import UNKNOWN_CAPACITY, KubernetesLauncher, shape_of

JOB = "training-abc123def0"


class MemoryApi:
    def __init__(self, *, trainjobs: bool = False) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, ...]] = []
        self.trainjobs = trainjobs
        self.pods: list[dict[str, Any]] = []
        self.node_list: list[dict[str, Any]] | None = None
        self.broken = False
        self.event_list: list[dict[str, Any]] = []

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        key = (obj["kind"], obj["metadata"]["name"])
        self.calls.append(("create", *key))
        if key in self.objects:
            raise LaunchError(f"Kubernetes could not create {key[1]} (409): AlreadyExists")
        made = copy.deepcopy(obj)
        made["metadata"]["uid"] = f"uid-{len(self.calls)}"
        self.objects[key] = made
        return made

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        if self.broken:
            raise LaunchError("Kubernetes could not read it: connection refused")
        return self.objects.get((kind, name))

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any]) -> None:
        self.calls.append(("patch", kind, name))
        target = self.objects[(kind, name)]
        for key, value in body.items():
            target.setdefault(key, {}).update(value)

    def delete(self, api_version: str, kind: str, name: str, grace_s: float | None = None) -> None:
        self.calls.append(("delete", kind, name, str(grace_s)))
        self.objects.pop((kind, name), None)

    def listing(self, api_version: str, kind: str, selector: str) -> list[dict[str, Any]]:
        self.calls.append(("list", kind, selector))
        return copy.deepcopy(self.pods)

    def served(self, api_version: str, kind: str) -> bool:
        return self.trainjobs

    def nodes(self) -> list[dict[str, Any]] | None:
        return self.node_list

    def events(self, name: str) -> list[dict[str, Any]]:
        self.calls.append(("events", name))
        return [e for e in self.event_list if e["involvedObject"]["name"] == name]


def launches(learners: int = 2, attempt: int = 1) -> list[LearnerLaunch]:
    made = []
    for n in range(1, learners + 1):
        spec = {
            "job_id": JOB,
            "attempt": attempt,
            "learner_id": n,
            "owner": "alice",
            "cpus": 2,
            "memory_limit": 2**30,
            "env": {"GPU_COUNT": "1"},
            "gang": {"framework": "pytorch"},
            "restart": {"policy": "OnFailure", "max_restarts": 2},
        }
        handle = f"/home/jobs/{JOB}/learners/learner-{n}/attempt-{attempt}"
        made.append(LearnerLaunch(handle, spec, "the-token", {"s3": {"secret": "x"}}))
    return made


def pod(index: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"p{index}",
            "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
            "creationTimestamp": "2026-11-25T10:00:00Z",
        },
        "status": {"phase": phase},
    }


def test_the_shape_comes_from_the_specs() -> None:
    shape = shape_of(launches(4))
    assert (shape.learners, shape.owner, shape.restart_policy) == (4, "alice", "OnFailure")
    assert shape.per_learner == Resources(cpus=2.0, memory=2**30, gpus=1)


def test_launch_creates_the_parts_then_the_job_which_owns_them() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    launcher.launch(launches())
    name = f"loom-{JOB}-a1"
    created = [call[1] for call in api.calls if call[0] == "create"]
    assert created == ["Secret", "Service", "NetworkPolicy", "Job"]
    job_uid = api.objects[("Job", name)]["metadata"]["uid"]
    for kind in ("Secret", "Service", "NetworkPolicy"):
        (owner,) = api.objects[(kind, name)]["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("Job", job_uid)
    secret = api.objects[("Secret", name)]["stringData"]
    assert '"the-token"' in secret["credentials"]
    assert set(secret) == {"credentials", "spec-1.json", "spec-2.json"}


def test_a_cluster_with_trainer_gets_trainjobs_unless_told_otherwise() -> None:
    api = MemoryApi(trainjobs=True)
    KubernetesLauncher(api, KubeOptions()).launch(launches())
    assert ("TrainJob", f"loom-{JOB}-a1") in api.objects
    plain = MemoryApi(trainjobs=True)
    KubernetesLauncher(plain, KubeOptions(), kind="job").launch(launches())
    assert ("Job", f"loom-{JOB}-a1") in plain.objects


def test_a_launch_left_half_done_is_replaced() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    ours = {"loom.job-id": JOB, "loom.attempt": "1"}
    api.objects[("Secret", f"loom-{JOB}-a1")] = {"metadata": {"name": "old", "labels": ours}}
    launcher.launch(launches())
    assert ("delete", "Secret", f"loom-{JOB}-a1", "0") in api.calls
    assert api.objects[("Secret", f"loom-{JOB}-a1")]["stringData"]["credentials"]


def test_an_object_of_that_name_that_is_not_the_jobs_is_left_alone() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    theirs = {"metadata": {"name": "x", "labels": {"app": "someone-elses"}}}
    api.objects[("Secret", f"loom-{JOB}-a1")] = theirs
    with pytest.raises(LaunchError, match="is not this job's: Loom leaves it alone"):
        launcher.launch(launches())
    assert api.objects[("Secret", f"loom-{JOB}-a1")] is theirs


def test_status_reads_the_attempts_pods_once_for_all_its_learners() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    launcher.launch(launches())
    api.pods = [pod(0), pod(1, "Pending")]
    first, second = (launcher.status(launch.handle) for launch in launches())
    assert first.liveness == Liveness.RUNNING and first.report is None
    assert second.report is not None and second.report["state"] == "PENDING"
    assert sum(1 for call in api.calls if call[0] == "list") == 1


def test_a_job_without_pods_is_explained_by_its_events() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    launcher.launch(launches())
    name = f"loom-{JOB}-a1"
    api.event_list = [
        {
            "involvedObject": {"kind": "Job", "name": name},
            "type": "Warning",
            "reason": "FailedCreate",
            "message": 'Error creating: pods is forbidden: serviceaccount "loom-learner" not found',
            "lastTimestamp": "2026-11-25T10:00:02Z",
        }
    ]
    found = launcher.status(launches()[0].handle)
    assert found.report is not None
    assert 'serviceaccount "loom-learner" not found' in found.report["message"]
    assert ("events", name) in api.calls
    api.pods = [pod(0), pod(1)]
    launcher._forget(JOB, 1)
    api.calls.clear()
    launcher.status(launches()[0].handle)
    assert not [call for call in api.calls if call[0] == "events"]  # pods there: not asked


def test_an_unreachable_api_ends_nobody() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    api.broken = True
    assert launcher.status(launches()[0].handle).liveness == Liveness.RUNNING


def test_terminate_suspends_the_job_and_deletes_that_pod_with_its_grace() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    launcher.launch(launches())
    api.pods = [pod(0), pod(1)]
    launcher.terminate(launches()[1].handle, 7.0)
    name = f"loom-{JOB}-a1"
    assert api.objects[("Job", name)]["spec"]["suspend"] is True
    assert api.objects[("Job", name)]["metadata"]["annotations"]["loom.dev/halted"] == "true"
    assert ("delete", "Pod", "p1", "7.0") in api.calls
    assert ("delete", "Pod", "p0", "7.0") not in api.calls


def test_an_attempt_launched_as_a_job_is_found_after_trainer_is_installed() -> None:
    api = MemoryApi()
    KubernetesLauncher(api, KubeOptions()).launch(launches())
    api.trainjobs = True  # the platform restarts on a cluster that now has Trainer v2
    later = KubernetesLauncher(api, KubeOptions())
    api.pods = [pod(0), pod(1)]
    assert later.kind() == "trainjob"
    assert later.status(launches()[0].handle).liveness == Liveness.RUNNING
    later.release([launch.handle for launch in launches()])
    assert api.objects == {}


def test_release_deletes_the_job_and_its_parts() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    launcher.launch(launches())
    launcher.release([launch.handle for launch in launches()])
    assert api.objects == {}
    assert launcher.status(launches()[0].handle).liveness == Liveness.NOT_STARTED


def test_capacity_is_the_ready_nodes_allocatable() -> None:
    api = MemoryApi()
    launcher = KubernetesLauncher(api, KubeOptions())
    assert launcher.capacity() == UNKNOWN_CAPACITY  # nodes not readable: Kubernetes queues
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    api.node_list = [
        {
            "metadata": {"name": "a"},
            "status": {
                **ready,
                "allocatable": {"cpu": "3800m", "memory": "16Gi", "nvidia.com/gpu": "2"},
            },
        },
        {"metadata": {"name": "b"}, "status": {**ready, "allocatable": {"cpu": "4"}}},
        {
            "metadata": {"name": "cordoned"},
            "spec": {"unschedulable": True},
            "status": {**ready, "allocatable": {"cpu": "64"}},
        },
    ]
    assert launcher.capacity() == Resources(cpus=pytest.approx(7.8), memory=16 * 2**30, gpus=2)
    assert [node["alive"] for node in launcher.nodes()] == [True, True, False]
    fixed = KubernetesLauncher(api, KubeOptions(), cpus=8, memory=2**30, gpus=0)
    assert fixed.capacity() == Resources(8, 2**30, 0)
    gpus_only = KubernetesLauncher(api, KubeOptions(), gpus=1)  # the rest from the nodes
    assert gpus_only.capacity() == Resources(cpus=pytest.approx(7.8), memory=16 * 2**30, gpus=1)


def test_a_handle_that_is_not_a_learners_is_refused() -> None:
    with pytest.raises(LaunchError, match="not a learner handle"):
        KubernetesLauncher(MemoryApi(), KubeOptions()).status("/somewhere/else")


def start_error(tmp_path: Path, **env: str) -> str:
    settings = {"LOOM_HOME": str(tmp_path / "home"), "LOOM_LAUNCHER": "kubernetes", **env}
    done = subprocess.run(
        [sys.executable, "-m", "loom.api", "--port", "0"],
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stderr


@pytest.mark.integration
def test_a_platform_without_a_reachable_address_or_a_cluster_says_so(tmp_path: Path) -> None:
    said = start_error(tmp_path)
    assert "LOOM_LAUNCHER=kubernetes needs LOOM_PUBLIC_URL" in said
    said = start_error(
        tmp_path,
        LOOM_PUBLIC_URL="http://loom:8470",
        LOOM_KUBE_CONFIG=str(tmp_path / "no-such-kubeconfig"),
    )
    assert "Kubernetes could not load its configuration" in said
    assert "Traceback" not in said
