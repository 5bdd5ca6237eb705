"""A Loom job's state as a Kubeflow training job's `status`: conditions (Created, Running,
Restarting, Suspended, Succeeded, Failed), `replicaStatuses` per replica type, start and
completion times. Pure: the handler reads the rows into a `JobView`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from loom.dialects.kinds import Condition, timestamp
from loom.domain.replicas import Layout

RUNNING = ("PENDING", "DOWNLOADING", "PROCESSING", "STORING")
TIMED_OUT = "it ran past its timeout_s"


@dataclass(frozen=True)
class JobView:
    """What the status is made of: the job's row, and its current attempt's learners."""

    id: str
    state: str
    message: str
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    attempt: int
    restart_pending: bool
    learners: tuple[tuple[int, str], ...]  # (learner id, state) of the current attempt
    suspended: bool = False  # halted because the object asked for `runPolicy.suspend`


def conditions(kind: str, name: str, job: JobView) -> list[Condition]:
    found = [
        Condition("Created", True, f"{kind}Created", f"{kind} {name} is created.", job.submitted_at)
    ]
    state = job.state
    if state in RUNNING or (state == "QUEUED" and job.attempt > 1):
        if job.restart_pending or (state == "QUEUED" and job.attempt > 1):
            found.append(
                Condition(
                    "Restarting",
                    True,
                    f"{kind}Restarting",
                    f"{kind} {name} is restarting: {job.message}",
                    job.started_at,
                )
            )
        else:
            found.append(
                Condition(
                    "Running", True, f"{kind}Running", f"{kind} {name} is running.", job.started_at
                )
            )
    elif state == "COMPLETED":
        if job.started_at is not None:
            found.append(
                Condition(
                    "Running", False, f"{kind}Running", f"{kind} {name} is running.", job.started_at
                )
            )
        found.append(
            Condition(
                "Succeeded",
                True,
                f"{kind}Succeeded",
                f"{kind} {name} is successfully completed.",
                job.finished_at,
            )
        )
    elif state == "FAILED":
        found.append(
            Condition(
                "Failed",
                True,
                f"{kind}Failed",
                f"{kind} {name} has failed: {job.message}",
                job.finished_at,
            )
        )
    elif state == "HALTED":
        if TIMED_OUT in job.message:
            found.append(
                Condition(
                    "Failed",
                    True,
                    "DeadlineExceeded",
                    f"{kind} {name} has failed: {job.message}",
                    job.finished_at,
                )
            )
        else:
            why = "suspended (runPolicy.suspend)" if job.suspended else job.message
            found.append(
                Condition(
                    "Suspended",
                    True,
                    f"{kind}Suspended",
                    f"{kind} {name} is {why}.",
                    job.finished_at,
                )
            )
    return found


def replica_statuses(layout: Layout, job: JobView) -> dict[str, dict[str, int]]:
    """Each replica type's learners of the current attempt: active, succeeded, failed."""
    found = {kind: {"active": 0, "succeeded": 0, "failed": 0} for kind, _ in layout.replicas}
    for learner_id, state in job.learners:
        if learner_id > layout.size:
            continue
        kind, _index = layout.role(learner_id - 1)
        if state in RUNNING:
            found[kind]["active"] += 1
        elif state == "COMPLETED":
            found[kind]["succeeded"] += 1
        elif state == "FAILED":
            found[kind]["failed"] += 1
    return {kind: {k: v for k, v in counts.items() if v} for kind, counts in found.items()}


def training_status(kind: str, name: str, layout: Layout, job: JobView) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [c.as_dict() for c in conditions(kind, name, job)],
        "replicaStatuses": replica_statuses(layout, job),
        "lastReconcileTime": timestamp(time.time()),
    }
    if job.started_at is not None:
        status["startTime"] = timestamp(job.started_at)
    if job.state == "COMPLETED" or (job.state in ("FAILED", "HALTED") and job.finished_at):
        status["completionTime"] = timestamp(job.finished_at)
    return status
