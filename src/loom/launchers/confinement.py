"""What the local launcher adds to a learner's spec so that its wrapper runs it confined.

The policy is the platform's (settings) and the machine's (what `sandbox.probe` found); the
spec's folders and resources are the job's. Only this job's folders are shown to its learners:
its code, data, results, logs, checkpoints and shared state, never `LOOM_HOME` or another job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loom.sandbox import environment, uid_for

WRITABLE = ("MODEL_DIR", "RESULT_DIR", "LOG_DIR", "CHECKPOINT_DIR", "JOB_STATE_DIR")


@dataclass(frozen=True)
class SandboxPolicy:
    """`bwrap` is None when learners run unconfined (LOOM_ISOLATION=off, or no sandbox here)."""

    bwrap: str | None = None
    cgroups: bool = False
    uid_base: int = 1_500_000_000
    pids: int = 4096
    tmp_bytes: int | None = 1 << 30
    read_only: tuple[str, ...] = ()
    python: tuple[str, ...] = ()  # Loom's interpreter and packages (`bwrap.python_paths()`)
    replica_cpus: float = 1.0
    replica_memory: int | None = None
    pass_env: tuple[str, ...] = field(default_factory=tuple)
    # A network namespace per job (and per replica): False where this machine cannot make one,
    # or an admin chose the host's network (LOOM_JOB_NETWORK=host).
    network: bool = False

    def section(self, spec: dict[str, Any], netns: str | None = None) -> dict[str, Any] | None:
        """The spec's `sandbox` section for one learner, or None to run it unconfined;
        `netns`: the job's network namespace, which its learners enter (None: the host's)."""
        if self.bwrap is None:
            return None
        dirs: dict[str, str] = spec["dirs"]
        env: dict[str, str] = spec.get("env", {})
        data = {dirs["DATA_DIR"]} | {v for k, v in env.items() if k.startswith("DATA_DIR_")}
        devices = env.get("CUDA_VISIBLE_DEVICES", "")
        built = spec.get("environment")  # the job's environment, shared read-only
        if built:
            data.add(f"{built['root']}/{built['digest']}")
        job, attempt, learner = spec["job_id"], spec["attempt"], spec["learner_id"]
        return {
            "uid": uid_for(job, self.uid_base),
            "cgroup": f"{job}-a{attempt}-l{learner}" if self.cgroups else None,
            "cpus": spec.get("cpus"),
            "memory": spec.get("memory_limit"),
            "pids": self.pids,
            "read_only": sorted(
                {*self.python, *self.read_only, *data} - {dirs[name] for name in WRITABLE}
            ),
            "writable": [dirs[name] for name in WRITABLE],
            "gpus": [int(d) for d in devices.split(",") if d.strip().isdigit()],
            "tmp_bytes": self.tmp_bytes,
            "bwrap": self.bwrap,
            "netns": netns,
        }

    def replica_section(self, deployment_id: str) -> dict[str, Any] | None:
        """The `sandbox` section of a deployment's spec: how its gateway confines replicas (a
        uid per deployment, Loom's python and the model read-only, a cgroup each)."""
        if self.bwrap is None:
            return None
        return {
            "uid": uid_for(deployment_id, self.uid_base),
            "cgroups": self.cgroups,
            "cpus": self.replica_cpus,
            "memory": self.replica_memory,
            "pids": self.pids,
            "read_only": sorted({*self.python, *self.read_only}),
            "tmp_bytes": self.tmp_bytes,
            "bwrap": self.bwrap,
            # A replica is reached through its unix socket only: a network of its own, empty.
            "network": "none" if self.network else "host",
        }

    def spawner_env(self) -> dict[str, str]:
        """The learner spawner's environment, by allow-list: never the server's secrets."""
        return environment.allowed((*environment.SYSTEM, *self.pass_env))
