"""What runs on a Ray node for one learner: an actor that holds the learner's share of the
placement group and starts, watches and stops its wrapper there.

The actor is detached (it outlives the platform's process, as a local learner does) and named
after the learner, so a restarted platform finds it again. The wrapper is the same one the local
launcher runs, started by a local launcher on the node, confined by the node's sandbox, with
every folder moved under the node's own scratch disk (`LOOM_NODE_SCRATCH_DIR`, default
`<tmp>/loom-node`): the code, checkpoints and results move through the platform's API.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from loom.domain.learner_env import Gang, framework_env
from loom.launchers.base import LearnerLaunch, Liveness
from loom.launchers.confinement import SandboxPolicy
from loom.launchers.local import LocalLauncher
from loom.learner.relocate import relocate

SCRATCH_ENV = "LOOM_NODE_SCRATCH_DIR"


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

        moved = relocate(spec, self.scratch)
        gpus = [str(int(g)) for g in ray.get_gpu_ids()]  # what Ray gave this actor
        moved["env"]["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        moved["env"]["GPU_COUNT"] = str(len(gpus))
        self.folder = Path(moved["status_file"]).parent
        self.job_root = self.scratch / "jobs" / str(spec["job_id"])
        if hostfile_text is not None:
            target = Path(moved["dirs"]["JOB_STATE_DIR"]) / "hostfile"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(hostfile_text)
            target.chmod(0o644)
        policy = self.sandbox
        if policy.bwrap is not None and shutil.which(policy.bwrap) is None:
            raise RuntimeError(f"this node cannot sandbox learners: no {policy.bwrap}")
        self._launcher = LocalLauncher(cpus=1, memory="1GiB", gpus=0, sandbox=policy, tied=True)
        self._launcher.launch([LearnerLaunch(str(self.folder), moved, token, secrets)])
        return str(self.folder)

    def status(self) -> dict[str, Any]:
        """Where the wrapper is: its liveness, its last status, and this node's address."""
        if self._launcher is None or self.folder is None:
            return {"liveness": Liveness.NOT_STARTED.value, "report": None, "node": self.node}
        found = self._launcher.status(str(self.folder))
        return {"liveness": found.liveness.value, "report": found.report, "node": self.node}

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
        deadline = time.monotonic() + wait_s
        while self._launcher is not None and self.folder is not None:
            if self._launcher.status(str(self.folder)).liveness != Liveness.RUNNING:
                break
            if time.monotonic() > deadline:
                self._launcher.terminate(str(self.folder), 0.0)
                break
            time.sleep(0.2)
        if self.folder is not None and self.job_root is not None:
            shutil.rmtree(self.job_root, ignore_errors=True)
