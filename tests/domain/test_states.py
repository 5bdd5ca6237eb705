"""Job state rules, as pure functions."""

from __future__ import annotations

import pytest

from loom.domain.states import JobState, aggregate, can_transition, find_rule

S = JobState


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        (S.QUEUED, S.PENDING, "admit"),
        (S.PENDING, S.DOWNLOADING, "progress"),
        (S.DOWNLOADING, S.PROCESSING, "progress"),
        (S.PENDING, S.PROCESSING, "progress"),
        (S.PROCESSING, S.STORING, "progress"),
        (S.STORING, S.COMPLETED, "progress"),
        (S.PROCESSING, S.FAILED, "fail"),
        (S.QUEUED, S.FAILED, "fail"),
        (S.QUEUED, S.HALTED, "halt"),
        (S.PROCESSING, S.HALTED, "halt"),
        (S.HALTED, S.QUEUED, "resume"),
        (S.PENDING, S.QUEUED, "requeue"),
    ],
)
def test_allowed(old: JobState, new: JobState, rule: str) -> None:
    """Each allowed move is covered by the named rule."""
    found = find_rule(old, new)
    assert found is not None and found.name == rule


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (S.COMPLETED, S.PROCESSING),
        (S.COMPLETED, S.FAILED),
        (S.FAILED, S.COMPLETED),
        (S.PROCESSING, S.DOWNLOADING),
        (S.STORING, S.PENDING),
        (S.QUEUED, S.COMPLETED),
        (S.PROCESSING, S.PROCESSING),
        (S.HALTED, S.PROCESSING),
    ],
)
def test_forbidden(old: JobState, new: JobState) -> None:
    """Terminal states are final, progress never goes back, and no state skips admission."""
    assert not can_transition(old, new)


def test_aggregate_is_the_slowest_learner() -> None:
    """A gang is as far along as its slowest learner."""
    assert aggregate([S.PROCESSING, S.DOWNLOADING]) == S.DOWNLOADING
    assert aggregate([S.COMPLETED, S.STORING]) == S.STORING
    assert aggregate([S.COMPLETED, S.COMPLETED]) == S.COMPLETED


def test_aggregate_failure_and_halt() -> None:
    """One failed learner fails the gang; a halt counts once every learner stopped."""
    assert aggregate([S.PROCESSING, S.FAILED]) == S.FAILED
    assert aggregate([S.HALTED, S.PROCESSING]) is None
    assert aggregate([S.HALTED, S.COMPLETED]) == S.HALTED
    assert aggregate([]) is None
