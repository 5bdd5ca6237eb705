"""How a gateway starts a replica inside the sandbox its spec asks for.

A replica runs a user's model: like a learner it gets its own uid (one per deployment), a view
of Loom's python and its model folder (read-only) and its socket folder, a private `/tmp`, its
own pid namespace, and a cgroup of its own with the replica's cpus, memory and pids. It sees no
other file of the deployment (not the access rules, the spec, logs or request log) and nothing
of the platform's home.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loom.sandbox import bwrap, cgroups
from loom.sandbox.runner import identity_files, make_cgroup, own
from loom.serving.environment import serving_env
from loom.serving.spec import SOCKETS


@dataclass(frozen=True)
class Start:
    """How to start one replica: its argv, cgroup, what its child does before exec, its env."""

    command: list[str]
    group: cgroups.Cgroup | None
    before_exec: Callable[[], None] | None
    env: dict[str, str]


def confine(
    section: dict[str, Any] | None,
    folder: Path,
    name: str,
    command: list[str],
    model_dir: Path,
    gpus: list[int] | None = None,
    environment: Path | None = None,
) -> Start:
    """A replica's start, confined as the deployment's `sandbox` section says (as it is when
    the section is None): in `folder` (its working folder, with the `run/` socket folder). It
    sees the `gpus` it is pinned to and no other (none: no GPU at all), and its `environment`
    (read-only, shared with other replicas that want the same one)."""
    gpus = gpus or []
    env = {**serving_env(), **gpu_env(gpus)}
    if section is None:
        return Start(command, None, None, env)
    sandbox = ReplicaSandbox(section, folder, SOCKETS)
    (folder / SOCKETS).mkdir(exist_ok=True)
    sandbox.prepare(model_dir)
    argv, group, before_exec = sandbox.start(name, command, model_dir, gpus, environment)
    return Start(argv, group, before_exec, {**env, "HOME": "/tmp"})


class ReplicaSandbox:
    def __init__(self, section: dict[str, Any], folder: Path, sockets: str) -> None:
        self.section = section
        self.folder = folder  # the deployment's, the replicas' working folder
        self.sockets = folder / sockets
        self.uid = int(section["uid"])

    def prepare(self, model_dir: Path) -> None:
        """The socket folder and the model's copy belong to the deployment's uid (the gateway,
        as root, still reaches them)."""
        own(self.sockets, self.uid, recursive=False)
        own(model_dir, self.uid, recursive=True)

    def start(
        self,
        name: str,
        command: list[str],
        model_dir: Path,
        gpus: list[int],
        environment: Path | None = None,
    ) -> tuple[list[str], cgroups.Cgroup | None, Callable[[], None] | None]:
        """The confined argv of one replica, its cgroup, and what its child does before exec."""
        section = self.section
        group = None
        if section.get("cgroups"):
            group = make_cgroup(name, section.get("cpus"), section.get("memory"), section["pids"])
        view = bwrap.View(
            uid=self.uid,
            read_only=[
                *section["read_only"],
                str(model_dir),
                *([str(environment)] if environment else []),
            ],
            writable=[str(self.sockets)],
            files=identity_files(self.folder, self.uid),
            gpus=gpus,
            tmp_bytes=section.get("tmp_bytes"),
            cwd=str(self.folder),
        )
        argv = bwrap.command(view, command, bwrap=section["bwrap"])
        return argv, group, (lambda: group.join(0)) if group is not None else None


def gpu_env(gpus: list[int]) -> dict[str, str]:
    """The variables that pin a replica to its GPUs: CUDA numbers the visible ones from 0, so
    the replica's `cuda:0` is the first it was given; an empty list hides every GPU."""
    devices = ",".join(str(g) for g in gpus)
    return {"CUDA_VISIBLE_DEVICES": devices, "NVIDIA_VISIBLE_DEVICES": devices or "void"}
