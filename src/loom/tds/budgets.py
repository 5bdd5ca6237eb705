"""What a job may push into the platform's store, and how fast its owner may push it.

Every byte a job sends through a platform process lands here: its log lines, metric points and
parameters/tags (from its wrapper's batches, the tracking SDK, MLflow's API, or points its owner
logs from outside). Two kinds of budget:

- per job, in rows and in bytes (`JobBudget`): past either, what does not fit is dropped, not
  refused — a learner would otherwise resend for ever — and the job's log says once, in a
  notice line, what was cut and which setting says so;
- per user, in bytes a second over all their jobs (`UserRate`, a token bucket): past it the API
  answers 429 with `Retry-After`, and a learner's shipper waits and resends (nothing is lost).

Counts are kept in memory, read from the store once per job and process; a reservation is taken
before an insert and what the insert skipped as already stored is given back, so concurrent
batches never take a job past its budget. Both the platform's own routes and the MLflow dialect
call the same objects: `TrainingData.budgets`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.orm import Session

from loom.domain.errors import TooManyRequests
from loom.store.logs import Row

# The notice lines' own key: no learner has attempt 0 and learner 0, so they collide with no
# line, and a second notice of the same kind is a duplicate the store skips.
NOTICE_ATTEMPT, NOTICE_LEARNER = 0, 0
LOG_NOTICE_SEQ, METRIC_NOTICE_SEQ, RUN_INFO_NOTICE_SEQ = 1, 2, 3

Count = Callable[[Session, str], tuple[int, int]]  # a job's (rows, bytes) in the store
MAX_JOBS_COUNTED = 10_000  # past it the counts start again from the store: memory stays small
T = TypeVar("T")


@dataclass(frozen=True)
class Allowance:
    """At most `rows` rows and `bytes` bytes of one kind per job (None: no limit)."""

    rows: int | None = None
    bytes: int | None = None

    @property
    def limited(self) -> bool:
        return self.rows is not None or self.bytes is not None


class JobBudget:
    """One kind of a job's rows (log lines, points, run info) held to its `Allowance`."""

    def __init__(self, allowance: Allowance, count: Count) -> None:
        self.allowance = allowance
        self._count = count
        self._stored: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def admit(
        self, session: Session, job_id: str, items: Sequence[T], sizes: Sequence[int]
    ) -> Sequence[T]:
        """The leading items that fit, reserved; call `settle` once they are inserted."""
        if not self.allowance.limited or not items:
            return items
        known = job_id in self._stored
        counted = (0, 0) if known else self._count(session, job_id)
        with self._lock:
            if not known and len(self._stored) >= MAX_JOBS_COUNTED:
                self._stored.clear()
            rows, size = self._stored.setdefault(job_id, counted)
            room = self._room(rows, size, sizes)
            self._stored[job_id] = (rows + room, size + sum(sizes[:room]))
        return items[:room]

    def _room(self, rows: int, size: int, sizes: Sequence[int]) -> int:
        room = len(sizes)
        if self.allowance.rows is not None:
            room = max(0, min(room, self.allowance.rows - rows))
        if self.allowance.bytes is not None:
            left, fits = self.allowance.bytes - size, 0
            for item in sizes[:room]:
                if item > left:
                    break
                left -= item
                fits += 1
            room = fits
        return room

    def settle(self, job_id: str, reserved: Sequence[int], inserted: int) -> None:
        """Give back what was reserved but not inserted (rows that were stored already: the
        store skips duplicates, which are resends of the same rows, so sizes are averaged)."""
        if not self.allowance.limited or len(reserved) == inserted:
            return
        skipped = len(reserved) - inserted
        average = sum(reserved) // max(len(reserved), 1)
        with self._lock:
            if job_id in self._stored:
                rows, size = self._stored[job_id]
                self._stored[job_id] = (rows - skipped, max(0, size - skipped * average))

    def forget(self, job_id: str) -> None:
        """The job's rows were deleted: count them again from the store next time."""
        with self._lock:
            self._stored.pop(job_id, None)

    def used(self, job_id: str) -> tuple[int, int] | None:
        with self._lock:
            return self._stored.get(job_id)


@dataclass(frozen=True)
class Notice:
    """The line that says a job's rows of one kind were cut."""

    seq: int
    what: str  # "log", "metrics", "parameters and tags"
    unit: str  # lines, points, entries
    settings: tuple[str, str]  # the rows' setting, the bytes'

    def row(self, job_id: str, allowance: Allowance) -> Row:
        limits = []
        if allowance.rows is not None:
            limits.append(f"{allowance.rows:,} {self.unit} ({self.settings[0]})")
        if allowance.bytes is not None:
            limits.append(f"{allowance.bytes / 2**20:,.0f} MiB ({self.settings[1]})")
        verb = "was" if self.what == "log" else "were"
        text = (
            f"loom: the {self.what} of this job {verb} cut at {' or '.join(limits)}, the limit "
            "per job; later ones were not stored"
        )
        return (job_id, NOTICE_ATTEMPT, NOTICE_LEARNER, self.seq, time.time(), "stderr", text)


LOG_NOTICE = Notice(LOG_NOTICE_SEQ, "log", "lines", ("LOOM_MAX_LOG_LINES", "LOOM_MAX_LOG_MB"))
METRIC_NOTICE = Notice(
    METRIC_NOTICE_SEQ, "metrics", "points", ("LOOM_MAX_METRIC_POINTS", "LOOM_MAX_METRIC_MB")
)
RUN_INFO_NOTICE = Notice(
    RUN_INFO_NOTICE_SEQ,
    "parameters and tags",
    "entries",
    ("LOOM_MAX_RUN_INFO", "LOOM_MAX_RUN_INFO_MB"),
)


class UserRate:
    """Bytes a second that one user's jobs and clients may push in, as a token bucket of bytes:
    up to `burst` at once, refilled at `rate`. A charge over it raises `TooManyRequests`."""

    def __init__(
        self,
        rate: float | None,
        burst: float,
        max_users: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate, self.burst, self.max_users, self.clock = rate, max(burst, 1.0), max_users, clock
        self._held: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, stamp
        self._lock = threading.Lock()

    def charge(self, user_id: str, user_name: str, size: int) -> None:
        """Take `size` bytes from the user's bucket, or refuse saying when to retry. A body
        larger than the burst is let through once the bucket is full (it could never fit)."""
        if self.rate is None or size <= 0:
            return
        with self._lock:
            now = self.clock()
            tokens, stamp = self._held.get(user_id, (self.burst, now))
            tokens = min(self.burst, tokens + (now - stamp) * self.rate)
            needed = min(float(size), self.burst)
            if tokens < needed:
                self._held[user_id] = (tokens, now)
                self._held.move_to_end(user_id)
                wait = (needed - tokens) / self.rate
                raise TooManyRequests(
                    f"ingest budget: user {user_name!r} sent more than "
                    f"{self.burst / 2**20:,.0f} MiB at once or {self.rate / 2**20:,.1f} MiB a "
                    f"second of logs, metrics and run info (LOOM_INGEST_BURST_MB, "
                    f"LOOM_INGEST_MB_PER_S); retry in {math.ceil(wait)} s",
                    retry_after=wait,
                )
            self._held[user_id] = (tokens - size, now)
            self._held.move_to_end(user_id)
            if len(self._held) > self.max_users:
                self._held.popitem(last=False)


@dataclass(frozen=True)
class Limits:
    """The platform's budgets, from `Settings` (`Limits.from_settings`)."""

    lines: Allowance = Allowance()
    points: Allowance = Allowance()
    run_info: Allowance = Allowance()
    ingest_bytes_per_s: float | None = None
    ingest_burst_bytes: float = 64 * 2**20


def line_size(row: Row) -> int:
    return len(str(row[6]))


def point_size(row: Row) -> int:
    return len(str(row[8])) + len(str(row[7] or ""))


def entry_size(entry: tuple[str, str, str, float]) -> int:
    return len(entry[1]) + len(entry[2])
