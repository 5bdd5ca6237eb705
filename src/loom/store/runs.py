"""Runs: their rows, their params, tags and latest metrics read a page at a time, the metric
history of runs outside jobs, and each run's latest values kept as points arrive."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from loom.domain.runs import (
    DEFAULT_PROJECT,
    Metric,
    RunRecord,
    Stage,
    job_status,
    ms,
    shown_value,
    stored_value,
)
from loom.store import projects as project_rows
from loom.store.logs import insert_ignoring_duplicates
from loom.store.tables import Job, Run, RunInfo, RunLatestMetric, RunMetric, TrackedFile

METRIC_COLUMNS = ("run_id", "key", "value", "is_nan", "step", "timestamp")
Latest = dict[tuple[str, str], Metric]  # (run, key) → the newest value seen


def new_run_id() -> str:
    return uuid.uuid4().hex


def artifact_uri(project_id: int, run_id: str) -> str:
    """Where a run's artifacts are, as MLflow's client reaches them through the platform."""
    return f"mlflow-artifacts:/{project_id}/{run_id}/artifacts"


def job_run(job: Job, owner_name: str, project_id: int = DEFAULT_PROJECT) -> Run:
    """The run that a job is: its id, owner, name and times, its status from its state. A
    trial's run is named by its experiment and its number."""
    return Run(
        id=job.id,
        project_id=project_id,
        owner_id=job.owner_id,
        job_id=job.id,
        name=run_name(job)[:250],
        user_id=owner_name,
        status=job_status(job.state).value,
        start_time=ms(job.submitted_at),
        end_time=ms(job.finished_at) if job.finished_at is not None else None,
        stage=Stage.ACTIVE.value,
        artifact_uri=artifact_uri(project_id, job.id),
        inputs=[],
        outputs=[],
    )


def run_name(job: Job) -> str:
    lineage = job.lineage or {}
    if lineage.get("kind") == "experiment" and lineage.get("experiment"):
        return f"{lineage['experiment']} · trial {lineage.get('trial')}"
    return job.name


def project_of_job(session: Session, job: Job) -> int:
    """Where a job's run goes: a trial's into its experiment's project ("trials of NAME", made
    the first time), any other into the Default project."""
    lineage = job.lineage or {}
    if lineage.get("kind") != "experiment" or not lineage.get("experiment"):
        return DEFAULT_PROJECT
    name = f"trials of {lineage['experiment']}"[:500]
    found = project_rows.named(session, job.owner_id, name)
    if found is None:
        found = project_rows.create(session, job.owner_id, name, ms(job.submitted_at))
    return found.id


def follow_job(session: Session, job: Job) -> None:
    """A job moved: its run's status and end follow."""
    run = session.get(Run, job.id)
    if run is None:
        return
    run.status = job_status(job.state).value
    run.end_time = ms(job.finished_at) if job.finished_at is not None else None


def get_run(session: Session, run_id: str) -> Run | None:
    return session.get(Run, run_id)


def started_by_job(session: Session, job_id: str, limit: int = 100) -> list[Run]:
    """The runs a job's code started (not the job's own), oldest first."""
    query = select(Run).where(Run.job_id == job_id, Run.id != job_id)
    return list(session.scalars(query.order_by(Run.start_time, Run.id).limit(limit)))


def record(session: Session, run: Run) -> RunRecord:
    return records(session, [run])[0]


def records(session: Session, runs: Sequence[Any]) -> list[RunRecord]:
    """The runs with their params, tags and latest metrics: three queries for a whole page,
    read as plain rows (a page of 1,000 runs is some 10,000 of them)."""
    found = {run.id: _bare(run) for run in runs}
    ids = list(found)
    info = (RunInfo.run_id, RunInfo.kind, RunInfo.key, RunInfo.value)
    last = (
        RunLatestMetric.run_id,
        RunLatestMetric.key,
        RunLatestMetric.value,
        RunLatestMetric.is_nan,
        RunLatestMetric.timestamp,
        RunLatestMetric.step,
    )
    for chunk in _chunks(ids):
        query = select(*info).where(RunInfo.run_id.in_(chunk)).order_by(RunInfo.key)
        for run_id, kind, key, text in session.execute(query):
            held = found[run_id]
            (held.params if kind == "param" else held.tags)[key] = text
        latest = select(*last).where(RunLatestMetric.run_id.in_(chunk))
        for run_id, key, value, is_nan, timestamp, step in session.execute(
            latest.order_by(RunLatestMetric.key)
        ):
            found[run_id].metrics.append(Metric(key, shown_value(value, is_nan), timestamp, step))
    return [found[run.id] for run in runs]


def _bare(run: Any) -> RunRecord:
    """A run (an ORM object, or a row of the runs table) with nothing of its own yet."""
    return RunRecord(
        id=run.id,
        project_id=run.project_id,
        owner_id=run.owner_id,
        name=run.name,
        user_id=run.user_id,
        status=run.status,
        start_time=run.start_time,
        end_time=run.end_time,
        stage=run.stage,
        artifact_uri=run.artifact_uri,
        job_id=run.job_id,
    )


def _metric(row: RunMetric | RunLatestMetric) -> Metric:
    return Metric(row.key, shown_value(row.value, row.is_nan), row.timestamp, row.step)


def _chunks(ids: list[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


# -- metrics ------------------------------------------------------------------------------------
def insert_metrics(session: Session, run_id: str, metrics: Sequence[Metric]) -> None:
    """A batch of a run's values (a run outside jobs); a value logged again is kept once."""
    rows = []
    for key, number, timestamp, step in metrics:
        if number - number == 0.0:  # finite: the common case, kept as it is
            rows.append((run_id, key, number, False, step, timestamp))
        else:
            value, nan = stored_value(number)
            rows.append((run_id, key, value, nan, step, timestamp))
    insert_ignoring_duplicates(session, RunMetric.__tablename__, METRIC_COLUMNS, rows)


def newest(metrics: Iterable[tuple[str, Metric]]) -> Latest:
    """The latest value of each (run, key) among these (by step, time, then value; NaN as 0)."""
    latest: Latest = {}
    orders: dict[tuple[str, str], tuple[int, int, float]] = {}
    for run_id, metric in metrics:
        value = metric.value
        order = (metric.step, metric.timestamp, 0.0 if math.isnan(value) else value)
        where = (run_id, metric.key)
        held = orders.get(where)
        if held is None or order > held:
            orders[where], latest[where] = order, metric
    return latest


def keep_latest(session: Session, latest: Latest) -> None:
    """Store each value unless a newer one (by step, time, value) is stored already."""
    if not latest:
        return
    runs = {run_id for run_id, _key in latest}
    known = set(session.scalars(select(Run.id).where(Run.id.in_(list(runs)))))
    if not known:
        return  # a job stored without its run (older code, tests): its points go in regardless
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    rows = []
    for (run_id, key), metric in sorted(latest.items()):  # one lock order for every writer
        if run_id not in known:
            continue
        value, nan = stored_value(metric.value)
        rows.append(
            {
                "run_id": run_id,
                "key": key,
                "value": value,
                "is_nan": nan,
                "step": metric.step,
                "timestamp": metric.timestamp,
            }
        )
    statement: Any = dialect.insert(RunLatestMetric)
    new = statement.excluded
    table = RunLatestMetric
    statement = statement.on_conflict_do_update(
        index_elements=[table.run_id, table.key],
        set_={
            "value": new.value,
            "is_nan": new.is_nan,
            "step": new.step,
            "timestamp": new.timestamp,
        },
        where=tuple_(new.step, new.timestamp, new.value)
        > tuple_(table.step, table.timestamp, table.value),
    )
    session.execute(statement, rows)


def history(session: Session, run_id: str, key: str) -> list[Metric]:
    """Every value of a metric of a run outside jobs, by time, then step, then value."""
    query = (
        select(RunMetric)
        .where(RunMetric.run_id == run_id, RunMetric.key == key)
        .order_by(RunMetric.timestamp, RunMetric.step, RunMetric.value)
    )
    return [_metric(row) for row in session.scalars(query)]


# -- lifecycle ----------------------------------------------------------------------------------
def set_stage(session: Session, run: Run, stage: Stage, now_ms: int) -> None:
    run.stage = stage.value
    run.deleted_at = now_ms if stage is Stage.DELETED else None


def delete_of_job(session: Session, job_id: str) -> None:
    """A job deleted: its run and the runs its code started go with it, files and all."""
    ids = list(session.scalars(select(Run.id).where(Run.job_id == job_id)))
    for chunk in _chunks(ids):
        for table in (RunInfo, RunMetric, RunLatestMetric):
            session.execute(delete(table).where(table.run_id.in_(chunk)))
        session.execute(delete(TrackedFile).where(TrackedFile.container.in_(chunk)))
        session.execute(delete(Run).where(Run.id.in_(chunk)))
