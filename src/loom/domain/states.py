"""Job states (FfDL's) and the rules that move a job between them.

Every rule is a small named object that declares the states it covers; `check_transition`
applies them. Pure functions, no I/O: the lifecycle stores each accepted transition with its time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "QUEUED"
    PENDING = "PENDING"
    DOWNLOADING = "DOWNLOADING"
    PROCESSING = "PROCESSING"
    STORING = "STORING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    HALTED = "HALTED"


RUNNING_STATES = frozenset(
    {JobState.PENDING, JobState.DOWNLOADING, JobState.PROCESSING, JobState.STORING}
)
"""States in which a job holds resources and has learners to watch."""

TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.HALTED})
HALTABLE_STATES = frozenset({JobState.QUEUED}) | RUNNING_STATES
UNFINISHED_STATES = HALTABLE_STATES

_PROGRESS = (
    JobState.PENDING,
    JobState.DOWNLOADING,
    JobState.PROCESSING,
    JobState.STORING,
    JobState.COMPLETED,
)


@dataclass(frozen=True)
class TransitionRule:
    """One allowed kind of move, with the reason it exists."""

    name: str
    from_states: frozenset[JobState]
    to_states: frozenset[JobState]

    def covers(self, old: JobState, new: JobState) -> bool:
        return old in self.from_states and new in self.to_states


RULES: tuple[TransitionRule, ...] = (
    TransitionRule("admit", frozenset({JobState.QUEUED}), frozenset({JobState.PENDING})),
    TransitionRule(
        "progress",
        frozenset(_PROGRESS[:-1]),
        frozenset(_PROGRESS[1:]),
    ),
    TransitionRule("fail", UNFINISHED_STATES, frozenset({JobState.FAILED})),
    TransitionRule("halt", HALTABLE_STATES, frozenset({JobState.HALTED})),
    TransitionRule("resume", frozenset({JobState.HALTED}), frozenset({JobState.QUEUED})),
    TransitionRule("requeue", RUNNING_STATES, frozenset({JobState.QUEUED})),
)


def _is_forward(old: JobState, new: JobState) -> bool:
    if old in _PROGRESS and new in _PROGRESS:
        return _PROGRESS.index(new) > _PROGRESS.index(old)
    return True


def find_rule(old: JobState, new: JobState) -> TransitionRule | None:
    """The rule that allows `old` → `new`, or None. Progress never goes backwards."""
    if old == new or not _is_forward(old, new):
        return None
    for rule in RULES:
        if rule.covers(old, new):
            return rule
    return None


def can_transition(old: JobState, new: JobState) -> bool:
    return find_rule(old, new) is not None


def aggregate(learner_states: Iterable[JobState]) -> JobState | None:
    """A gang's state from its learners' states; None while it cannot be told yet.

    Any failed learner fails the job; a job is halted once every learner has stopped and one of
    them halted; otherwise the job is as far along as its slowest learner.
    """
    states = list(learner_states)
    if not states:
        return None
    if JobState.FAILED in states:
        return JobState.FAILED
    if JobState.HALTED in states:
        return JobState.HALTED if all(s in TERMINAL_STATES for s in states) else None
    return min(states, key=_PROGRESS.index)
