"""Which queued jobs start now, and why the others wait. Pure: no I/O, tested as functions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from loom.domain.resources import Resources


@dataclass(frozen=True)
class QueuedJob:
    id: str
    per_learner: Resources
    learners: int

    @property
    def need(self) -> Resources:
        return self.per_learner.times(self.learners)


class Verdict(StrEnum):
    START = "start"
    WAIT = "wait"
    NEVER = "never"


@dataclass(frozen=True)
class Decision:
    job_id: str
    verdict: Verdict
    reason: str = ""


def plan(queue: Sequence[QueuedJob], capacity: Resources, in_use: Resources) -> list[Decision]:
    """Decide for each queued job, in queue order.

    A job starts only when all its learners fit at once (gang). The queue is strict FIFO (within
    a priority, which the caller's order already reflects): once a job must wait, the jobs behind
    it wait too, so a large job is never starved by a stream of small ones. A job that could not
    fit even on an empty machine never will, and is reported as such.
    """
    free = capacity - in_use
    blocked_by: str | None = None
    decisions = []
    for job in queue:
        if not job.need.fits_in(capacity):
            shortfall = job.need.shortfall(capacity).replace(" free", " in total")
            reason = f"needs more than this platform has: {shortfall}"
            decisions.append(Decision(job.id, Verdict.NEVER, reason))
        elif blocked_by is not None:
            reason = f"waiting for job {blocked_by}, ahead in the queue, to start"
            decisions.append(Decision(job.id, Verdict.WAIT, reason))
        elif job.need.fits_in(free):
            free = free - job.need
            decisions.append(Decision(job.id, Verdict.START))
        else:
            decisions.append(Decision(job.id, Verdict.WAIT, job.need.shortfall(free)))
            blocked_by = job.id
    return decisions
