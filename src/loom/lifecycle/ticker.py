"""A thread that runs a step when woken, and at the latest every `interval_s`: how the
lifecycle and the experiments' driver follow what changes. A failing step is logged and the
next one runs as usual."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


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
