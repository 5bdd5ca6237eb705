"""The launcher interface: a few methods, one in-memory fake beside the real engines."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from loom.domain.errors import LaunchError
from loom.domain.resources import Resources

# A learner's handle ends with its job, learner and attempt (the lifecycle's workspace folder):
# what a cluster launcher names the engine's objects after.
HANDLE = re.compile(r"/(?P<job>[^/]+)/learners/learner-(?P<learner>\d+)/attempt-(?P<attempt>\d+)$")


def handle_parts(handle: str) -> tuple[str, int, int]:
    """The job id, learner number and attempt number a handle stands for."""
    found = HANDLE.search(handle)
    if found is None:
        raise LaunchError(f"not a learner handle: {handle!r}")
    return found["job"], int(found["learner"]), int(found["attempt"])


@contextmanager
def translated(engine: str, doing: str) -> Iterator[None]:
    """An engine's own errors, as the platform's: "Kubernetes could not create Job x (409):
    …", with the engine's status and message where it gives them, never a trace."""
    try:
        yield
    except LaunchError:
        raise
    except Exception as exc:
        status = getattr(exc, "status", None)
        detail: Any = getattr(exc, "summary", None) or getattr(exc, "reason", None)
        if callable(detail):  # the Kubernetes dynamic client's `summary()`
            detail = detail()
        where = f" ({status})" if isinstance(status, int) else ""
        said = detail or f"{type(exc).__name__}: {exc}"
        raise LaunchError(f"{engine} could not {doing}{where}: {said}") from exc


@dataclass(frozen=True)
class LearnerLaunch:
    """One learner to start: where it lives, the wrapper's spec and its job-scoped token."""

    handle: str
    spec: dict[str, Any]
    token: str = field(repr=False)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)


class Liveness(StrEnum):
    NOT_STARTED = "not_started"
    RUNNING = "running"
    EXITED = "exited"
    LOST = "lost"


@dataclass(frozen=True)
class LearnerStatus:
    """What the launcher knows of one learner; `report` is the wrapper's last status, if any."""

    liveness: Liveness
    report: dict[str, Any] | None = None
    reason: str | None = None  # why it was lost, when the engine knows ("node 10.0.0.2 lost")


class Launcher(Protocol):
    name: str
    # A cluster whose nodes come and go: a job that does not fit it now waits (it may grow)
    # instead of failing as one that can never start.
    elastic: bool

    def capacity(self) -> Resources:
        """What this launcher can run at once."""
        ...

    def launch(self, learners: list[LearnerLaunch]) -> None:
        """Start all learners of one job attempt; raises `LaunchError` if it cannot."""
        ...

    def status(self, handle: str) -> LearnerStatus:
        """Where one learner is; cheap enough to call every few seconds."""
        ...

    def terminate(self, handle: str, grace_s: float) -> None:
        """Ask a learner to stop, and make sure it has after `grace_s` seconds."""
        ...

    def spooled_lines(self, handle: str) -> list[dict[str, Any]]:
        """The log lines a learner spooled, where the launcher can read them (else empty)."""
        ...

    def release(self, handles: list[str]) -> None:
        """One attempt's learners have all ended: free what the engine still holds for them
        (a placement group, an actor). Called again harmlessly."""
        ...

    def close(self) -> None: ...
