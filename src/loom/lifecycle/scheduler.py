"""Which queued jobs start now, and why the others wait. Pure: no I/O, tested as functions."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from loom.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class QueuedJob:
    id: str
    per_learner: Resources
    learners: int
    owner: str = ""
    need: Resources = field(init=False)  # all its learners together, computed once

    def __post_init__(self) -> None:
        object.__setattr__(self, "need", _total(self.per_learner, self.learners))


@functools.lru_cache(maxsize=4096)
def _total(per_learner: Resources, learners: int) -> Resources:
    """Queues hold many jobs of few shapes: each shape's total is computed once."""
    return per_learner.times(learners)


@dataclass(frozen=True)
class Quota:
    """A user's limits on their running jobs; None is unlimited."""

    cpus: float | None = None
    gpus: int | None = None
    jobs: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.cpus is None and self.gpus is None and self.jobs is None


@dataclass(frozen=True)
class Usage:
    """What a user's running jobs hold."""

    held: Resources = field(default_factory=Resources)
    jobs: int = 0

    def plus(self, job: QueuedJob) -> Usage:
        return Usage(self.held + job.need, self.jobs + 1)


class Verdict(StrEnum):
    START = "start"
    WAIT = "wait"
    NEVER = "never"


@dataclass(frozen=True)
class Decision:
    job_id: str
    verdict: Verdict
    reason: str = ""


def over_quota(job: QueuedJob, usage: Usage, quota: Quota) -> str:
    """Why the job would take its owner over their quota; empty if it would not."""
    if quota.unlimited:
        return ""
    after = usage.plus(job)
    if quota.jobs is not None and after.jobs > quota.jobs:
        return f"quota: {usage.jobs} of {quota.jobs} running jobs in use by your running jobs"
    if quota.gpus is not None and after.held.gpus > quota.gpus:
        return f"quota: {usage.held.gpus} of {quota.gpus} GPUs in use by your running jobs"
    if quota.cpus is not None and after.held.cpus > quota.cpus + 1e-9:
        return f"quota: {usage.held.cpus:g} of {quota.cpus:g} CPUs in use by your running jobs"
    return ""


@dataclass
class Backlog:
    """The jobs waiting for resources, which start before those behind them: how many, and each
    owner's own (kept per owner, so a reason costs the same behind 10 jobs or 10,000)."""

    count: int = 0
    mine: dict[str, list[str]] = field(default_factory=dict)

    def add(self, job: QueuedJob) -> None:
        self.count += 1
        self.mine.setdefault(job.owner, []).append(job.id)


class Planner:
    """Decides for queued jobs one at a time, in queue order, so a caller can feed it the queue
    in chunks and stop early (see `waiting`).

    A job starts only when all its learners fit at once (gang). The queue is strict FIFO (within
    a priority, which the caller's order already reflects): once a job must wait for resources,
    the jobs behind it wait too, so a large job is never starved by a stream of small ones. A
    job held by its owner's quota does not hold up other users' jobs. A job that could not fit
    even on an empty machine never will, and is reported as such.
    """

    def __init__(
        self,
        capacity: Resources,
        in_use: Resources,
        usage: Mapping[str, Usage] | None = None,
        quotas: Mapping[str, Quota] | None = None,
    ) -> None:
        self.capacity = capacity
        self.free = capacity - in_use
        self.usage = dict(usage or {})
        self.quotas = dict(quotas or {})  # the caller may add owners as it reads on
        self.ahead = Backlog()

    @property
    def waiting(self) -> int:
        """How many jobs wait for resources so far: nothing behind the first of them starts."""
        return self.ahead.count

    def decide(self, job: QueuedJob) -> Decision:
        held = self.usage.get(job.owner, Usage())
        quota_reason = over_quota(job, held, self.quotas.get(job.owner, Quota()))
        if not job.need.fits_in(self.capacity):
            return Decision(job.id, Verdict.NEVER, never_reason(job.need, self.capacity))
        if quota_reason:
            return Decision(job.id, Verdict.WAIT, quota_reason)
        if self.ahead.count:
            decision = Decision(job.id, Verdict.WAIT, waiting_reason(job.owner, self.ahead))
            self.ahead.add(job)
            return decision
        if job.need.fits_in(self.free):
            self.free = self.free - job.need
            self.usage[job.owner] = held.plus(job)
            return Decision(job.id, Verdict.START)
        self.ahead.add(job)
        return Decision(job.id, Verdict.WAIT, job.need.shortfall(self.free))


def never_reason(need: Resources, capacity: Resources) -> str:
    return f"needs more than this platform has: {need.shortfall(capacity, 'in total')}"


EXACT_UP_TO = 100  # jobs ahead counted one by one; beyond, in hundreds


def waiting_reason(owner: str, ahead: Backlog, named: int = 3) -> str:
    """Why a job waits behind others: how many, naming only its owner's own jobs (another
    user's job id is not the owner's to know).

    Beyond the first hundred the count is in hundreds ("400+ jobs"): when the head of the queue
    starts, every exact count behind it changes and must be written again, where a count in
    hundreds changes for one job in a hundred. A deep queue's pass then writes ~100 reasons, not
    a thousand."""
    number = ahead.count
    if number < EXACT_UP_TO:
        count = f"{number:,} job{'s' if number != 1 else ''}"
    else:
        count = f"{number // EXACT_UP_TO * EXACT_UP_TO:,}+ jobs"
    mine = ahead.mine.get(owner, [])
    if not mine:
        return f"waiting for {count} ahead in the queue to start"
    more = ", …" if len(mine) > named else ""
    return (
        f"waiting for {count} ahead in the queue to start (yours: {', '.join(mine[:named])}{more})"
    )


def allocate_devices(free: Sequence[int], per_learner: int, learners: int) -> list[list[int]]:
    """Distinct whole GPUs for each learner, lowest indices first; raises if too few."""
    needed = per_learner * learners
    if needed > len(free):
        raise ValueError(f"needs {needed} GPUs, {len(free)} free")
    ordered = sorted(free)
    return [ordered[i * per_learner : (i + 1) * per_learner] for i in range(learners)]
