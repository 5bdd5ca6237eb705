"""What starting code in a sandbox takes besides its command line, for learners and serving
replicas alike: folders handed to its uid, its `/etc/passwd`, and its cgroup."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from loom.sandbox import bwrap, cgroups


def own(path: Path, uid: int, *, recursive: bool) -> None:
    """The folder (made by the platform, so not a link) and, with `recursive`, what the
    platform put in it belong to `uid`; no link is followed."""
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, uid, uid, follow_symlinks=False)
    if not recursive:
        return
    for folder, dirs, files, dir_fd in os.fwalk(path, follow_symlinks=False):
        os.chown(folder, uid, uid, follow_symlinks=False)
        for name in dirs + files:
            with contextlib.suppress(OSError):
                os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)


def identity_files(folder: Path, uid: int) -> dict[str, str]:
    """`/etc/passwd` and `/etc/group` naming `uid`, written into `folder` (the platform's,
    never shown as such) and mapped for `bwrap.View.files`."""
    users, groups = bwrap.passwd(uid)
    shown = {}
    for name, text in (("passwd", users), ("group", groups)):
        path = folder / f"sandbox-{name}"
        path.write_text(text)
        path.chmod(0o644)  # read inside the sandbox, whatever the platform's umask
        shown[f"/etc/{name}"] = str(path)
    return shown


def hosts_file(folder: Path) -> dict[str, str]:
    """`/etc/hosts` for a sandbox: this machine's name on the loopback, where a job in a network
    of its own finds itself (the collective libraries resolve it to pick an address)."""
    import socket

    name = socket.gethostname()
    path = folder / "sandbox-hosts"
    path.write_text(f"127.0.0.1\tlocalhost {name}\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    path.chmod(0o644)
    return {"/etc/hosts": str(path)}


def make_cgroup(
    name: str, cpus: float | None, memory: int | None, pids: int | None
) -> cgroups.Cgroup | None:
    """A fresh cgroup with these limits, or None where this machine has none to give."""
    limits = cgroups.Limits(cpus=cpus, memory=memory, pids=pids)
    try:
        return cgroups.detect().create(name, limits)
    except cgroups.CgroupUnavailable:
        return None
