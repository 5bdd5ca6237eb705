"""What runs on a Ray node for the learners placed there: `NodeAgent`, one long-lived actor per
node that starts, watches and stops every CPU learner's wrapper there while the learner's
placement group holds its share (no Ray worker process to start per learner: that was most of
a learner's wait), and `LearnerHost`, an actor per learner given GPUs, which holds its share
itself (Ray tells an actor, not a group's bundle, which GPUs it got).

Both are detached (they outlive the platform's process, as a local learner does) and named (the
agent after its node and Loom's version, a learner's host after the learner), so a restarted
platform finds them again. The wrapper is the same one the local
launcher runs, started by a local launcher on the node, confined by the node's sandbox, with
every folder moved under the node's own scratch disk (`LOOM_NODE_SCRATCH_DIR`, default
`<tmp>/loom-node`): the code, checkpoints and results move through the platform's API.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import loom
from loom.domain.learner_env import Gang, framework_env
from loom.launchers.base import LearnerLaunch, Liveness
from loom.launchers.confinement import SandboxPolicy
from loom.launchers.local import LocalLauncher
from loom.learner.relocate import relocate

SCRATCH_ENV = "LOOM_NODE_SCRATCH_DIR"
AGENT = "loom-agent"  # the agents' names: loom-agent-<version>-<sandbox policy>-<node id>


def agent_name(node_id: str, sandbox: SandboxPolicy) -> str:
    """An agent is Loom's version and the sandbox it confines learners with: a platform
    upgraded, or its sandbox changed, gets agents of its own (and retires the others)."""
    policy = hashlib.sha256(repr(dataclasses.astuple(sandbox)).encode()).hexdigest()[:8]
    return f"{AGENT}-{loom.__version__}-{policy}-{node_id[:12]}"


def node_scratch() -> Path:
    """This node's scratch root: where its learners' folders and environments live."""
    configured = os.environ.get(SCRATCH_ENV)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "loom-node"


def free_ports(count: int) -> list[int]:
    """Ports free on this node now (held open together, so they differ)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("0.0.0.0", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def gang_env(spec: dict[str, Any], gang: Gang, rank: int) -> dict[str, str]:
    """The framework's variables for this learner of a gang spread over several machines."""
    about = spec.get("gang") or {}
    return framework_env(
        str(about.get("framework", "custom")),
        gang,
        rank,
        parameter_servers=int(about.get("parameter_servers", 0)),
        replicas=about.get("replicas"),
    )


def node_address() -> str:
    """This node's address as the cluster knows it (`ray start --node-ip-address`)."""
    import ray

    me = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == me:
            return str(node["NodeManagerAddress"])
    return str(ray.util.get_node_ip_address())


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())[:12]


class LearnerHost:
    """One learner on this node (a Ray actor: its methods are called remotely)."""

    def __init__(self, sandbox: SandboxPolicy) -> None:
        self.scratch = node_scratch()
        self.sandbox = sandbox
        self.address, self.node_id = node_address(), _node_id()  # asked of Ray once
        self.node = f"{self.address} ({self.node_id})"
        self.folder: Path | None = None
        self.job_root: Path | None = None
        self._launcher: LocalLauncher | None = None

    def where(self, ports: int) -> tuple[str, list[int], str]:
        """This node's address, as the other nodes reach it, `ports` free ports on it, and
        its name."""
        return self.address, free_ports(ports), self.node_id

    def start(
        self,
        spec: dict[str, Any],
        token: str,
        secrets: dict[str, dict[str, str]],
        hostfile_text: str | None = None,
    ) -> str:
        """Start the learner's wrapper on this node; the folder it runs in."""
        import ray

        gpus = [str(int(g)) for g in ray.get_gpu_ids()]  # what Ray gave this actor
        self._launcher = LocalLauncher(
            cpus=1, memory="1GiB", gpus=0, sandbox=self.sandbox, tied=True
        )
        self.folder, self.job_root = _start(
            self._launcher, self.scratch, spec, token, secrets, hostfile_text, gpus
        )
        return str(self.folder)

    def status(self) -> dict[str, Any]:
        """Where the wrapper is: its liveness, its last status, and this node's address."""
        return _status(self._launcher, self.folder, self.node)

    def spooled(self) -> list[dict[str, Any]]:
        if self._launcher is None or self.folder is None:
            return []
        return self._launcher.spooled_lines(str(self.folder))

    def terminate(self, grace_s: float) -> None:
        if self._launcher is not None and self.folder is not None:
            self._launcher.terminate(str(self.folder), grace_s)

    def release(self, wait_s: float) -> None:
        """The attempt has ended: wait (briefly) for the wrapper to be gone, then remove the
        job's folders from this node's disk (what mattered went through the API). The
        launcher then ends this actor, which frees its share of the group."""
        if self._launcher is not None and self.folder is not None:
            _release(self._launcher, self.folder, self.job_root, wait_s, threading.Lock())


ENDING = "is being ended"  # an agent's refusal, retired and found idle: about to be ended


class NodeAgent:
    """Every CPU learner on this node, by handle (a Ray actor with no resources of its own,
    one per node, its methods called from several threads: `_lock` keeps its launcher's
    state whole)."""

    def __init__(self, sandbox: SandboxPolicy) -> None:
        self.scratch = node_scratch()
        self.address, self.node_id = node_address(), _node_id()
        self.node = f"{self.address} ({self.node_id})"
        self._launcher = LocalLauncher(cpus=1, memory="1GiB", gpus=0, sandbox=sandbox, tied=True)
        self._learners: dict[str, tuple[Path, Path]] = {}  # handle → its folder, job's root
        self._lock = threading.Lock()
        self._retired = False  # another agent has this node now: ended once idle
        self._ending = False  # found idle while retired: about to be ended, starts nothing

    def where(self, ports: int) -> tuple[str, list[int], str]:
        """The node's address, free ports there and its id: the first call of a launch. An
        agent is asked by name, which only a platform of its own version and sandbox knows:
        that platform still runs, and a retired agent is its own again (one already found
        idle and about to be ended refuses: the launcher asks again once it is gone)."""
        with self._lock:
            if self._ending:
                raise RuntimeError(f"the agent of node {self.node} {ENDING}: ask again")
            self._retired = False
        return self.address, free_ports(ports), self.node_id

    def has(self, handle: str) -> bool:
        return handle in self._learners

    def retire(self) -> bool:
        """Another agent, of a newer Loom or another sandbox, has this node now: this one is
        to be ended once idle. Whether it is idle now (the caller then ends it at once, and
        it starts nothing more)."""
        with self._lock:
            self._retired = True
            self._ending = not self._learners
            return self._ending

    def start(
        self,
        handle: str,
        spec: dict[str, Any],
        token: str,
        secrets: dict[str, dict[str, str]],
        hostfile_text: str | None = None,
    ) -> str:
        with self._lock:
            if self._ending:  # retired and found idle between `where` and this
                raise RuntimeError(f"the agent of node {self.node} {ENDING}: ask again")
            folder, root = _start(
                self._launcher, self.scratch, spec, token, secrets, hostfile_text, []
            )
            self._learners[handle] = (folder, root)
        return str(folder)

    def status(self, handle: str) -> dict[str, Any]:
        found = self._learners.get(handle)
        with self._lock:
            if found is None:
                return _status(None, None, self.node)
            return _status(self._launcher, found[0], self.node)

    def spooled(self, handle: str) -> list[dict[str, Any]]:
        found = self._learners.get(handle)
        if found is None:
            return []
        with self._lock:
            return self._launcher.spooled_lines(str(found[0]))

    def terminate(self, handle: str, grace_s: float) -> None:
        found = self._learners.get(handle)
        if found is not None:
            with self._lock:
                self._launcher.terminate(str(found[0]), grace_s)

    def release(self, handle: str, wait_s: float) -> bool:
        """As `LearnerHost.release`; the agent stays for the node's next learners, unless it
        is retired: then whether that was its last learner (the caller ends it)."""
        found = self._learners.get(handle)
        if found is not None:
            _release(self._launcher, found[0], found[1], wait_s, self._lock)
        with self._lock:
            self._learners.pop(handle, None)
            self._ending = self._retired and not self._learners
            return self._ending


def _start(
    launcher: LocalLauncher,
    scratch: Path,
    spec: dict[str, Any],
    token: str,
    secrets: dict[str, dict[str, str]],
    hostfile_text: str | None,
    gpus: list[str],
) -> tuple[Path, Path]:
    """Start one learner's wrapper on this node; its folder and its job's root there."""
    moved = relocate(spec, scratch)
    moved["env"]["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    moved["env"]["GPU_COUNT"] = str(len(gpus))
    folder = Path(moved["status_file"]).parent
    if hostfile_text is not None:
        target = Path(moved["dirs"]["JOB_STATE_DIR"]) / "hostfile"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(hostfile_text)
        target.chmod(0o644)
    policy = launcher.sandbox
    if policy.bwrap is not None and shutil.which(policy.bwrap) is None:
        raise RuntimeError(f"this node cannot sandbox learners: no {policy.bwrap}")
    launcher.launch([LearnerLaunch(str(folder), moved, token, secrets)])
    return folder, scratch / "jobs" / str(spec["job_id"])


def _status(launcher: LocalLauncher | None, folder: Path | None, node: str) -> dict[str, Any]:
    if launcher is None or folder is None:
        return {"liveness": Liveness.NOT_STARTED.value, "report": None, "node": node}
    found = launcher.status(str(folder))
    return {"liveness": found.liveness.value, "report": found.report, "node": node}


def _release(
    launcher: LocalLauncher, folder: Path, job_root: Path | None, wait_s: float, lock: Any
) -> None:
    """Wait (at most `wait_s`) for the wrapper to be gone, then remove the learner's network
    namespace and the job's folders from this node's disk."""
    deadline = time.monotonic() + wait_s
    while True:
        with lock:
            running = launcher.status(str(folder)).liveness == Liveness.RUNNING
            if running and time.monotonic() > deadline:
                launcher.terminate(str(folder), 0.0)
                running = False
        if not running:
            break
        time.sleep(0.2)
    with lock:
        launcher.release([str(folder)])  # the learner's network namespace
    if job_root is not None:
        shutil.rmtree(job_root, ignore_errors=True)
