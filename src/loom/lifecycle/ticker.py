"""A thread that runs a step when woken, and at the latest every `interval_s`: how the
lifecycle, the experiments' and the pipelines' drivers follow what changes. A failing step is
logged and the next one runs as usual."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy.orm import Session

from loom.store.db import Database


class Ticker:
    def __init__(
        self, name: str, interval_s: float, step: Callable[[], None], log: logging.Logger
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self.step = step
        self.log = log
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.step()
            except Exception:  # the loop must survive anything; the error is logged
                self.log.exception("%s step failed", self.name)


class RowDriver:
    """A leader's loop over rows with work left (experiments, pipeline runs): each pass asks
    `pending` for their ids and calls `advance` on each, under `lock` (which an owner's halt or
    delete takes too). One row's trouble is logged, not every row's."""

    def __init__(self, name: str, db: Database, interval_s: float, log: logging.Logger) -> None:
        self.db = db
        self.log = log
        self.lock = threading.RLock()
        self.fence: Callable[[Session], bool] = lambda _session: True
        self.ticker = Ticker(name, interval_s, self.step, log)

    def start(self) -> None:
        self.ticker.start()

    def stop(self) -> None:
        self.ticker.stop()

    def wake(self) -> None:
        self.ticker.wake()

    def pending(self, session: Session) -> list[str]:
        raise NotImplementedError

    def advance(self, row_id: str) -> None:
        raise NotImplementedError

    def step(self) -> None:
        with self.db.session() as session:
            if not self.fence(session):
                return
            ids = self.pending(session)
        for row_id in ids:
            with self.lock:
                try:
                    self.advance(row_id)
                except Exception:  # one row's trouble is not every row's
                    self.log.exception("%s: moving %s on failed", self.ticker.name, row_id)
