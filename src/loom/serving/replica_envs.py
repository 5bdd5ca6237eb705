"""The environments a gateway's replicas run in, on the gateway's machine: built by the job
environment builder (`loom.environments.builder`, with `uv`) once per content hash, or reused,
and held (its lock, shared) for as long as the gateway runs, so that the collector never
removes one a replica uses. The build's lines go to the deployment's `environment.log`; its
progress to the deployment's status message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loom.environments import builder

LOG = "environment.log"


class EnvironmentFailed(Exception):
    """The environment could not be built; the message is the installer's, shortened."""


class ReplicaEnvironments:
    def __init__(self, folder: Path, say: Callable[[str], None]) -> None:
        self.folder = folder
        self.say = say  # short news for the deployment's status
        self.held: dict[str, builder.Ready] = {}
        self.locks: dict[str, asyncio.Lock] = {}

    async def prepare(self, section: dict[str, Any]) -> Path:
        """The environment's folder, built or reused; held until `release`."""
        request = builder.Request.from_spec(section)
        lock = self.locks.setdefault(request.digest, asyncio.Lock())
        async with lock:
            ready = self.held.get(request.digest)
            if ready is None:
                ready = await asyncio.to_thread(self._ensure, request)
                self.held[request.digest] = ready
        return ready.folder

    def _ensure(self, request: builder.Request) -> builder.Ready:
        with (self.folder / LOG).open("a", encoding="utf-8") as log:

            def line(text: str) -> None:
                log.write(text + "\n")
                log.flush()

            try:
                ready = builder.ensure(request, line, self.say)
            except builder.BuildFailed as exc:
                raise EnvironmentFailed(
                    f"its environment ({request.describe}) could not be built; the installer "
                    f"said: {exc.message[-600:]}"
                ) from exc
            except OSError as exc:
                raise EnvironmentFailed(f"its environment could not be prepared: {exc}") from exc
            with contextlib.suppress(OSError):
                builder.collect(request, line)
        return ready

    def release(self) -> None:
        for ready in self.held.values():
            ready.release()
        self.held.clear()
