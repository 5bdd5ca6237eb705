"""Where a learner is, read from Kubernetes' objects: its attempt's Job (or TrainJob) and its pod.

Pure: the objects come as the API returns them (JSON, camelCase), so the rules are tested against
recorded objects of every phase. A pod waiting to be scheduled, pulling its image or starting is
a learner that is still PENDING, with the reason Kubernetes gives ("queued in Kubernetes: 0/3
nodes are available: 3 Insufficient nvidia.com/gpu."). A pod that ended says how in its
termination message (the wrapper's last status); one that ended without it (OOMKilled, evicted,
preempted, its node lost) is a lost learner with Kubernetes' reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from loom.domain.errors import ErrorCode
from loom.domain.states import TERMINAL_STATES
from loom.kube.objects import HALTED
from loom.launchers.base import LearnerStatus, Liveness

# Waiting reasons that never get better by themselves.
FATAL_WAITING = {
    "InvalidImageName": "its image name is invalid",
    "ErrImageNeverPull": "its image is not on the node and the pull policy is Never",
    "CreateContainerError": "its container could not be created",
    "RunContainerError": "its container could not be started",
}
PULLING = {"ErrImagePull", "ImagePullBackOff"}
CONFIG = "CreateContainerConfigError"  # e.g. its Secret not there yet: a while, then fatal
DISRUPTIONS = {
    "PreemptionByScheduler": "preempted by a higher-priority pod",
    "DeletionByTaintManager": "evicted from a tainted node",
    "EvictionByEvictionAPI": "evicted (node drained or by the eviction API)",
    "DeletionByPodGC": "deleted with its node, which is gone",
    "TerminationByKubelet": "terminated by its node (node shutdown or pressure)",
}


def timestamp(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """An object's condition of that type, when it is True."""
    for found in ((obj or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind and found.get("status") == "True":
            return dict(found)
    return None


def halted_by_loom(workload: dict[str, Any]) -> bool:
    return ((workload.get("metadata") or {}).get("annotations") or {}).get(HALTED) == "true"


def workload_ended(workload: dict[str, Any]) -> str | None:
    """Why the attempt's Job or TrainJob has stopped: failed, or suspended by Loom's halt (a
    queue such as Kueue also suspends a workload, until it admits it: that is waiting)."""
    for kind in ("Failed", "Suspended"):
        found = condition(workload, kind)
        if kind == "Suspended" and not halted_by_loom(workload):
            continue
        if found is not None:
            detail = found.get("message") or found.get("reason") or ""
            return f"its Kubernetes {workload.get('kind', 'Job')} is {kind.lower()}" + (
                f": {detail}" if detail else ""
            )
    return None


def pending(message: str) -> LearnerStatus:
    return LearnerStatus(Liveness.RUNNING, {"state": "PENDING", "message": message})


def learner_status(
    workload: dict[str, Any] | None,
    pod: dict[str, Any] | None,
    *,
    now: float,
    pull_timeout_s: float,
    events: Sequence[dict[str, Any]] = (),
) -> LearnerStatus:
    """One learner's liveness from its attempt's workload and its pod (None: not there)."""
    if workload is None:
        return LearnerStatus(Liveness.NOT_STARTED, None, "its Kubernetes objects are gone")
    if pod is None:
        return _no_pod(workload, now, pull_timeout_s, latest_warning(events))
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    if phase == "Pending":
        return _pending_pod(pod, now, pull_timeout_s)
    if phase in ("Succeeded", "Failed"):
        return _ended_pod(pod)
    return LearnerStatus(Liveness.RUNNING)  # Running, or Unknown (its node not answering)


def latest_warning(events: Sequence[dict[str, Any]]) -> str | None:
    """The newest Warning event, as Kubernetes says it ("FailedCreate: pods … is forbidden:
    exceeded quota: …")."""
    warnings = [e for e in events if e.get("type") == "Warning"]
    if not warnings:
        return None

    def when(event: dict[str, Any]) -> str:
        return str(event.get("lastTimestamp") or event.get("eventTime") or "")

    newest = max(warnings, key=when)
    return f"{newest.get('reason', 'Warning')}: {newest.get('message', '')}".rstrip(": ")


def _no_pod(
    workload: dict[str, Any], now: float, timeout_s: float, why: str | None
) -> LearnerStatus:
    ended = workload_ended(workload)
    if ended is not None:
        return LearnerStatus(Liveness.LOST, None, f"was stopped: {ended}")
    if condition(workload, "Complete") is not None:  # its pod deleted since, by someone
        return LearnerStatus(Liveness.LOST, None, "its pod is gone, and its outcome with it")
    kind = workload.get("kind", "Job")
    if condition(workload, "Suspended") is not None or (workload.get("spec") or {}).get("suspend"):
        return pending(f"queued in Kubernetes: its {kind} is suspended until a queue admits it")
    meta = workload.get("metadata") or {}
    since = now - (timestamp(meta.get("creationTimestamp")) or now)
    if since > timeout_s:  # a quota, an admission webhook, a missing service account…
        said = why or (
            f"see `kubectl -n {meta.get('namespace', '…')} describe "
            f"{kind.lower()} {meta.get('name', '…')}`"
        )
        return _lost(
            f"has no pod {since:.0f} s after its {kind} was made: Kubernetes could not create "
            f"it ({said})"
        )
    if why is not None:
        return pending(f"waiting for Kubernetes to create its pod ({why})")
    return pending("waiting for Kubernetes to create its pod")


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    found = (pod.get("status") or {}).get("containerStatuses") or []
    return dict(found[0]) if found else {}


def _pending_pod(pod: dict[str, Any], now: float, pull_timeout_s: float) -> LearnerStatus:
    status = pod.get("status") or {}
    for found in status.get("conditions") or []:
        if found.get("type") == "PodScheduled" and found.get("status") == "False":
            why = found.get("message") or found.get("reason") or "not scheduled yet"
            return pending(f"queued in Kubernetes: {why}")
    waiting = (_container(pod).get("state") or {}).get("waiting") or {}
    reason, detail = str(waiting.get("reason") or ""), str(waiting.get("message") or "")
    created = _scheduled_at(pod) or now
    image = (_container(pod).get("image")) or "its image"
    if reason in FATAL_WAITING:
        return _lost(f"could not start: {FATAL_WAITING[reason]} ({reason}: {detail})")
    if reason in PULLING or reason == CONFIG:
        doing = f"pulling {image} fails" if reason in PULLING else "its container's config fails"
        if now - created > pull_timeout_s:
            said = f"could not start: {doing} for {now - created:.0f} s since it was scheduled"
            return _lost(f"{said} ({reason}: {detail})")
        return pending(f"starting in Kubernetes: {doing}, retrying ({reason}: {detail})")
    return pending(f"starting in Kubernetes ({reason or 'scheduled'})")


def _scheduled_at(pod: dict[str, Any]) -> float | None:
    """When the pod got its node (a pull or a start is timed from then, not from a wait in
    the scheduler's queue), else when it was made."""
    for found in (pod.get("status") or {}).get("conditions") or []:
        if found.get("type") == "PodScheduled" and found.get("status") == "True":
            at = timestamp(found.get("lastTransitionTime"))
            if at is not None:
                return at
    return timestamp((pod.get("metadata") or {}).get("creationTimestamp"))


def _ended_pod(pod: dict[str, Any]) -> LearnerStatus:
    status = pod.get("status") or {}
    terminated = (_container(pod).get("state") or {}).get("terminated") or {}
    report = _report(terminated.get("message"))
    if report is not None:
        return LearnerStatus(Liveness.EXITED, report)
    node = (pod.get("spec") or {}).get("nodeName") or "its node"
    if status.get("reason") == "Evicted":
        return _lost(f"was evicted from {node}: {status.get('message', '')}".rstrip(": "))
    disrupted = condition(pod, "DisruptionTarget")
    if disrupted is not None:
        how = DISRUPTIONS.get(str(disrupted.get("reason")), "stopped by Kubernetes")
        return _lost(f"was {how} on {node}: {disrupted.get('message', '')}".rstrip(": "))
    code = terminated.get("exitCode")
    if terminated.get("reason") == "OOMKilled":
        return LearnerStatus(
            Liveness.EXITED,
            {
                "state": "FAILED",
                "exit_code": code if code is not None else 137,
                "error_code": ErrorCode.MEMORY_EXCEEDED.value,
                "message": "reached its memory limit (manifest `memory`) and was killed by "
                "Kubernetes (OOMKilled)",
            },
        )
    how = f"exit code {code}" if code is not None else "no exit code"
    if terminated.get("reason"):
        how += f", {terminated['reason']}"
    return _lost(f"ended on {node} without reporting an outcome ({how})")


def _report(message: str | None) -> dict[str, Any] | None:
    """The wrapper's last status, when its termination message holds a final one."""
    if not message:
        return None
    try:
        found = json.loads(message)
    except ValueError:
        return None
    if isinstance(found, dict) and found.get("state") in TERMINAL_STATES:
        return found
    return None


def _lost(reason: str) -> LearnerStatus:
    return LearnerStatus(Liveness.LOST, None, reason)
