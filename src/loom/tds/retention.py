"""Retention: a background thread deletes the log lines and metric points of jobs that ended
more than `LOOM_LOG_RETENTION_DAYS` ago. The jobs themselves, their results and models stay."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from loom.domain.states import TERMINAL_STATES
from loom.store import logs as log_rows
from loom.store import metrics as metric_rows
from loom.store.retention import ended_before
from loom.tds.service import TrainingData

log = logging.getLogger("loom.tds")

DAY = 86_400.0
CHUNK = 10_000  # rows a transaction: ingestion never waits long for the write lock


class Retention:
    def __init__(
        self,
        tds: TrainingData,
        days: float,
        interval_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tds, self.days, self.interval_s, self.clock = tds, days, interval_s, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> list[str]:
        """Delete the expired jobs' lines and points now; returns those jobs' ids."""
        with self.tds.db.session() as session:
            expired = ended_before(session, self.clock() - self.days * DAY, TERMINAL_STATES)
        for job_id in expired:
            self._purge(job_id)
        return expired

    def _purge(self, job_id: str) -> None:
        for delete in (log_rows.delete_lines, metric_rows.delete_points):
            while True:
                with self.tds.db.session() as session:
                    if delete(session, job_id, CHUNK) < CHUNK:
                        break
        self.tds.forget(job_id)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="retention", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if expired := self.sweep():
                    log.info("retention: deleted the training data of %d jobs", len(expired))
            except Exception:  # the thread must survive a failed sweep; the next one retries
                log.exception("retention sweep failed")
            self._stop.wait(self.interval_s)
