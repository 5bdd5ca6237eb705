"""The Training Data Service as one object: log lines and metric points, stored together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from loom.store import logs as log_rows
from loom.store import metrics as metric_rows
from loom.store.db import Database
from loom.tds.logs import LogService
from loom.tds.metrics import MetricService
from loom.tds.signals import JobSignals


class TrainingData:
    def __init__(self, db: Database, signals: JobSignals) -> None:
        self.db = db
        self.signals = signals
        self.logs = LogService(db, signals)
        self.metrics = MetricService(db, signals)

    def ingest(
        self,
        job_id: str,
        attempt: int,
        learner: int,
        lines: Sequence[dict[str, Any]],
        points: Sequence[dict[str, Any]],
        *,
        strict: bool = False,
    ) -> None:
        """One batch in one transaction; anything already stored is skipped. Malformed points
        are refused when `strict` (points sent by a user), else dropped (from a learner)."""
        line_rows = self.logs.rows(job_id, attempt, learner, lines)
        point_rows = self.metrics.rows(job_id, attempt, learner, points, strict=strict)
        if not (line_rows or point_rows):
            return
        with self.db.session() as session:
            log_rows.insert_lines(session, line_rows)
            metric_rows.insert_points(session, point_rows)
        self.signals.notify(job_id)

    def backfill(
        self,
        session: Session,
        job_id: str,
        attempt: int,
        learner: int,
        spooled: Sequence[dict[str, Any]],
    ) -> bool:
        """Store, in the caller's transaction, what a learner spooled but never delivered."""
        stored_lines = log_rows.last_seq(session, job_id, attempt, learner)
        stored_points = metric_rows.last_seq(session, job_id, attempt, learner)
        lines = [e for e in spooled if e.get("k") is None and int(e["seq"]) > stored_lines]
        points = [e for e in spooled if e.get("k") == "m" and int(e["seq"]) > stored_points]
        log_rows.insert_lines(session, self.logs.rows(job_id, attempt, learner, lines))
        point_rows = self.metrics.rows(job_id, attempt, learner, points, strict=False)
        metric_rows.insert_points(session, point_rows)
        return bool(lines or points)

    def delivered(
        self, session: Session, job_id: str, attempt: int, learner: int
    ) -> tuple[int, int]:
        """The last line and point sequence numbers stored for a learner."""
        return (
            log_rows.last_seq(session, job_id, attempt, learner),
            metric_rows.last_seq(session, job_id, attempt, learner),
        )
