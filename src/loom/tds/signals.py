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

    def listen(self, job_id: str) -> Listener:
        """Listen from now on (in an event loop): a follower that listens before it looks at
        what is stored misses nothing stored meanwhile, where one that looked first and waited
        after would sleep through it until its timeout."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters[job_id].add(entry)
        return Listener(self, job_id, entry)

    async def wait(self, job_id: str, timeout: float) -> bool:
        """True if notified before the timeout (from now: see `listen`)."""
        with self.listen(job_id) as listener:
            return await listener.wait(timeout)

    def _drop(self, job_id: str, entry: tuple[asyncio.AbstractEventLoop, asyncio.Event]) -> None:
        with self._lock:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(entry)
                if not waiters:
                    del self._waiters[job_id]


class Listener:
    """One follower's ear on one job, from `JobSignals.listen` until it is closed."""

    def __init__(
        self,
        signals: JobSignals,
        job_id: str,
        entry: tuple[asyncio.AbstractEventLoop, asyncio.Event],
    ) -> None:
        self._signals, self._job_id, self._entry = signals, job_id, entry

    async def wait(self, timeout: float) -> bool:
        """True once notified since `listen` (at once if it already was), False at the
        timeout."""
        try:
            await asyncio.wait_for(self._entry[1].wait(), timeout)
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self._signals._drop(self._job_id, self._entry)

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
