"""How the wrapper runs the user's command: in a sandbox when the spec asks for one.

The wrapper itself is the platform's code and keeps the platform's rights (it ships logs with the
job's token and reaches data stores with the job's credentials); only the command it starts is
confined. The spec's `sandbox` section, written by the launcher, says how:

    {"uid": 1500012345, "cgroup": "training-abc-a1-l1", "cpus": 1.0, "memory": 2147483648,
     "pids": 4096, "read_only": [...], "writable": [...], "gpus": [0], "tmp_bytes": ...,
     "bwrap": "/usr/bin/bwrap", "netns": "/run/netns/loom-training-abc-a1"}

With `netns`, the command starts inside its job's network namespace (entered before exec, so
bwrap and all it starts are there): it reaches its job's other learners and the helpers the
wrapper opens for it there, on that namespace's loopback, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loom.sandbox import bwrap, cgroups, netns
from loom.sandbox.runner import hosts_file, identity_files, make_cgroup, own

BIN = "/opt/loom/bin"


class Confinement:
    """The sandbox of one learner attempt: its view, its cgroup, its teardown."""

    def __init__(self, spec: dict[str, Any], private: Path) -> None:
        self.spec = spec
        self.private = private  # the wrapper's own folder, never shown to the learner
        self.uid = int(spec["uid"])
        self.group: cgroups.Cgroup | None = None
        self.network: str | None = spec.get("netns")
        self._network_fd = -1

    # -- before the command ---------------------------------------------------------------
    def prepare(self, unpacked: Path, fetched: list[Path]) -> None:
        """Hand the writable folders, the code the wrapper unpacked and the data it fetched
        (shown read-only) to the job's uid, and make the cgroup."""
        for path in self.spec["writable"]:
            own(Path(path), self.uid, recursive=Path(path) == unpacked)
        for path in fetched:
            if path.is_dir() and not path.is_symlink():
                own(path, self.uid, recursive=True)
        if self.network is not None and self._network_fd < 0:
            self._network_fd = netns.open_namespace(self.network)  # gone: the attempt is over
        name = self.spec.get("cgroup")
        if name:
            limits = (self.spec.get("cpus"), self.spec.get("memory"), self.spec.get("pids"))
            self.group = make_cgroup(name, *limits)

    def argv(self, command: str, cwd: str, shims: Path, copied: list[int]) -> list[str]:
        """bwrap's command line; the descriptors of the files it copies into the view are added
        to `copied` (for `pass_fds`, closed by the caller once bwrap has started)."""
        view = bwrap.View(
            uid=self.uid,
            # Folders that do not exist (an empty data store's) cannot be shown.
            read_only=[p for p in self.spec["read_only"] if os.path.isdir(p)],
            writable=list(self.spec["writable"]),
            files={
                **identity_files(self.private, self.uid),
                **(hosts_file(self.private) if self.network else {}),
                BIN: str(shims),
            },
            gpus=[int(g) for g in self.spec.get("gpus", [])],
            tmp_bytes=self.spec.get("tmp_bytes"),
            cwd=cwd,
            cgroup=self.group.shown() if self.group is not None else {},
        )
        return bwrap.command(
            view, ["/bin/bash", "-c", command], bwrap=self.spec["bwrap"], copied=copied
        )

    def enter(self) -> None:
        """In the forked child, before exec: join the cgroup (as root, while it still can) and
        the job's network."""
        if self.group is not None:
            self.group.join(0)
        if self._network_fd >= 0:
            netns.enter(self._network_fd)

    def network_env(self) -> dict[str, str]:
        """In a namespace of its own the job has one interface, its loopback: the collective
        libraries are told so rather than left to guess from the host's name."""
        if self.network is None:
            return {}
        return {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}

    # -- while it runs ----------------------------------------------------------------------
    @property
    def limits_memory(self) -> bool:
        return self.group is not None and bool(self.spec.get("memory"))

    def signal(self, sig: int, monitor: int) -> None:
        """A signal to every process of the learner (its cgroup's, else its process group's),
        sparing bwrap's monitor (`monitor`, the group's leader): were it to die first, the
        kernel would kill the learner before it could save its work."""
        if self.group is not None:
            self.group.signal(sig, spare={monitor})
            return
        for pid, _fields in process_group(monitor):
            if pid != monitor:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)

    # -- after it ---------------------------------------------------------------------------
    def oom_killed(self) -> bool:
        return self.group is not None and self.group.oom_killed() > 0

    def teardown(self) -> None:
        """Nothing the learner started outlives it."""
        if self.group is not None:
            self.group.remove()
        if self._network_fd >= 0:
            os.close(self._network_fd)
            self._network_fd = -1


def disk_usage(path: Path) -> int:
    """Bytes a folder holds, links not followed: each file at its apparent size or what it
    takes on disk, whichever is more (a sparse file is counted whole: stored or uploaded, it
    takes all of it)."""
    total = 0
    with contextlib.suppress(OSError):
        for _folder, _dirs, files, dir_fd in os.fwalk(path, follow_symlinks=False):
            for name in files:
                with contextlib.suppress(OSError):
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if not stat.S_ISLNK(info.st_mode):
                        total += max(info.st_size, info.st_blocks * 512)
    return total


def process_group(pgid: int) -> Iterator[tuple[int, list[bytes]]]:
    """The processes of one process group, read from /proc: each pid with the fields of its
    `stat` that follow the command name (state, ppid, pgrp, …)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            yield int(entry.name), fields
