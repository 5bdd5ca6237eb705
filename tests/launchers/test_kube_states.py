"""The Kubernetes launcher's state mapping, against recorded API objects of every phase
(`kube_recorded/objects.json`): a learner's liveness, its outcome and the reason it is given."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from loom.launchers.base import Liveness
from loom.launchers.kube_states import learner_status, timestamp

RECORDED = Path(__file__).parent / "kube_recorded" / "objects.json"
CREATED = timestamp("2026-11-25T10:00:00Z") or 0.0


@functools.cache
def recorded() -> dict[str, dict[str, Any]]:
    return dict(json.loads(RECORDED.read_text()))


def pod(name: str) -> dict[str, Any]:
    return dict(recorded()["pods"][name])


def workload(name: str) -> dict[str, Any]:
    return dict(recorded()["workloads"][name])


def status(job: str | None, found: str | None, *, after_s: float = 5.0) -> Any:
    return learner_status(
        workload(job) if job else None,
        pod(found) if found else None,
        now=CREATED + after_s,
        pull_timeout_s=300.0,
    )


def test_unschedulable_is_pending_with_the_schedulers_reason() -> None:
    found = status("job_active", "unschedulable")
    assert found.liveness == Liveness.RUNNING
    assert found.report is not None and found.report["state"] == "PENDING"
    assert found.report["message"].startswith(
        "queued in Kubernetes: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    )


def test_a_pod_being_created_or_not_yet_made_is_pending() -> None:
    creating = status("job_active", "container_creating")
    assert creating.report == {
        "state": "PENDING",
        "message": "starting in Kubernetes (ContainerCreating)",
    }
    missing = status("job_active", None)
    assert missing.liveness == Liveness.RUNNING
    assert missing.report is not None
    assert "waiting for Kubernetes to create its pod" in missing.report["message"]


@pytest.mark.parametrize("name", ["image_pull_backoff", "config_error"])
def test_a_failing_pull_or_config_is_retried_then_lost(name: str) -> None:
    early = status("job_active", name, after_s=30)
    assert early.liveness == Liveness.RUNNING
    assert early.report is not None and "retrying" in early.report["message"]
    late = status("job_active", name, after_s=301)
    assert late.liveness == Liveness.LOST
    assert late.reason is not None and "for 301 s" in late.reason
    if name == "image_pull_backoff":
        assert "pulling ghcr.io/loom-ml/loom-learner:nope fails" in late.reason


def test_an_invalid_image_is_lost_at_once() -> None:
    found = status("job_active", "invalid_image")
    assert found.liveness == Liveness.LOST
    assert found.reason is not None and "its image name is invalid" in found.reason


def test_running_leaves_the_report_to_the_wrapper() -> None:
    found = status("job_active", "running")
    assert found.liveness == Liveness.RUNNING and found.report is None
    unknown = status("job_active", "node_unknown")  # the node may come back: not lost yet
    assert unknown.liveness == Liveness.RUNNING


def test_an_ended_pod_gives_the_wrappers_final_report() -> None:
    done = status("job_active", "succeeded")
    assert done.liveness == Liveness.EXITED
    assert done.report is not None
    assert done.report["state"] == "COMPLETED" and done.report["last_seq"] == 12
    failed = status("job_failed", "failed_with_report")
    assert failed.report is not None
    assert (failed.report["state"], failed.report["exit_code"]) == ("FAILED", 3)


def test_oomkilled_is_the_memory_limit_a_permanent_failure() -> None:
    found = status("job_failed", "oom_killed")
    assert found.liveness == Liveness.EXITED
    assert found.report is not None
    assert found.report["error_code"] == "C202"
    assert found.report["exit_code"] == 137
    assert "OOMKilled" in found.report["message"]


def test_evicted_and_preempted_are_lost_with_their_node() -> None:
    evicted = status("job_failed", "evicted")
    assert evicted.liveness == Liveness.LOST
    assert evicted.reason is not None
    assert evicted.reason.startswith("was evicted from gpu-node-2: The node was low on resource")
    preempted = status("job_failed", "preempted")
    assert preempted.liveness == Liveness.LOST
    assert preempted.reason is not None
    assert "preempted by a higher-priority pod on gpu-node-2" in preempted.reason


def test_a_pod_killed_without_a_report_is_lost_with_its_exit_code() -> None:
    found = status("job_failed", "killed_without_report")
    assert found.liveness == Liveness.LOST
    assert found.reason is not None and "(exit code 137, Error)" in found.reason


def test_a_pod_gone_with_its_job_failed_or_suspended_is_lost_with_why() -> None:
    failed = status("job_failed", None)
    assert failed.liveness == Liveness.LOST
    assert failed.reason is not None and "its Kubernetes Job is failed" in failed.reason
    assert "matching FailJob rule" in failed.reason
    halted = status("job_suspended", None)
    assert halted.liveness == Liveness.LOST
    assert halted.reason is not None and "suspended" in halted.reason
    trainjob = status("trainjob_failed", None)
    assert trainjob.reason is not None and "TrainJob is failed: jobset failed" in trainjob.reason


def test_a_pull_is_timed_from_when_the_pod_got_its_node() -> None:
    late = pod("image_pull_backoff")
    late["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-25T10:10:00Z"}
    ]
    found = learner_status(
        workload("job_active"), late, now=CREATED + 11 * 60, pull_timeout_s=300.0
    )
    assert found.liveness == Liveness.RUNNING  # 10 min queued, then 1 min pulling


def test_a_job_a_queue_holds_suspended_is_waiting_not_halted() -> None:
    found = status("job_queued_by_kueue", None, after_s=3600)
    assert found.liveness == Liveness.RUNNING
    assert found.report is not None
    assert "suspended until a queue admits it" in found.report["message"]


def test_a_job_that_never_gets_its_pods_fails_with_where_to_look() -> None:
    assert status("job_active", None, after_s=60).liveness == Liveness.RUNNING
    found = status("job_active", None, after_s=301)
    assert found.liveness == Liveness.LOST
    assert found.reason is not None
    assert "has no pod 301 s after its Job was made" in found.reason
    assert "kubectl -n loom-jobs describe job loom-training-abc123def0-a1" in found.reason


def test_a_job_that_cannot_make_its_pod_says_why_from_its_events() -> None:
    events = recorded()["events"]["job_failed_create"]
    now = learner_status(
        workload("job_active"), None, now=CREATED + 60, pull_timeout_s=300.0, events=events
    )
    assert now.liveness == Liveness.RUNNING
    assert now.report is not None
    assert now.report["message"].startswith(
        "waiting for Kubernetes to create its pod (FailedCreate: Error creating: pods"
    )
    assert "exceeded quota: gpu-quota" in now.report["message"]
    later = learner_status(
        workload("job_active"), None, now=CREATED + 301, pull_timeout_s=300.0, events=events
    )
    assert later.liveness == Liveness.LOST
    assert later.reason is not None and "exceeded quota: gpu-quota" in later.reason
    assert "kubectl" not in later.reason  # Kubernetes' own reason replaces the hint


def test_a_pod_gone_from_a_complete_job_is_lost() -> None:
    complete = workload("job_active")
    complete["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    found = learner_status(complete, None, now=CREATED, pull_timeout_s=300.0)
    assert found.liveness == Liveness.LOST
    assert found.reason == "its pod is gone, and its outcome with it"


def test_no_workload_is_not_started() -> None:
    assert status(None, None).liveness == Liveness.NOT_STARTED
    assert status("trainjob_running", "running").liveness == Liveness.RUNNING
