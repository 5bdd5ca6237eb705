"""Kernel-enforced limits for one sandbox: a cgroup with cpus, memory and a pid limit.

Both cgroup layouts are handled: the unified v2 tree (`/sys/fs/cgroup` or, on hybrid
machines, `/sys/fs/cgroup/unified` when it holds the controllers), and v1's one hierarchy per
controller (`/sys/fs/cgroup/{cpu,memory,pids}`). Loom's groups live under `loom/`:

    loom/<group>            one per learner or replica, e.g. `loom/training-abc-l1`

A process joins by writing its own pid (the sandbox's first process does it before it drops
its rights), and everything it starts stays inside; teardown kills every process in the group,
wherever it moved in its session or process group, then removes the group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpu", "memory", "pids")
PERIOD_US = 100_000


@dataclass(frozen=True)
class Limits:
    cpus: float | None = None
    memory: int | None = None
    pids: int | None = None


class CgroupUnavailable(Exception):
    """This machine gives Loom no cgroup it can write; the message says why."""


class Cgroup:
    """One group; `paths` has one folder per hierarchy it lives in (one on v2, three on v1)."""

    def __init__(self, version: int, paths: list[Path]) -> None:
        self.version = version
        self.paths = paths

    @property
    def _main(self) -> Path:
        return self.paths[0]

    def join(self, pid: int = 0) -> None:
        """Move a process (0: the caller) into the group; async-signal-safe enough for a
        pre-exec hook (plain open/write/close)."""
        for path in self.paths:
            fd = os.open(path / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, str(pid).encode())
            finally:
                os.close(fd)

    def shown(self) -> dict[str, str]:
        """Where a sandbox sees this group: on v2 as the whole of `/sys/fs/cgroup`, on v1 as
        each controller's folder there (`/sys/fs/cgroup/memory`, …)."""
        if self.version == 2:
            return {str(ROOT): str(self._main)}
        return {str(ROOT / path.parts[len(ROOT.parts)]): str(path) for path in self.paths}

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.paths:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return sorted(found)

    def signal(self, sig: int, *, spare: set[int] | None = None) -> None:
        for pid in self.pids():
            if spare is None or pid not in spare:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)

    def kill(self, timeout_s: float = 5.0) -> bool:
        """SIGKILL every process in the group until it is empty; True once it is."""
        kill_file = self._main / "cgroup.kill"
        deadline = time.monotonic() + timeout_s
        pauses = _pauses(0.01)
        while True:
            if not self.pids():
                return True
            if self.version == 2 and kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
            else:
                self.signal(signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(next(pauses))

    def remove(self) -> None:
        """Kill what is left and remove the group's folders."""
        self.kill()
        for path in self.paths:
            deadline = time.monotonic() + 1.0  # the kernel may need a moment after the last exit
            pauses = _pauses(0.02)
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(next(pauses))

    def oom_killed(self) -> int:
        """How many of the group's processes the kernel's OOM killer stopped."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        folder = self._main if self.version == 2 else _v1_path(self.paths, "memory")
        if folder is None:
            return 0
        try:
            for line in (folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            return 0
        return 0

    def memory_peak(self) -> int | None:
        folder = self._main if self.version == 2 else _v1_path(self.paths, "memory")
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((folder / name).read_text()) if folder is not None else None
        except (OSError, ValueError):
            return None


def _v1_path(paths: list[Path], controller: str) -> Path | None:
    for path in paths:
        if path.parts[len(ROOT.parts)] == controller:
            return path
    return None


class CgroupDriver:
    """Creates and finds Loom's groups on this machine's layout."""

    def __init__(self, version: int, roots: list[Path]) -> None:
        self.version = version
        self.roots = roots  # v2: [unified/loom]; v1: [cpu/loom, memory/loom, pids/loom]

    def describe(self) -> str:
        return f"cgroup v{self.version} ({', '.join(str(r) for r in self.roots)})"

    def group(self, name: str) -> Cgroup:
        return Cgroup(self.version, [root / name for root in self.roots])

    def create(self, name: str, limits: Limits) -> Cgroup:
        group = self.group(name)
        if any(path.exists() for path in group.paths):
            group.remove()  # a leftover of an earlier attempt with this name
        for path in group.paths:
            path.mkdir(parents=True, exist_ok=True)
        try:
            self._limit(group, limits)
        except OSError:
            group.remove()
            raise
        return group

    def _limit(self, group: Cgroup, limits: Limits) -> None:
        quota = max(int((limits.cpus or 0) * PERIOD_US), 1000) if limits.cpus else None
        if self.version == 2:
            path = group.paths[0]
            if quota is not None:
                (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            if limits.memory:
                (path / "memory.max").write_text(str(limits.memory))
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text("0")
            if limits.pids:
                (path / "pids.max").write_text(str(limits.pids))
            return
        cpu, memory, pids = (_v1_path(group.paths, c) for c in CONTROLLERS)
        if quota is not None and cpu is not None:
            (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(quota))
        if limits.memory and memory is not None:
            (memory / "memory.limit_in_bytes").write_text(str(limits.memory))
            with contextlib.suppress(OSError):
                (memory / "memory.memsw.limit_in_bytes").write_text(str(limits.memory))
        if limits.pids and pids is not None:
            (pids / "pids.max").write_text(str(limits.pids))


def detect(root: Path = ROOT) -> CgroupDriver:
    """The driver for this machine, or `CgroupUnavailable` with the reason."""
    if os.geteuid() != 0:
        raise CgroupUnavailable("cgroups need the platform to run as root")
    errors = []
    for candidate in (root, root / "unified"):
        try:
            return _v2(candidate)
        except CgroupUnavailable as exc:
            errors.append(str(exc))
    try:
        return _v1(root)
    except CgroupUnavailable as exc:
        errors.append(str(exc))
    raise CgroupUnavailable("; ".join(errors))


def _v2(mount: Path) -> CgroupDriver:
    controllers_file = mount / "cgroup.controllers"
    try:
        available = set(controllers_file.read_text().split())
    except OSError as exc:
        raise CgroupUnavailable(f"no cgroup v2 tree at {mount}") from exc
    missing = [c for c in CONTROLLERS if c not in available]
    if missing:
        raise CgroupUnavailable(f"cgroup v2 at {mount} lacks {', '.join(missing)}")
    loom = mount / "loom"
    try:
        _enable(mount)
        loom.mkdir(exist_ok=True)
        _enable(loom)
    except OSError as exc:
        raise CgroupUnavailable(f"cannot delegate controllers under {mount}: {exc}") from exc
    return CgroupDriver(2, [loom])


def _enable(folder: Path) -> None:
    wanted = " ".join(f"+{c}" for c in CONTROLLERS)
    current = set((folder / "cgroup.subtree_control").read_text().split())
    if not set(CONTROLLERS) <= current:
        (folder / "cgroup.subtree_control").write_text(wanted)


def _v1(root: Path) -> CgroupDriver:
    roots = []
    for controller in CONTROLLERS:
        hierarchy = root / controller
        if not (hierarchy / "cgroup.procs").exists():
            raise CgroupUnavailable(f"no cgroup v1 {controller} hierarchy at {hierarchy}")
        loom = hierarchy / "loom"
        try:
            loom.mkdir(exist_ok=True)
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create {loom}: {exc}") from exc
        roots.append(loom)
    return CgroupDriver(1, roots)


def _pauses(longest: float) -> Iterator[float]:
    """Waits for the kernel to finish a learner's exit: 1 ms, then doubling up to `longest`.
    It usually needs far less than `longest`, which a fixed pause made the learner's outcome
    wait for in full (cgroup v1 has no event for a group that emptied)."""
    pause = 0.001
    while True:
        yield pause
        pause = min(pause * 2, longest)
