"""The Training Data Service as one object: log lines and metric points, stored together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from loom.observability import PlatformMetrics
from loom.store import logs as log_rows
from loom.store import metrics as metric_rows
from loom.store import run_info as info_rows
from loom.store import runs as run_rows
from loom.store.db import Database
from loom.store.logs import Row
from loom.store.run_info import Entry
from loom.tds import run_info
from loom.tds.budgets import (
    LOG_NOTICE,
    METRIC_NOTICE,
    RUN_INFO_NOTICE,
    Allowance,
    JobBudget,
    Limits,
    UserRate,
    entry_size,
    line_size,
    point_size,
)
from loom.tds.logs import LogService
from loom.tds.metrics import MetricService, latest_of_rows
from loom.tds.signals import JobSignals

# Points the platform's API takes for a job (not a learner's): no learner has attempt 0.
PLATFORM_ATTEMPT, PLATFORM_LEARNER = 0, 0


class TrainingData:
    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        max_lines: int | None = None,
        max_points: int | None = None,
        platform_metrics: PlatformMetrics | None = None,
        *,
        limits: Limits | None = None,
    ) -> None:
        """`limits`: the platform's budgets (`tds.budgets`); without them, only `max_lines`
        and `max_points` per job."""
        self.db = db
        self.platform_metrics = platform_metrics or PlatformMetrics()
        self.signals = signals
        self.logs = LogService(db, signals)
        self.metrics = MetricService(db, signals)
        limits = limits or Limits(lines=Allowance(max_lines), points=Allowance(max_points))
        self.limits = limits
        self.line_cap = JobBudget(limits.lines, log_rows.usage_lines)
        self.point_cap = JobBudget(limits.points, metric_rows.usage_points)
        self.info_cap = JobBudget(limits.run_info, info_rows.usage)
        self.ingest_rate = UserRate(limits.ingest_bytes_per_s, limits.ingest_burst_bytes)

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
        are refused when `strict` (points sent by a user), else dropped (from a learner).
        Parameters and tags among a learner's points are stored as the job's run info."""
        info, points = run_info.split(points) if not strict else ([], points)
        line_rows = self.logs.rows(job_id, attempt, learner, lines)
        point_rows = self.metrics.rows(job_id, attempt, learner, points, strict=strict)
        if not (line_rows or point_rows or info):
            return
        with self.db.session() as session:
            self._store(session, job_id, line_rows, point_rows)
            self.record_run_info(session, job_id, info)
        self.signals.notify(job_id)

    def record_run_info(
        self,
        session: Session,
        job_id: str,
        entries: Sequence[info_rows.Entry],
        run_id: str | None = None,
    ) -> int:
        """Store parameters and tags of the job's run (`run_id` None) or of a run its code
        started, within the job's budget, which counts all its runs (a key the run has already
        is always taken: a tag's new value replaces the old); how many were refused, said once
        in the job's log. For every path that writes run info (learners' batches, MLflow's API)."""
        if not entries:
            return 0
        run = run_id or job_id
        if self.info_cap.allowance.limited:
            known = info_rows.existing(session, run, [(e[0], e[1]) for e in entries])
        else:
            known = set()
        new = [e for e in entries if (e[0], e[1]) not in known]
        sizes = [entry_size(e) for e in new]
        kept = self.info_cap.admit(session, job_id, new, sizes)
        written = info_rows.record(
            session, run, [*(e for e in entries if (e[0], e[1]) in known), *kept]
        )
        self.info_cap.settle(job_id, sizes[: len(kept)], min(written, len(kept)))
        refused = len(new) - len(kept)
        if refused:
            log_rows.insert_lines(session, [RUN_INFO_NOTICE.row(job_id, self.info_cap.allowance)])
        return refused

    def _store(
        self, session: Session, job_id: str, lines: Sequence[Row], points: Sequence[Row]
    ) -> None:
        """Insert what fits under the job's caps; say once in its log where each was cut."""
        log_rows.lock_job_stream(session, job_id)
        line_sizes = (
            [line_size(row) for row in lines] if self.line_cap.allowance.bytes else [0] * len(lines)
        )
        point_sizes = (
            [point_size(row) for row in points]
            if self.point_cap.allowance.bytes
            else [0] * len(points)
        )
        kept_lines = self.line_cap.admit(session, job_id, lines, line_sizes)
        kept_points = self.point_cap.admit(session, job_id, points, point_sizes)
        try:
            inserted = log_rows.insert_lines(session, kept_lines)
            self.line_cap.settle(job_id, line_sizes[: len(kept_lines)], inserted)
            self.platform_metrics.ingested_lines.inc(inserted)
            inserted = metric_rows.insert_points(session, kept_points)
            self.point_cap.settle(job_id, point_sizes[: len(kept_points)], inserted)
            self.platform_metrics.ingested_points.inc(inserted)
            run_rows.keep_latest(session, latest_of_rows(job_id, kept_points))
        except BaseException:
            self.line_cap.forget(job_id)  # counted again from what the store holds
            self.point_cap.forget(job_id)
            raise
        cuts = (
            (LOG_NOTICE, self.line_cap, len(kept_lines) < len(lines)),
            (METRIC_NOTICE, self.point_cap, len(kept_points) < len(points)),
        )
        for notice, budget, cut in cuts:
            if cut:
                log_rows.insert_lines(session, [notice.row(job_id, budget.allowance)])

    def record_run(
        self,
        job_id: str,
        run_id: str | None,
        points: Sequence[dict[str, Any]],
        info: Sequence[Entry],
    ) -> int:
        """Points, params and tags sent for a job's run (`run_id` None) or a run its code started,
        through the platform's API rather than a learner's stream: numbered after what was sent
        so before (as the platform's own learner, attempt 0, learner 0), capped like any; how
        many params and tags were refused (over the job's budget)."""
        with self.db.session() as session:
            log_rows.lock_job_stream(session, job_id)
            seq = metric_rows.last_seq(session, job_id, PLATFORM_ATTEMPT, PLATFORM_LEARNER)
            numbered = [{**point, "seq": seq + n} for n, point in enumerate(points, start=1)]
            rows = self.metrics.rows(
                job_id, PLATFORM_ATTEMPT, PLATFORM_LEARNER, numbered, run_id=run_id
            )
            self._store(session, job_id, [], rows)
            refused = self.record_run_info(session, job_id, info, run_id)
        self.signals.notify(job_id)
        return refused

    def forget(self, job_id: str) -> None:
        """The job's lines and points were deleted: its caps count afresh."""
        self.line_cap.forget(job_id)
        self.point_cap.forget(job_id)
        self.info_cap.forget(job_id)

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
        info, points = run_info.split(points)
        line_rows = self.logs.rows(job_id, attempt, learner, lines)
        point_rows = self.metrics.rows(job_id, attempt, learner, points, strict=False)
        self._store(session, job_id, line_rows, point_rows)
        self.record_run_info(session, job_id, info)
        return bool(lines or points)

    def delivered(
        self, session: Session, job_id: str, attempt: int, learner: int
    ) -> tuple[int, int]:
        """The last line and point sequence numbers stored for a learner."""
        return (
            log_rows.last_seq(session, job_id, attempt, learner),
            metric_rows.last_seq(session, job_id, attempt, learner),
        )
