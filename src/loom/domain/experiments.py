"""An experiment's and its trials' states, and the rules that end an experiment (Katib's)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from loom.domain.katib import ExperimentSpec, Strategy


class ExperimentPhase(StrEnum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    HALTED = "HALTED"  # by its owner: no new trial, running ones halted; it can resume
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


ACTIVE_EXPERIMENT = frozenset({ExperimentPhase.CREATED, ExperimentPhase.RUNNING})
ENDED_EXPERIMENT = frozenset({ExperimentPhase.SUCCEEDED, ExperimentPhase.FAILED})


class TrialPhase(StrEnum):
    """Katib's trial conditions."""

    CREATED = "CREATED"  # proposed; its job is queued (or about to be)
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"  # halted by its owner or when the experiment ended
    EARLY_STOPPED = "EARLY_STOPPED"
    METRICS_UNAVAILABLE = "METRICS_UNAVAILABLE"  # it ran, but never reported the objective


ACTIVE_TRIAL = frozenset({TrialPhase.CREATED, TrialPhase.RUNNING})
# Katib's own words for why an experiment ended.
GOAL_REACHED = "GoalReached"
MAX_TRIALS = "MaxTrialsReached"
MAX_FAILED = "MaxFailedTrialsReached"
SPACE_EXHAUSTED = "SuggestionEndReached"


@dataclass(frozen=True)
class Outcome:
    phase: ExperimentPhase
    reason: str
    message: str


def reduce(values: Sequence[float | None], strategy: Strategy) -> float | None:
    """A metric's series to one value: Katib's metric strategies."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None
    if strategy == "min":
        return min(finite)
    if strategy == "max":
        return max(finite)
    return finite[-1]


def better(spec: ExperimentSpec, a: float, b: float) -> bool:
    return a > b if spec.objective.type == "maximize" else a < b


def best(spec: ExperimentSpec, scored: Sequence[tuple[int, float]]) -> tuple[int, float] | None:
    """The best (trial number, objective); the earlier trial wins a tie."""
    found: tuple[int, float] | None = None
    for number, value in sorted(scored):
        if found is None or better(spec, value, found[1]):
            found = (number, value)
    return found


def goal_reached(spec: ExperimentSpec, value: float) -> bool:
    goal = spec.objective.goal
    if goal is None:
        return False
    return value >= goal if spec.objective.type == "maximize" else value <= goal


def outcome(
    spec: ExperimentSpec,
    max_trials: int | None,
    phases: Sequence[TrialPhase],
    best_value: float | None,
    exhausted: bool,
) -> Outcome | None:
    """Whether the experiment has ended, by Katib's rules, in Katib's order: the goal, then
    too many failed trials, then the trial budget, then a search space with nothing left."""
    failed = sum(p == TrialPhase.FAILED for p in phases)
    active = sum(p in ACTIVE_TRIAL for p in phases)
    if best_value is not None and goal_reached(spec, best_value):
        return Outcome(
            ExperimentPhase.SUCCEEDED,
            GOAL_REACHED,
            f"the objective {spec.objective.metric} reached its goal {spec.objective.goal:g} "
            f"({best_value:g})",
        )
    allowed = spec.max_failed_trial_count
    if allowed is not None and failed > allowed:
        return Outcome(
            ExperimentPhase.FAILED,
            MAX_FAILED,
            f"{failed} trials failed, more than maxFailedTrialCount ({allowed})",
        )
    ended = len(phases) - active
    if max_trials is not None and ended >= max_trials:
        return Outcome(
            ExperimentPhase.SUCCEEDED, MAX_TRIALS, f"all {max_trials} trials (maxTrialCount) ran"
        )
    if exhausted and active == 0:
        return Outcome(
            ExperimentPhase.SUCCEEDED,
            SPACE_EXHAUSTED,
            f"every point of the search space was tried ({len(phases)} trials)",
        )
    return None


def room(spec: ExperimentSpec, max_trials: int | None, phases: Sequence[TrialPhase]) -> int:
    """How many new trials may be proposed now: parallelTrialCount less the running ones, and
    never past maxTrialCount."""
    active = sum(p in ACTIVE_TRIAL for p in phases)
    free = spec.parallel_trial_count - active
    if max_trials is not None:
        free = min(free, max_trials - len(phases))
    return max(free, 0)
