"""Jobs, their history and their learners."""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import (
    ColumnElement,
    Row,
    String,
    and_,
    column,
    delete,
    func,
    literal_column,
    or_,
    select,
    tuple_,
    update,
    values,
)
from sqlalchemy.orm import Session

from loom.store import runs as run_rows
from loom.store.tables import (
    Job,
    JobEvent,
    JobSecret,
    Learner,
    LogLine,
    MetricPoint,
    Token,
    User,
)

_ID_CHARS = string.ascii_lowercase + string.digits


def new_job_id() -> str:
    return "training-" + "".join(secrets.choice(_ID_CHARS) for _ in range(10))


def queued_for(session: Session, job: Job) -> float:
    """Seconds since the job last entered QUEUED (submitted, resumed or queued again)."""
    queued = [e.at for e in history(session, job.id) if e.state == "QUEUED"]
    return max(0.0, time.time() - max(queued, default=job.submitted_at))


def add_job(session: Session, job: Job) -> Job:
    """Store a new job, its first event, and the run it is."""
    session.add(job)
    session.add(JobEvent(job_id=job.id, state=job.state, at=job.submitted_at, message="submitted"))
    session.flush()
    owner = session.get(User, job.owner_id)
    project = run_rows.project_of_job(session, job)
    session.add(run_rows.job_run(job, owner.name if owner is not None else job.owner_id, project))
    session.flush()
    return job


def get_job(session: Session, job_id: str, *, lock: bool = False) -> Job | None:
    query = select(Job).where(Job.id == job_id)
    if lock and session.bind is not None and session.bind.dialect.name == "postgresql":
        query = query.with_for_update()
    return session.scalars(query).first()


COUNT_UP_TO = 10_000  # a listing's total is exact up to this many jobs, and "more" beyond


@dataclass(frozen=True)
class JobPage:
    jobs: list[Job]
    total: int  # at most COUNT_UP_TO
    after: tuple[float, str] | None  # where the next page starts; None on the last page
    total_exact: bool = True  # False: more than `total` jobs match


def list_jobs(
    session: Session,
    *,
    owner_id: str | None = None,
    states: Collection[str] = (),
    offset: int = 0,
    limit: int = 50,
    after: tuple[float, str] | None = None,
    name: str | None = None,
) -> JobPage:
    """A page of jobs, newest first (by submission time, then id), and the total that match
    (`name`: those whose name holds it, in any case).

    `after` (the last job of the previous page's `(submitted_at, id)`) is keyset paging: an
    index range scan that costs the same on page 1 and page 2,000, where `offset` walks past
    every row before the page."""
    query = select(Job)
    if owner_id is not None:
        query = query.where(Job.owner_id == owner_id)
    if states:
        query = query.where(Job.state.in_(list(states)))
    if name:
        escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(Job.name.ilike(f"%{escaped}%", escape="\\"))
    # Counting stops at COUNT_UP_TO + 1 rows: a count of 100,000 jobs is a scan of them all (10
    # ms on PostgreSQL, and growing with the history), and nobody pages through 10,000 anyway.
    capped = query.with_only_columns(Job.id).limit(COUNT_UP_TO + 1).subquery()
    found = session.scalar(select(func.count()).select_from(capped)) or 0
    if after is not None:
        query = query.where(tuple_(Job.submitted_at, Job.id) < tuple_(*after))
    newest_first = query.order_by(Job.submitted_at.desc(), Job.id.desc())
    page = list(session.scalars(newest_first.offset(offset).limit(limit + 1)))
    more = len(page) > limit
    page = page[:limit]
    after_last = (page[-1].submitted_at, page[-1].id) if more else None
    return JobPage(page, min(found, COUNT_UP_TO), after_last, found <= COUNT_UP_TO)


def jobs_in_states(session: Session, states: Collection[str]) -> list[Job]:
    """Jobs in the given states, in queue order: priority first, then submission time."""
    query = (
        select(Job)
        .where(Job.state.in_(list(states)))
        .order_by(Job.priority.desc(), Job.submitted_at, Job.id)
    )
    return list(session.scalars(query))


# Written into the SQL, not bound: PostgreSQL's generic plan for a prepared `state = $1` cannot
# use the queue's partial index (`WHERE state = 'QUEUED'`), and sorts the whole queue instead.
_QUEUED = Job.state == literal_column("'QUEUED'")

QueueKey = tuple[int, float, str]  # (priority, submitted_at, id): a job's place in the queue


def _behind(key: QueueKey) -> ColumnElement[bool]:
    """Jobs after `key` in queue order (priority descending, then submission, then id)."""
    priority, submitted_at, job_id = key
    same = and_(Job.priority == priority, tuple_(Job.submitted_at, Job.id) > (submitted_at, job_id))
    return or_(Job.priority < priority, same)


def queue(
    session: Session, after: QueueKey | None = None, limit: int | None = None
) -> Sequence[Row[str, str, float, int, int, int, str, int, float]]:
    """Queued jobs in queue order (priority, then submission), as light rows: `id`,
    `owner_id`, `cpus`, `memory`, `gpus`, `learners`, `queue_reason`, `priority`,
    `submitted_at`; not the manifest, nor anything else large. `after` and `limit` read it in
    chunks."""
    query = select(
        Job.id,
        Job.owner_id,
        Job.cpus,
        Job.memory,
        Job.gpus,
        Job.learners,
        Job.queue_reason,
        Job.priority,
        Job.submitted_at,
    ).where(_QUEUED)
    if after is not None:
        query = query.where(_behind(after))
    query = query.order_by(Job.priority.desc(), Job.submitted_at, Job.id).limit(limit)
    return session.execute(query).all()


def never_fitting(
    session: Session, after: QueueKey, cpus: float, memory: int, gpus: int
) -> Sequence[Row[str, float, int, int, int]]:
    """Queued jobs after `after` whose learners together need more than the whole platform:
    `id`, `cpus`, `memory`, `gpus`, `learners`."""
    too_big = or_(
        Job.cpus * Job.learners > cpus + 1e-9,
        Job.memory * Job.learners > memory,
        Job.gpus * Job.learners > gpus,
    )
    query = select(Job.id, Job.cpus, Job.memory, Job.gpus, Job.learners)
    return session.execute(query.where(_QUEUED, _behind(after), too_big)).all()


def set_reason_behind(session: Session, after: QueueKey, reason: str) -> None:
    """One reason for every queued job after `after` (one statement, rows already so skipped)."""
    session.execute(
        update(Job)
        .where(_QUEUED, _behind(after), Job.queue_reason != reason)
        .values(queue_reason=reason)
        .execution_options(synchronize_session=False)
    )


def count_in_state(session: Session, state: str) -> int:
    return int(session.scalar(select(func.count()).where(Job.state == state)) or 0)


REASONS_PER_STATEMENT = 1000


def set_queue_reasons(session: Session, reasons: dict[str, str]) -> None:
    """Set many queued jobs' reasons. On PostgreSQL, a thousand per statement: `UPDATE … FROM
    (VALUES …)` joins the new reasons by id, where an update per row costs a round trip each (85
    ms for a thousand reasons). SQLite has no round trips, and no `VALUES` with column names in
    `FROM`: there, one prepared update runs for each row."""
    if not reasons:
        return
    if session.get_bind().dialect.name != "postgresql":
        rows = [{"id": job_id, "queue_reason": reason} for job_id, reason in reasons.items()]
        session.execute(update(Job), rows)
        return
    pairs = list(reasons.items())
    for start in range(0, len(pairs), REASONS_PER_STATEMENT):
        new = values(column("id", String), column("reason", String), name="new_reasons")
        new = new.data(pairs[start : start + REASONS_PER_STATEMENT])
        session.execute(
            update(Job)
            .where(Job.id == new.c.id)
            .values(queue_reason=new.c.reason)
            .execution_options(synchronize_session=False)
        )


def record_event(session: Session, job: Job, state: str, message: str = "") -> None:
    now = time.time()
    session.add(JobEvent(job_id=job.id, state=state, at=now, message=message))


def history(session: Session, job_id: str) -> list[JobEvent]:
    query = select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
    return list(session.scalars(query))


def learners_of(session: Session, job_id: str, attempt: int | None = None) -> list[Learner]:
    query = select(Learner).where(Learner.job_id == job_id)
    if attempt is not None:
        query = query.where(Learner.attempt == attempt)
    return list(session.scalars(query.order_by(Learner.attempt, Learner.learner_id)))


def get_learner(session: Session, job_id: str, attempt: int, learner_id: int) -> Learner | None:
    query = select(Learner).where(
        Learner.job_id == job_id, Learner.attempt == attempt, Learner.learner_id == learner_id
    )
    return session.scalars(query).first()


def delete_job(session: Session, job_id: str) -> None:
    """Remove a job and everything stored about it, its run and the runs its code started."""
    run_rows.delete_of_job(session, job_id)
    for table in (LogLine, MetricPoint, Learner, JobEvent, JobSecret):
        session.execute(delete(table).where(table.job_id == job_id))
    session.execute(delete(Token).where(Token.job_id == job_id))
    session.execute(delete(Job).where(Job.id == job_id))


def active_learners(session: Session, terminal: Collection[str]) -> list[tuple[Learner, Job]]:
    """Learners not yet known to have ended, of any job, with their job."""
    query = (
        select(Learner, Job)
        .join(Job, Job.id == Learner.job_id)
        .where(Learner.state.not_in(list(terminal)))
        .order_by(Job.submitted_at, Learner.learner_id)
    )
    return [(row[0], row[1]) for row in session.execute(query)]


def active_learners_of(session: Session, job_id: str, terminal: Collection[str]) -> list[Learner]:
    query = select(Learner).where(Learner.job_id == job_id, Learner.state.not_in(list(terminal)))
    return list(session.scalars(query))


def add_learners(session: Session, learners: Sequence[Learner]) -> None:
    session.add_all(learners)
    session.flush()
