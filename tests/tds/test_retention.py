"""Retention deletes the lines and points of jobs that ended long enough ago, and no others."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loom.store import logs as log_rows
from loom.store import metrics as metric_rows
from loom.store.tables import Job
from loom.tds.retention import DAY, Retention
from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals
from tests.tds.test_caps import points
from tests.tds.test_logs import database, lines


def held(tds: TrainingData, job_id: str) -> tuple[int, int]:
    with tds.db.session() as session:
        return (
            log_rows.count_lines(session, job_id),
            metric_rows.count_points(session, job_id),
        )


def ended(tds: TrainingData, job_id: str, state: str, days_ago: float) -> None:
    with tds.db.session() as session:
        job = session.get_one(Job, job_id)
        job.state, job.finished_at = state, time.time() - days_ago * DAY


def add_job(tds: TrainingData, job_id: str) -> None:
    with tds.db.session() as session:
        template = session.get_one(Job, "training-1")
        session.add(
            Job(
                id=job_id, owner_id=template.owner_id, name="t", state="QUEUED", manifest="{}",
                code_digest="x", learners=1, cpus=1, memory=1, gpus=0, submitted_at=0.0,
            )
        )  # fmt: skip


def test_retention_deletes_only_old_ended_jobs_data(tmp_path: Path) -> None:
    """A job that ended 10 days ago loses its lines and points at a 7-day retention; one that
    ended yesterday, and one running again after a resume, keep theirs."""
    tds = TrainingData(database(tmp_path), JobSignals(), max_lines=100)
    for job_id in ("training-2", "training-3"):
        add_job(tds, job_id)
    for job_id in ("training-1", "training-2", "training-3"):
        tds.ingest(job_id, 1, 1, lines(1, 30), points(1, 5))
    ended(tds, "training-1", "COMPLETED", days_ago=10)
    ended(tds, "training-2", "FAILED", days_ago=1)
    ended(tds, "training-3", "PROCESSING", days_ago=10)  # resumed: finished_at is stale
    retention = Retention(tds, days=7)
    assert retention.sweep() == ["training-1"]
    assert held(tds, "training-1") == (0, 0)
    assert held(tds, "training-2") == (30, 5)
    assert held(tds, "training-3") == (30, 5)
    assert retention.sweep() == []


def test_retention_deletes_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More rows than one chunk are all deleted, chunk by chunk."""
    monkeypatch.setattr("loom.tds.retention.CHUNK", 7)
    tds = TrainingData(database(tmp_path), JobSignals())
    tds.ingest("training-1", 1, 1, lines(1, 50), points(1, 20))
    ended(tds, "training-1", "HALTED", days_ago=3)
    Retention(tds, days=2).sweep()
    assert held(tds, "training-1") == (0, 0)
