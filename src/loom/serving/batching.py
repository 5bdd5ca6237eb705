"""Dynamic batching: requests that arrive together run as one batch, bounded by a maximum
batch size (in samples) and a maximum wait, then each gets its own rows of the result."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np

Arrays = dict[str, np.ndarray[Any, Any]]


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
    sizes: list[int] = field(default_factory=list)


class Batcher:
    """Collects requests on the event loop; runs each batch on a worker thread so the loop
    goes on collecting the next one."""

    def __init__(self, run: Callable[[Arrays], Arrays], max_batch: int, max_wait_s: float) -> None:
        self.run = run
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.stats = BatchStats()
        self._pending: list[_Pending] = []
        self._rows = 0
        self._timer: asyncio.TimerHandle | None = None

    async def submit(self, inputs: Arrays) -> Arrays:
        loop = asyncio.get_running_loop()
        rows = int(next(iter(inputs.values())).shape[0]) if inputs else 1
        item = _Pending(inputs, rows, loop.create_future())
        self._pending.append(item)
        self._rows += rows
        self.stats.requests += 1
        if self._rows >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.max_wait_s, self._flush)
        return await item.future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending, self._rows = self._pending, [], 0
        if batch:
            asyncio.get_running_loop().create_task(self._execute(batch))

    async def _execute(self, batch: list[_Pending]) -> None:
        for group in _compatible(batch):
            merged = {
                name: np.concatenate([p.inputs[name] for p in group]) for name in group[0].inputs
            }
            self.stats.batches += 1
            self.stats.samples += sum(p.rows for p in group)
            self.stats.sizes.append(sum(p.rows for p in group))
            try:
                outputs = await anyio.to_thread.run_sync(self.run, merged)
            except Exception as exc:
                for pending in group:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
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
