"""Caps on how many log lines and metric points one job may store.

Past its cap a job's rows are dropped, not refused: learners keep getting their answer (they
would otherwise resend for ever), and the job's log says once, in a notice line, where it was
cut. Counts are kept in memory, read from the store once per job and process; a reservation is
taken before an insert and what the insert skipped as already stored is given back, so that
concurrent batches never take a job past its cap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from loom.store.logs import Row

# The notice lines' own key: no learner has attempt 0 and learner 0, so they collide with no
# line, and a second notice of the same kind is a duplicate the store skips.
NOTICE_ATTEMPT, NOTICE_LEARNER = 0, 0
LOG_NOTICE_SEQ, METRIC_NOTICE_SEQ = 1, 2

Count = Callable[[Session, str], int]
MAX_JOBS_COUNTED = 10_000  # past it the counts start again from the store: memory stays small


class JobCap:
    """At most `limit` rows of one kind per job (None: no limit)."""

    def __init__(self, limit: int | None, count: Count) -> None:
        self.limit = limit
        self._count = count
        self._stored: dict[str, int] = {}
        self._lock = threading.Lock()

    def admit(self, session: Session, job_id: str, rows: Sequence[Row]) -> Sequence[Row]:
        """The rows that fit under the cap, reserved; call `settle` once they are inserted."""
        if self.limit is None or not rows:
            return rows
        known = job_id in self._stored
        counted = 0 if known else self._count(session, job_id)
        with self._lock:
            if not known and len(self._stored) >= MAX_JOBS_COUNTED:
                self._stored.clear()
            stored = self._stored.setdefault(job_id, counted)
            room = max(0, min(len(rows), self.limit - stored))
            self._stored[job_id] = stored + room
        return rows[:room]

    def settle(self, job_id: str, reserved: int, inserted: int) -> None:
        """Give back what was reserved but not inserted (rows that were stored already)."""
        if self.limit is None or reserved == inserted:
            return
        with self._lock:
            if job_id in self._stored:
                self._stored[job_id] -= reserved - inserted

    def forget(self, job_id: str) -> None:
        """The job's rows were deleted: count them again from the store next time."""
        with self._lock:
            self._stored.pop(job_id, None)


@dataclass(frozen=True)
class Notice:
    """The line that says a job's rows of one kind were cut."""

    seq: int
    what: str
    setting: str

    def row(self, job_id: str, limit: int) -> Row:
        text = (
            f"loom: the {self.what} of this job {'was' if self.what == 'log' else 'were'} cut "
            f"at {limit:,} {'lines' if self.what == 'log' else 'points'}, the limit per job "
            f"({self.setting}); later ones were not stored"
        )
        return (job_id, NOTICE_ATTEMPT, NOTICE_LEARNER, self.seq, time.time(), "stderr", text)


LOG_NOTICE = Notice(LOG_NOTICE_SEQ, "log", "LOOM_MAX_LOG_LINES")
METRIC_NOTICE = Notice(METRIC_NOTICE_SEQ, "metrics", "LOOM_MAX_METRIC_POINTS")
