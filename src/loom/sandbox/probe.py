"""Can this machine sandbox untrusted code? Asked once when the platform starts."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from loom.sandbox import bwrap, cgroups, netns


@dataclass(frozen=True)
class Support:
    """`sandbox` if learners can be confined; `reason` says why not, or what confines them."""

    sandbox: bool
    reason: str
    cgroups: str  # the cgroup layout used, or why there is none
    bwrap: str | None = None
    network: str | None = "not probed"  # why jobs cannot have networks of their own; None: they can


def probe(uid_base: int) -> Support:
    if os.uname().sysname != "Linux":
        return Support(False, f"sandboxing needs Linux, this is {os.uname().sysname}", "none")
    if os.geteuid() != 0:
        return Support(
            False,
            "sandboxing needs the platform to run as root (to give jobs their own uid)",
            "none",
        )
    found = shutil.which("bwrap")
    if found is None:
        return Support(False, "bubblewrap is not installed (apt-get install bubblewrap)", "none")
    if shutil.which("setpriv") is None:
        return Support(False, "setpriv (util-linux) is not installed", "none")
    trial = bwrap.command(bwrap.View(uid=uid_base), ["/bin/true"], bwrap=found)
    try:
        done = subprocess.run(trial, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return Support(False, f"bubblewrap could not run: {exc}", "none")
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return Support(False, f"bubblewrap cannot create namespaces here: {why[0]}", "none")
    network = netns.probe()
    views = "own uid, mount view, pid namespace" + (", network namespace" if not network else "")
    try:
        layout = cgroups.detect().describe()
    except cgroups.CgroupUnavailable as exc:
        return Support(True, f"bubblewrap ({views}); no cgroup limits", str(exc), found, network)
    return Support(True, f"bubblewrap ({views}), {layout}", layout, found, network)
