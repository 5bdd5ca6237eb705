"""The scheduler's decisions, as pure functions."""

from __future__ import annotations

from loom.domain.resources import Resources
from loom.lifecycle.scheduler import (
    Backlog,
    Decision,
    Planner,
    QueuedJob,
    Quota,
    Usage,
    Verdict,
    waiting_reason,
)

GIB = 2**30
MACHINE = Resources(cpus=2, memory=8 * GIB, gpus=0)


def plan(
    queue: list[QueuedJob],
    capacity: Resources,
    in_use: Resources,
    usage: dict[str, Usage] | None = None,
    quotas: dict[str, Quota] | None = None,
) -> list[Decision]:
    """The planner's decisions for a whole queue, in order."""
    planner = Planner(capacity, in_use, usage, quotas)
    return [planner.decide(job) for job in queue]


def job(name: str, cpus: float, learners: int = 1, gpus: int = 0) -> QueuedJob:
    return QueuedJob(name, Resources(cpus, GIB, gpus), learners)


def test_gang_starts_only_when_all_learners_fit() -> None:
    """Two learners of one CPU each need both cores: with one in use the job waits."""
    decisions = plan([job("a", 1, learners=2)], MACHINE, Resources(1, GIB, 0))
    assert decisions[0].verdict == Verdict.WAIT
    assert decisions[0].reason == "needs 2 CPUs, 1 free"


def test_fifo_holds_later_jobs_behind_a_waiting_one() -> None:
    """A small job does not overtake a big one that waits (no starvation)."""
    decisions = plan([job("big", 2), job("small", 0.5)], MACHINE, Resources(1, 0, 0))
    assert [d.verdict for d in decisions] == [Verdict.WAIT, Verdict.WAIT]
    assert "big" in decisions[1].reason


def test_jobs_start_in_order_until_full() -> None:
    """Jobs start in queue order while they fit, and capacity is never oversubscribed."""
    decisions = plan([job("a", 1), job("b", 1), job("c", 1)], MACHINE, Resources())
    assert [d.verdict for d in decisions] == [Verdict.START, Verdict.START, Verdict.WAIT]


def test_impossible_job_is_reported_and_does_not_block() -> None:
    """A job larger than the whole platform can never run; the queue goes on behind it."""
    decisions = plan([job("huge", 1, gpus=1), job("b", 1)], MACHINE, Resources())
    assert decisions[0].verdict == Verdict.NEVER
    assert "GPUs" in decisions[0].reason
    assert decisions[1].verdict == Verdict.START


def test_quota_holds_only_that_users_jobs() -> None:
    """A job over its owner's quota waits with the reason; other users' jobs go ahead."""

    a1 = QueuedJob("a1", Resources(1, GIB, 0), 1, owner="ann")
    b1 = QueuedJob("b1", Resources(1, GIB, 0), 1, owner="bob")
    usage = {"ann": Usage(Resources(1, GIB, 0), 1)}
    decisions = plan([a1, b1], Resources(4, 8 * GIB, 0), Resources(1, GIB, 0), usage,
                     {"ann": Quota(cpus=1)})  # fmt: skip
    assert decisions[0].reason == "quota: 1 of 1 CPUs in use by your running jobs"
    assert decisions[1].verdict == Verdict.START


def test_quota_counts_jobs_started_in_the_same_pass() -> None:
    """Two queued jobs of one user with a one-job quota: only the first starts."""

    jobs = [QueuedJob(n, Resources(0.5, GIB, 0), 1, owner="ann") for n in ("x", "y")]
    decisions = plan(jobs, MACHINE, Resources(), {}, {"ann": Quota(jobs=1)})
    assert [d.verdict for d in decisions] == [Verdict.START, Verdict.WAIT]
    assert "running jobs" in decisions[1].reason


def test_devices_are_distinct() -> None:
    """Each learner gets its own GPUs, from the free ones, lowest first."""
    import pytest

    from loom.lifecycle.scheduler import allocate_devices

    assert allocate_devices([3, 1, 2, 0], 2, 2) == [[0, 1], [2, 3]]
    assert allocate_devices([5], 0, 3) == [[], [], []]
    with pytest.raises(ValueError):
        allocate_devices([0], 1, 2)


def backlog(jobs: list[QueuedJob]) -> Backlog:
    found = Backlog()
    for job in jobs:
        found.add(job)
    return found


def test_waiting_reason_never_names_another_users_job() -> None:
    """A job held behind other users' jobs is told how many, not which."""
    theirs = [QueuedJob(f"training-bob{i}", Resources(1, GIB, 0), 1, owner="bob") for i in (1, 2)]
    assert (
        waiting_reason("ann", backlog(theirs)) == "waiting for 2 jobs ahead in the queue to start"
    )
    one = backlog(theirs[:1])
    assert waiting_reason("ann", one) == "waiting for 1 job ahead in the queue to start"
    many = backlog([theirs[0]] * 12_345)
    assert waiting_reason("ann", many) == "waiting for 12,300+ jobs ahead in the queue to start"


def test_waiting_reason_names_only_the_owners_own_jobs() -> None:
    """Among the jobs ahead, the owner's own are named, at most three of them."""
    owners = [("b1", "bob"), ("a1", "ann"), ("a2", "ann"), ("a3", "ann"), ("a4", "ann")]
    ahead = [QueuedJob(n, Resources(1, GIB, 0), 1, owner=o) for n, o in owners]
    reason = waiting_reason("ann", backlog(ahead))
    assert reason == "waiting for 5 jobs ahead in the queue to start (yours: a1, a2, a3, …)"
    assert "b1" not in reason


def test_plan_hides_the_blocking_job_of_another_user() -> None:
    """Bob's job waits behind Ann's big one: its reason counts the jobs ahead, names none."""
    big = QueuedJob("training-ann", Resources(2, GIB, 0), 1, owner="ann")
    small = QueuedJob("training-bob", Resources(0.5, GIB, 0), 1, owner="bob")
    later = QueuedJob("training-ann2", Resources(0.5, GIB, 0), 1, owner="ann")
    decisions = plan([big, small, later], MACHINE, Resources(1, 0, 0))
    assert decisions[1].reason == "waiting for 1 job ahead in the queue to start"
    assert decisions[2].reason == (
        "waiting for 2 jobs ahead in the queue to start (yours: training-ann)"
    )


def test_a_start_at_the_head_changes_few_reasons_of_a_deep_queue() -> None:
    """Counts are exact below 100 jobs ahead, in hundreds beyond: when the head starts, the
    reasons of the first hundred change and only about one in a hundred of the rest (the head
    left, the machine full again)."""
    queue = [QueuedJob(f"j{n}", Resources(1, GIB, 0), 1, owner=f"u{n}") for n in range(1000)]
    full = {d.job_id: d.reason for d in plan(queue, MACHINE, Resources(2, 0, 0))}
    after = {d.job_id: d.reason for d in plan(queue[1:], MACHINE, Resources(2, 0, 0))}
    assert full["j1"] == "waiting for 1 job ahead in the queue to start"
    assert full["j99"] == "waiting for 99 jobs ahead in the queue to start"
    assert full["j100"] == "waiting for 100+ jobs ahead in the queue to start"
    assert full["j999"] == "waiting for 900+ jobs ahead in the queue to start"
    changed = [job_id for job_id in after if after[job_id] != full[job_id]]
    assert 100 <= len(changed) <= 110, len(changed)
