"""Wakes the followers of a job when something new about it is stored: push, don't poll."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable


class JobSignals:
    """`notify(job)` from any thread wakes every `wait(job)` on any event loop. With a
    `broadcast` (several servers on one PostgreSQL), it goes to every server instead, each of
    which calls `wake(job)`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = (
            defaultdict(set)
        )
        self.broadcast: Callable[[str], None] | None = None

    def notify(self, job_id: str) -> None:
        self.wake(job_id)  # here at once; other servers when the broadcast reaches them
        if self.broadcast is not None:
            self.broadcast(job_id)

    def wake(self, job_id: str) -> None:
        with self._lock:
            waiters = list(self._waiters.get(job_id, ()))
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed
                continue

    async def wait(self, job_id: str, timeout: float) -> bool:
        """True if notified before the timeout."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters[job_id].add(entry)
        try:
            await asyncio.wait_for(entry[1].wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                self._waiters[job_id].discard(entry)
                if not self._waiters[job_id]:
                    del self._waiters[job_id]
