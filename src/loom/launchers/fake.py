"""An in-memory launcher for unit tests of the lifecycle: learners move when the test says so."""

from __future__ import annotations

from typing import Any

from loom.domain.errors import LaunchError
from loom.domain.resources import Resources
from loom.launchers.base import LearnerLaunch, LearnerStatus, Liveness


class FakeLauncher:
    name = "fake"
    elastic = False

    def __init__(self, capacity: Resources | None = None, *, fail_launch: bool = False) -> None:
        self._capacity = capacity or Resources(cpus=4, memory=16 * 2**30, gpus=0)
        self.fail_launch = fail_launch
        self.stop_on_terminate = True  # False: a learner takes its time, as a real one may
        self.launched: dict[str, LearnerLaunch] = {}
        self.states: dict[str, LearnerStatus] = {}
        self.terminated: list[str] = []
        self.lines: dict[str, list[dict[str, Any]]] = {}
        self.released: list[str] = []

    def capacity(self) -> Resources:
        return self._capacity

    def launch(self, learners: list[LearnerLaunch]) -> None:
        if self.fail_launch:
            raise LaunchError("the fake launcher was told to fail")
        for learner in learners:
            self.launched[learner.handle] = learner
            self.states[learner.handle] = LearnerStatus(Liveness.RUNNING, {"state": "PENDING"})

    def status(self, handle: str) -> LearnerStatus:
        return self.states.get(handle, LearnerStatus(Liveness.NOT_STARTED))

    def terminate(self, handle: str, grace_s: float) -> None:
        self.terminated.append(handle)
        if not self.stop_on_terminate:
            return
        if self.states.get(handle, LearnerStatus(Liveness.LOST)).liveness == Liveness.RUNNING:
            self.finish(handle, {"state": "HALTED", "message": "halted by request"})

    def spooled_lines(self, handle: str) -> list[dict[str, Any]]:
        return self.lines.get(handle, [])

    def release(self, handles: list[str]) -> None:
        self.released.extend(h for h in handles if h not in self.released)

    def close(self) -> None:
        return None

    # -- what tests drive ------------------------------------------------------------------
    def finish(self, handle: str, report: dict[str, Any]) -> None:
        self.states[handle] = LearnerStatus(Liveness.EXITED, report)

    def lose(self, handle: str) -> None:
        self.states[handle] = LearnerStatus(Liveness.LOST)
