"""One scheduling pass over the queue, as read from the store: which jobs start, which never
can, and why the others wait (their reasons are written here). The lifecycle admits the first
and fails the second.

The queue is read in chunks of light rows and only until `scheduler_horizon` jobs wait for
resources: under strict FIFO nothing behind them can start. The jobs behind are told so in one
statement, and those that could never fit are found by one query. Only reasons that changed are
written, in one statement: a pass over 10,000 queued jobs stays short."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from loom.domain.resources import Resources
from loom.launchers.base import Launcher
from loom.lifecycle.admission import holdings, placement_check, quotas
from loom.lifecycle.scheduler import Planner, QueuedJob, Verdict, never_reason
from loom.settings import Settings
from loom.store import jobs as job_rows

CHUNK = 500  # queued jobs read at a time


@dataclass
class Outcome:
    starts: list[str] = field(default_factory=list)  # in queue order
    never: list[tuple[str, str]] = field(default_factory=list)  # (job id, reason)
    taken_devices: set[int] = field(default_factory=set)  # GPUs running learners hold


def run(session: Session, launcher: Launcher, settings: Settings) -> Outcome:
    """On a cluster launcher, a job must also fit its nodes (`placeable`), and one that does
    not fit the cluster now waits, since it may grow (`elastic`)."""
    rows = job_rows.queue(session, None, CHUNK)
    if not rows:
        return Outcome()
    placeable = placement_check(session, launcher)
    held = holdings(session)
    total = launcher.capacity()
    planner = Planner(total, held.in_use, held.per_user)
    found = Outcome(taken_devices=held.devices)
    reasons: dict[str, str] = {}
    while rows:
        wanted = {r.owner_id for r in rows} - planner.quotas.keys()
        planner.quotas |= quotas(session, wanted, settings)
        for row in rows:
            need = Resources(row.cpus, row.memory, row.gpus)
            decision = planner.decide(QueuedJob(row.id, need, row.learners, row.owner_id))
            where = placeable(row.id) if placeable and decision.verdict == Verdict.START else None
            if where is not None and where.never:
                found.never.append((row.id, where.reason))
            elif where is not None:  # waits for the nodes; its share stays counted this pass
                if row.queue_reason != where.reason:
                    reasons[row.id] = where.reason
            elif decision.verdict == Verdict.START:
                found.starts.append(row.id)
            elif decision.verdict == Verdict.NEVER:
                found.never.append((row.id, decision.reason))
            elif row.queue_reason != decision.reason:
                reasons[row.id] = decision.reason
        last = (rows[-1].priority, rows[-1].submitted_at, rows[-1].id)
        if planner.waiting >= settings.scheduler_horizon:
            found.never += _beyond_horizon(session, last, total, settings.scheduler_horizon)
            break
        rows = job_rows.queue(session, last, CHUNK)
    if launcher.elastic:  # a cluster may grow (a node back, another added): nothing fails now
        reasons |= {job: f"waiting for the cluster to grow: {why}" for job, why in found.never}
        found.never = []
    job_rows.set_queue_reasons(session, reasons)
    return found


def _beyond_horizon(
    session: Session, last: job_rows.QueueKey, total: Resources, horizon: int
) -> list[tuple[str, str]]:
    """Tell the queue behind the horizon it waits; return those of it that could never fit."""
    never = [
        (row.id, never_reason(Resources(row.cpus, row.memory, row.gpus).times(row.learners), total))
        for row in job_rows.never_fitting(session, last, total.cpus, total.memory, total.gpus)
    ]
    reason = f"waiting for more than {horizon:,} jobs ahead in the queue to start"
    job_rows.set_reason_behind(session, last, reason)
    return never
