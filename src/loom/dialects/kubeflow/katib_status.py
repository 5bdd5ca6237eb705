"""A Loom experiment as Katib's `ExperimentStatus`: conditions (Created, Running, Succeeded,
Failed) with Katib's reasons, the current optimal trial (its parameter assignments and the
observation of each metric: min, max, latest), the trial lists and counts. Pure."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from loom.dialects.kinds import Condition, timestamp

# Loom's experiment phases → Katib's condition; Loom's reasons are Katib's without the prefix.
LISTS = {
    "SUCCEEDED": ("succeededTrialList", "trialsSucceeded"),
    "FAILED": ("failedTrialList", "trialsFailed"),
    "KILLED": ("killedTrialList", "trialsKilled"),
    "RUNNING": ("runningTrialList", "trialsRunning"),
    "CREATED": ("pendingTrialList", "trialsPending"),
    "EARLY_STOPPED": ("earlyStoppedTrialList", "trialsEarlyStopped"),
    "METRICS_UNAVAILABLE": ("metricsUnavailableTrialList", "trialMetricsUnavailable"),
}


@dataclass(frozen=True)
class TrialView:
    number: int
    state: str
    parameters: dict[str, str]


@dataclass(frozen=True)
class ExperimentView:
    name: str
    state: str
    reason: str
    message: str
    created_at: float
    finished_at: float | None
    trials: tuple[TrialView, ...]
    best_trial: int | None
    observation: dict[str, tuple[float, float, float]]  # the best trial's: min, max, latest


def trial_name(experiment: str, number: int) -> str:
    """A trial's name, as its `${trialSpec.Name}` was given."""
    return f"{experiment}-{number}"


def conditions(view: ExperimentView) -> list[Condition]:
    created = Condition(
        "Created", True, "ExperimentCreated", "Experiment is created", view.created_at
    )
    found = [created]
    running = view.state in ("CREATED", "RUNNING")
    started = min((t.number for t in view.trials), default=None) is not None
    if running or view.state == "HALTED":
        why = "Experiment is halted" if view.state == "HALTED" else "Experiment is running"
        found.append(Condition("Running", running and started, "ExperimentRunning", why))
        return found
    found.append(Condition("Running", False, "ExperimentRunning", "Experiment is running"))
    kind = "Succeeded" if view.state == "SUCCEEDED" else "Failed"
    reason = "Experiment" + (view.reason or kind)
    found.append(Condition(kind, True, reason, view.message, view.finished_at))
    return found


def experiment_status(view: ExperimentView) -> dict[str, Any]:
    status: dict[str, Any] = {
        "startTime": timestamp(view.created_at),
        "conditions": [c.as_dict() for c in conditions(view)],
        "lastReconcileTime": timestamp(time.time()),
        "trials": len(view.trials),
    }
    if view.finished_at is not None and view.state in ("SUCCEEDED", "FAILED"):
        status["completionTime"] = timestamp(view.finished_at)
    for state, (listed, counted) in LISTS.items():
        names = [trial_name(view.name, t.number) for t in view.trials if t.state == state]
        if names:
            status[listed] = names
            status[counted] = len(names)
    best = next((t for t in view.trials if t.number == view.best_trial), None)
    if best is not None:
        status["currentOptimalTrial"] = {
            "bestTrialName": trial_name(view.name, best.number),
            "parameterAssignments": [{"name": k, "value": v} for k, v in best.parameters.items()],
            "observation": {
                "metrics": [
                    {"name": name, "min": str(low), "max": str(high), "latest": str(last)}
                    for name, (low, high, last) in view.observation.items()
                ]
            },
        }
    return status
