"""Dynamic batching: requests that arrive together run as one batch, up to a maximum batch size
(in samples), then each gets its own rows of the result.

Batches run one at a time on the server's inference thread. When the model is idle a request
runs at once; requests that arrive while a batch runs gather and make up the next one. With a
`max_wait_s` above zero, a batch that is not full waits that long for more before it runs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loom.serving.observe import Histogram

Arrays = dict[str, np.ndarray[Any, Any]]
BATCH_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0)


@dataclass
class _Pending:
    inputs: Arrays
    rows: int
    future: asyncio.Future[Arrays]


@dataclass
class BatchStats:
    requests: int = 0
    batches: int = 0
    samples: int = 0
    sizes: Histogram = field(default_factory=lambda: Histogram(BATCH_BUCKETS))


class Batcher:
    def __init__(
        self,
        run: Callable[[Arrays], Arrays],
        max_batch: int,
        max_wait_s: float,
        executor: Executor,
        alone: Callable[[], bool] = lambda: False,
    ) -> None:
        """`alone()` tells whether the request being submitted is the only one in flight: it
        then runs at once on the event loop, as there is nothing to batch it with."""
        self.run = run
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.executor = executor
        self.alone = alone
        self.stats = BatchStats()
        self._pending: deque[_Pending] = deque()
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, inputs: Arrays) -> Arrays:
        loop = asyncio.get_running_loop()
        rows = int(next(iter(inputs.values())).shape[0]) if inputs else 1
        if self._worker is None and (rows >= self.max_batch or self.alone()):
            return self._run_now(inputs, rows)  # nothing to wait for: no hop to the thread
        item = _Pending(inputs, rows, loop.create_future())
        self._pending.append(item)
        self.stats.requests += 1
        if self._worker is None:
            self._worker = loop.create_task(self._work())
        return await item.future

    def _run_now(self, inputs: Arrays, rows: int) -> Arrays:
        self.stats.requests += 1
        self.stats.batches += 1
        self.stats.samples += rows
        self.stats.sizes.observe(rows)
        return self.run(inputs)

    async def _work(self) -> None:
        try:
            while self._pending:
                if self.max_wait_s > 0 and self._rows() < self.max_batch:
                    await asyncio.sleep(self.max_wait_s)
                for group in _compatible(self._take()):
                    await self._execute(group)
        finally:
            self._worker = None

    def _rows(self) -> int:
        return sum(p.rows for p in self._pending)

    def _take(self) -> list[_Pending]:
        """The oldest requests, up to `max_batch` samples (at least one request)."""
        batch = [self._pending.popleft()]
        rows = batch[0].rows
        while self._pending and rows + self._pending[0].rows <= self.max_batch:
            rows += self._pending[0].rows
            batch.append(self._pending.popleft())
        return batch

    async def _execute(self, group: list[_Pending]) -> None:
        loop = asyncio.get_running_loop()
        rows = sum(p.rows for p in group)
        self.stats.batches += 1
        self.stats.samples += rows
        self.stats.sizes.observe(rows)
        if len(group) == 1:
            merged = group[0].inputs
        else:
            names = group[0].inputs
            merged = {name: np.concatenate([p.inputs[name] for p in group]) for name in names}
        try:
            outputs = await loop.run_in_executor(self.executor, self.run, merged)
        except Exception as exc:
            for pending in group:
                if not pending.future.done():
                    pending.future.set_exception(exc)
            return
        if len(group) == 1:
            if not group[0].future.done():
                group[0].future.set_result(outputs)
            return
        start = 0
        for pending in group:
            end = start + pending.rows
            if not pending.future.done():
                pending.future.set_result({k: v[start:end] for k, v in outputs.items()})
            start = end


def _compatible(batch: list[_Pending]) -> list[list[_Pending]]:
    """Requests whose tensors agree in names, types and all but the first dimension."""
    groups: dict[tuple[Any, ...], list[_Pending]] = {}
    for pending in batch:
        key = tuple(
            (name, array.dtype.str, array.shape[1:])
            for name, array in sorted(pending.inputs.items())
        )
        groups.setdefault(key, []).append(pending)
    return list(groups.values())
