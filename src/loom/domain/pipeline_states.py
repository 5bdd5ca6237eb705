"""The states of a pipeline run and of its steps and tasks, and how a step's tasks add up."""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    HALTED = "HALTED"


class StepState(StrEnum):
    """A step's, and a task's (one item of the step's fan-out)."""

    WAITING = "WAITING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    CACHED = "CACHED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    HALTED = "HALTED"


ACTIVE_RUN = (RunState.PENDING, RunState.RUNNING)
ENDED_STEP = (
    StepState.SUCCEEDED,
    StepState.CACHED,
    StepState.FAILED,
    StepState.SKIPPED,
    StepState.HALTED,
)
DONE = (StepState.SUCCEEDED, StepState.CACHED)  # a later step may use its outputs


def step_state(tasks: list[StepState]) -> StepState | None:
    """The state of a step whose tasks have all ended (None while one has not): failed if one
    failed, halted if one was halted, cached if all were, succeeded otherwise."""
    if any(t not in ENDED_STEP for t in tasks):
        return None
    for state in (StepState.FAILED, StepState.HALTED):
        if state in tasks:
            return state
    if tasks and all(t == StepState.CACHED for t in tasks):
        return StepState.CACHED
    return StepState.SUCCEEDED


def run_state(steps: list[StepState]) -> RunState | None:
    """The run's end once every step has ended: failed if a step failed, halted if one was."""
    if any(s not in ENDED_STEP for s in steps):
        return None
    if StepState.FAILED in steps:
        return RunState.FAILED
    if StepState.HALTED in steps:
        return RunState.HALTED
    return RunState.SUCCEEDED
