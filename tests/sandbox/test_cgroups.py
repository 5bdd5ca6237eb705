"""Waiting on the kernel for a learner's cgroup to empty."""

from __future__ import annotations

from itertools import islice

from loom.sandbox.cgroups import _pauses


def test_waits_for_an_emptied_group_start_short_and_stay_capped() -> None:
    """The first look again comes after a millisecond (a learner's outcome waits on it), later
    ones back off to the cap and never pass it."""
    waits = list(islice(_pauses(0.02), 10))
    assert waits[0] == 0.001
    assert waits == sorted(waits) and max(waits) == 0.02
