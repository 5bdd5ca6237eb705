"""Resource arithmetic and the reasons a job waits."""

from __future__ import annotations

from loom.domain.resources import Resources

GIB = 2**30


def test_fit_and_shortfall() -> None:
    """A request fits only if every dimension fits, and the shortfall names each one."""
    free = Resources(cpus=1.5, memory=2 * GIB, gpus=1)
    assert Resources(1, GIB, 1).fits_in(free)
    need = Resources(cpus=2, memory=GIB, gpus=2)
    assert not need.fits_in(free)
    assert need.shortfall(free) == "needs 2 GPUs, 1 free; needs 2 CPUs, 1.5 free"


def test_times_and_sum() -> None:
    """A gang needs its per-learner resources times its learners."""
    assert Resources(0.5, GIB, 1).times(4) == Resources(2, 4 * GIB, 4)
    assert Resources(1, 1, 1) + Resources(1, 1, 1) - Resources(2, 2, 2) == Resources()
