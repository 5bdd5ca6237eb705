"""Fair admission to a deployment's replicas: each ready replica takes up to `per_replica`
requests at once; the rest wait in one first-come, first-served line at the gateway, whatever
connection they came on. A request that would wait longer than `max_wait_s`, or find the line
`max_line` long, is refused at once (503 with Retry-After) instead of waiting seconds behind
the others. The autoscaler sees the line (it counts every request in flight at the gateway), so
a long line also adds replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable


class Busy(Exception):
    """No room now: the caller is to come back after `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


class Admission:
    def __init__(
        self,
        capacity: Callable[[], int],
        *,
        max_wait_s: float,
        max_line: int,
    ) -> None:
        """`capacity()`: how many requests the ready replicas take at once now (0: none is
        ready; then requests pass, to wait for one to start, as a cold start does)."""
        self.capacity = capacity
        self.max_wait_s = max_wait_s
        self.max_line = max_line
        self.admitted = 0
        self.refused = 0
        self._line: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._line)

    async def enter(self) -> None:
        """Return when the request may go to a replica; Busy if it may not soon."""
        room = self.capacity()
        if room == 0 or (not self._line and self.admitted < room):
            self.admitted += 1
            return
        if len(self._line) >= self.max_line:
            self.refused += 1
            raise Busy(f"{len(self._line)} requests are waiting already", 1)
        turn = asyncio.get_running_loop().create_future()
        self._line.append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.max_wait_s)
        except TimeoutError:
            if turn.done() and not turn.cancelled():
                return  # admitted just as the wait ran out: go
            self.refused += 1
            raise Busy(f"no replica was free within {self.max_wait_s:g} s", 1) from None
        finally:
            if not turn.done():
                turn.cancel()
            with contextlib.suppress(ValueError):
                self._line.remove(turn)

    def leave(self) -> None:
        """A request admitted by `enter` has its answer: the next in line may go."""
        self.admitted = max(0, self.admitted - 1)
        self.wake()

    def wake(self) -> None:
        """Admit from the head of the line while there is room (after a request ends, or when
        a replica becomes ready)."""
        room = self.capacity()
        while self._line and (room == 0 or self.admitted < room):
            turn = self._line.popleft()
            if turn.done():  # its wait ran out
                continue
            self.admitted += 1
            turn.set_result(None)
