"""Katib's rules for ending an experiment and for how many trials may start, as pure functions."""

from __future__ import annotations

from loom.domain.experiments import (
    ExperimentPhase,
    TrialPhase,
    best,
    outcome,
    reduce,
    room,
)
from loom.domain.katib import Algorithm, ExperimentSpec, Objective, Parameter

S, F, R, C, E = (
    TrialPhase.SUCCEEDED,
    TrialPhase.FAILED,
    TrialPhase.RUNNING,
    TrialPhase.CREATED,
    TrialPhase.EARLY_STOPPED,
)


def spec(
    kind: str = "maximize", goal: float | None = None, max_failed: int | None = 1
) -> ExperimentSpec:
    return ExperimentSpec(
        name="e",
        parameters=(Parameter("x", "double", min=0, max=1),),
        objective=Objective(type=kind, metric="accuracy", goal=goal),  # type: ignore[arg-type]
        algorithm=Algorithm("random"),
        trial_parameters=(),
        trial_spec={},
        parallel_trial_count=3,
        max_trial_count=5,
        max_failed_trial_count=max_failed,
    )


def test_the_goal_comes_first() -> None:
    ended = outcome(spec(goal=0.9), 5, [S, F, F, R], 0.95, exhausted=False)
    assert ended is not None and ended.reason == "GoalReached"
    assert ended.phase == ExperimentPhase.SUCCEEDED
    minimize = outcome(spec("minimize", goal=0.1), 5, [S], 0.05, exhausted=False)
    assert minimize is not None and minimize.reason == "GoalReached"
    assert outcome(spec("minimize", goal=0.1), 5, [S], 0.2, exhausted=False) is None


def test_more_failed_trials_than_allowed_fails_it() -> None:
    assert outcome(spec(max_failed=1), 5, [F, S], None, exhausted=False) is None
    ended = outcome(spec(max_failed=1), 5, [F, F], None, exhausted=False)
    assert ended is not None and ended.phase == ExperimentPhase.FAILED
    assert ended.reason == "MaxFailedTrialsReached"
    assert outcome(spec(max_failed=None), 5, [F, F, F], None, exhausted=False) is None


def test_the_budget_counts_ended_trials_only() -> None:
    assert outcome(spec(max_failed=None), 5, [S, S, S, F, R], 0.5, exhausted=False) is None
    ended = outcome(spec(max_failed=None), 5, [S, S, S, F, E], 0.5, exhausted=False)
    assert ended is not None and ended.reason == "MaxTrialsReached"


def test_an_exhausted_space_ends_once_nothing_runs() -> None:
    assert outcome(spec(), 5, [S, R], 0.5, exhausted=True) is None
    ended = outcome(spec(), 5, [S, S], 0.5, exhausted=True)
    assert ended is not None and ended.reason == "SuggestionEndReached"


def test_room_is_parallelism_less_active_and_never_past_the_budget() -> None:
    assert room(spec(), 5, []) == 3
    assert room(spec(), 5, [R, C]) == 1
    assert room(spec(), 5, [S, S, S, R]) == 1  # 5 - 4 proposed
    assert room(spec(), 5, [S, S, S, S, S]) == 0


def test_strategies_and_the_best_trial() -> None:
    assert reduce([0.1, None, 0.5, 0.3], "max") == 0.5
    assert reduce([0.1, 0.5, 0.3], "min") == 0.1
    assert reduce([0.1, 0.5, float("nan")], "latest") == 0.5
    assert reduce([], "latest") is None
    assert best(spec(), [(2, 0.5), (0, 0.9), (1, 0.9)]) == (0, 0.9)
    assert best(spec("minimize"), [(0, 0.5), (1, 0.2)]) == (1, 0.2)
