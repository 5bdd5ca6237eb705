"""The local launcher: each learner is a wrapper process in its own session on this machine.

A learner outlives the platform process. Its handle is its folder: the launcher writes
`pid.json` there when it starts the wrapper, and the wrapper keeps `status.json` current, so a
restarted platform finds every learner again.

With a scratch folder (LOOM_LEARNER_SCRATCH_DIR), learners keep nothing in the platform's
folders, as on a cluster: each spec is relocated there (`learner.relocate`), the wrapper moves
code, checkpoints and results through the API, and `launch.json` in the handle's folder says
where its status and spool files are.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil

from loom.domain.errors import LaunchError
from loom.domain.resources import Resources, parse_memory
from loom.launchers.base import LearnerLaunch, LearnerStatus, Liveness, handle_parts
from loom.launchers.confinement import SandboxPolicy
from loom.learner.relocate import relocate
from loom.learner.shipper import read_spool, write_json_atomic
from loom.sandbox import cgroups, netns

FINAL = {"COMPLETED", "FAILED", "HALTED"}


def detect_gpus() -> int:
    """GPUs on this machine, counted with `nvidia-smi` when it is there."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


class LocalLauncher:
    name = "local"
    elastic = False

    def __init__(
        self,
        *,
        cpus: float | None = None,
        memory: str | None = None,
        gpus: int | None = None,
        python: str | None = None,
        sandbox: SandboxPolicy | None = None,
        scratch: Path | None = None,
        tied: bool = False,
    ) -> None:
        self._capacity = Resources(
            cpus=cpus if cpus is not None else float(os.cpu_count() or 1),
            memory=parse_memory(memory) if memory else psutil.virtual_memory().total,
            gpus=gpus if gpus is not None else detect_gpus(),
        )
        self.sandbox = sandbox or SandboxPolicy()
        self.scratch = scratch.expanduser().resolve() if scratch is not None else None
        # Tied (under a cluster node's actor): the wrappers stop when the spawner does.
        self._spawner = Spawner(python or sys.executable, self.sandbox.spawner_env(), tied)

    def capacity(self) -> Resources:
        return self._capacity

    def warm(self) -> None:
        """Start the spawner now, in the background: a platform's first learner then does not
        wait for its interpreter and imports (a quarter to most of a second on two cores)."""
        threading.Thread(target=self._spawner.warm, name="spawner-warm", daemon=True).start()

    def launch(self, learners: list[LearnerLaunch]) -> None:
        network = self._job_network(learners)
        for learner in learners:
            self._start(learner, network)

    def _job_network(self, learners: list[LearnerLaunch]) -> str | None:
        """The attempt's own network namespace, which all its learners share (they meet on
        its loopback); None for the host's network: learners unconfined, namespaces off, or a
        gang split over several machines (a Ray node holds only its share of it)."""
        if not learners or self.sandbox.bwrap is None or not self.sandbox.network:
            return None
        spec = learners[0].spec
        if len(learners) < int(spec.get("env", {}).get("NUM_LEARNERS") or 1):
            return None
        name = netns.name_for(str(spec["job_id"]), int(spec["attempt"]))
        try:
            return str(netns.create(name))
        except OSError as exc:
            raise LaunchError(f"could not give the job a network of its own: {exc}") from exc

    def _start(self, learner: LearnerLaunch, network: str | None = None) -> None:
        folder = Path(learner.handle)
        spec = learner.spec
        if self.scratch is not None:  # before the sandbox: its writable folders are these
            spec = relocate(spec, self.scratch)
        private = Path(spec["status_file"]).parent  # the wrapper's own folder
        for made in {folder, private}:
            made.mkdir(parents=True, exist_ok=True)
            made.chmod(0o700)
        sandbox = self.sandbox.section(spec, network)
        spec = {**spec, "sandbox": sandbox, "pass_env": self.sandbox.pass_env}
        spec_file = folder / "spec.json"
        spec_file.write_text(json.dumps(spec))
        pid = self._spawner.spawn(
            str(spec_file), learner.token, learner.secrets, str(folder / "wrapper.log")
        )
        files = {"status_file": spec["status_file"], "spool_file": spec["spool_file"]}
        record = {"pid": pid, "create_time": _create_time(pid), **files}
        write_json_atomic(folder / "launch.json", record)

    def _process(
        self, folder: Path, launched: dict[str, Any] | None
    ) -> tuple[int, float | None] | None:
        """The wrapper's pid and start time, from the launcher's record (`launch.json`, read
        by the caller) or the wrapper's own."""
        if launched is not None and launched.get("pid"):
            return int(launched["pid"]), launched.get("create_time")
        for path in (folder / "pid.json", _status_file(folder, launched)):
            record = _read_json(path)
            if record is not None and record.get("pid"):
                return int(record["pid"]), record.get("create_time")
        return None

    def _alive(self, pid: int, created: float | None) -> bool:
        try:
            process = psutil.Process(pid)
            if created is not None and abs(process.create_time() - created) > 1.0:
                return False  # the pid was reused by another process
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def status(self, handle: str) -> LearnerStatus:
        folder = Path(handle)
        launched = _read_json(folder / "launch.json")
        found = self._process(folder, launched)
        report = _read_json(_status_file(folder, launched))
        if found is None:
            return LearnerStatus(Liveness.NOT_STARTED, report)
        if self._alive(*found):
            return LearnerStatus(Liveness.RUNNING, report)
        if report is not None and report.get("state") in FINAL:
            return LearnerStatus(Liveness.EXITED, report)
        return LearnerStatus(Liveness.LOST, report)

    def terminate(self, handle: str, grace_s: float) -> None:
        """SIGTERM to the wrapper, which stops its learner; SIGKILL to both if they linger.
        A learner whose wrapper is gone is killed at once."""
        folder = Path(handle)
        found = self._process(folder, _read_json(folder / "launch.json"))
        group = _learner_group(folder, found)
        if found is not None and self._alive(*found):
            _signal(found[0], signal.SIGTERM)
            timer = threading.Timer(grace_s + 5.0, self._kill, args=(folder, found, group))
            timer.daemon = True
            timer.start()
            return
        if group is not None:
            _kill_group(group)
        _remove_cgroup(folder)

    def _kill(
        self, folder: Path, wrapper: tuple[int, float | None], group: tuple[int, float] | None
    ) -> None:
        """The wrapper did not stop in time: kill it, the learner's process group and every
        process left in its cgroup."""
        if self._alive(*wrapper):
            _signal(wrapper[0], signal.SIGKILL)
        if group is not None:
            _kill_group(group)
        _remove_cgroup(folder)

    def spooled_lines(self, handle: str) -> list[dict[str, Any]]:
        return read_spool(_recorded(Path(handle), "spool_file"))

    def release(self, handles: list[str]) -> None:
        """A learner's process is gone when it has ended, and so is its attempt's network;
        with a scratch folder, what the attempt left there goes too (what mattered went
        through the API)."""
        attempts = {found for handle in handles if (found := _attempt_of(handle)) is not None}
        for job, attempt in attempts:
            netns.remove(netns.name_for(job, attempt))
        if self.scratch is None:
            return
        for job in {Path(handle).parents[2].name for handle in handles}:
            shutil.rmtree(self.scratch / "jobs" / job, ignore_errors=True)

    def close(self) -> None:
        """Stop the spawner; the learners keep running in their own sessions."""
        self._spawner.close()


def _attempt_of(handle: str) -> tuple[str, int] | None:
    try:
        job, _learner, attempt = handle_parts(handle)
    except LaunchError:
        return None
    return job, attempt


def _learner_group(
    folder: Path, wrapper: tuple[int, float | None] | None
) -> tuple[int, float] | None:
    """The learner command's process group, if it still belongs to this learner."""
    report = _read_json(_status_file(folder)) or {}
    pgid = report.get("child_pgid")
    if not pgid:
        return None
    try:
        started = psutil.Process(int(pgid)).create_time()
    except psutil.Error:
        return None
    wrapper_started = wrapper[1] if wrapper is not None else None
    if wrapper_started is not None and started + 1.0 < wrapper_started:
        return None  # an older process that now has this id
    return int(pgid), started


def _remove_cgroup(folder: Path) -> None:
    """Whatever is left of a learner whose wrapper is gone: its cgroup, emptied and removed."""
    name = (_read_json(_status_file(folder)) or {}).get("cgroup")
    if not name:
        return
    with suppress(cgroups.CgroupUnavailable, OSError):
        cgroups.detect().group(str(name)).remove()


def _kill_group(group: tuple[int, float]) -> None:
    pgid, started = group
    try:
        if abs(psutil.Process(pgid).create_time() - started) > 1.0:
            return
    except psutil.Error:
        pass  # the leader is gone; the rest of its group may not be
    with suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


class Spawner:
    """Talks to `python -m loom.learner.spawner`, (re)started on demand, over a socket pair.

    Each request hands the spawner the read end of a fresh pipe; the learner's token and
    secrets are written into the pipe only after the fork, so they reach that one wrapper and
    never the spawner (whose memory every later fork inherits)."""

    def __init__(self, python: str, env: dict[str, str], tied: bool = False) -> None:
        self._python = python
        self._tied = tied
        self._env = env
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        self._lock = threading.Lock()

    def _running(self) -> socket.socket:
        if self._process is None or self._process.poll() is not None or self._channel is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            with theirs:
                self._process = subprocess.Popen(
                    [self._python, "-m", "loom.learner.spawner", *(["--tied"] * self._tied)],
                    stdin=theirs.fileno(),
                    env=self._env,
                )
            self._channel = ours
        return self._channel

    def warm(self) -> None:
        """Have the spawner running; if it cannot start, the first launch says why."""
        with self._lock, suppress(OSError):
            self._running()

    def spawn(
        self, spec_file: str, token: str, secrets: dict[str, dict[str, str]], log: str
    ) -> int:
        """Fork a wrapper for one learner; its pid."""
        request = json.dumps({"spec": spec_file, "log": log}).encode()
        with self._lock:
            answer = self._ask(request, {"token": token, "secrets": secrets})
        if "pid" not in answer:
            raise LaunchError(f"could not start a learner process: {answer.get('error')}")
        return int(answer["pid"])

    def _ask(self, request: bytes, credentials: dict[str, Any]) -> dict[str, Any]:
        read, write = os.pipe()
        try:
            try:
                channel = self._running()
                socket.send_fds(channel, [request], [read])
            except OSError:  # it died since; the request never reached it, so ask a new one
                self._stop()
                channel = self._running()
                socket.send_fds(channel, [request], [read])
            os.close(read)
            read = -1
            try:
                answer = json.loads(channel.recv(1 << 16) or b"{}")
            except (OSError, ValueError) as exc:
                # Not retried: the learner may have started; reconciliation will find it.
                self._stop()
                raise LaunchError(f"the learner spawner failed: {exc}") from exc
            if "pid" in answer:
                with suppress(OSError):  # a wrapper that died at once reads nothing
                    os.write(write, json.dumps(credentials).encode())
            return dict(answer)
        finally:
            for fd in (read, write):
                if fd >= 0:
                    os.close(fd)

    def _stop(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._process is not None:
            with suppress(OSError):
                self._process.kill()
            self._process.wait(timeout=5)
            self._process = None

    def close(self) -> None:
        """End of file for the spawner, which then exits; its wrappers go on."""
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel = None
            if self._process is not None:
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._stop()
            self._process = None


def _signal(pid: int, sig: int) -> None:
    with suppress(OSError):
        os.kill(pid, sig)


def _create_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def _status_file(folder: Path, launched: dict[str, Any] | None = None) -> Path:
    return _recorded(folder, "status_file", launched)


def _recorded(folder: Path, key: str, launched: dict[str, Any] | None = None) -> Path:
    """A learner's status or spool file: where `launch.json` says (a relocated learner's are
    in the scratch folder), else in the handle's folder, as before there was a record of it."""
    record = launched if launched is not None else _read_json(folder / "launch.json") or {}
    default = {"status_file": "status.json", "spool_file": "spool.jsonl"}[key]
    return Path(record.get(key) or folder / default)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
