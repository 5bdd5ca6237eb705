"""The command line that runs untrusted code confined, with Debian's `bubblewrap`.

What the confined process gets:
- its own mount view, built from nothing: the system's programs and libraries read-only, the
  Python that Loom runs under read-only, then only the folders it is given (its job's), a
  private `/tmp`, a fresh `/proc` that shows only its own processes, a minimal `/dev` (plus the
  GPUs it was given), and `/etc/passwd` naming its uid;
- of the host's `/etc`, only what programs read to run (the dynamic linker's cache, locale and
  time zone, certificates, name-service and MIME tables, alternatives), never its users, shadow,
  package sources, configuration of services or credentials; of `/sys`, the CPUs, NUMA nodes
  and its own cgroup (a GPU job the whole of it: the driver walks the PCI tree);
- its own pid and IPC namespaces: it can see or signal no process outside, and when its first
  process ends every process it left behind is killed by the kernel;
- its own unprivileged uid and gid with no supplementary groups, no capabilities and
  `no_new_privs`: `bwrap` builds the view as root, then `setpriv` drops every right before the
  user's command starts.

The network is the caller's: a job's learners are started inside their job's namespace
(`sandbox.netns`), where they meet on its loopback; `unshare_net` gives the view an empty network
of its own (a serving replica, reached through its unix socket only).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_DIRS = ("/usr",)
# What of the host's /etc a program needs to run; `passwd`, `group` and `hosts` are the view's own.
ETC_SHOWN = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "fonts",
    "gai.conf",
    "host.conf",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "locale.alias",
    "localtime",
    "magic",
    "magic.mime",
    "matplotlibrc",
    "mime.types",
    "mtab",
    "networks",
    "nsswitch.conf",
    "openmpi",
    "os-release",
    "pki",
    "protocols",
    "python3",
    "resolv.conf",
    "services",
    "ssl",
    "terminfo",
    "timezone",
)
ETC_PREFIXES = ("python3.",)  # Debian's python3.11/ (sitecustomize)
SYS_SHOWN = ("devices/system/cpu", "devices/system/node", "kernel/mm/transparent_hugepage")
LINKED = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
NVIDIA_SHARED = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


@dataclass
class View:
    """What one sandbox sees and runs as."""

    uid: int
    read_only: list[str] = field(default_factory=list)
    writable: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # a host file shown at a path, read-only
    gpus: list[int] = field(default_factory=list)
    tmp_bytes: int | None = None
    cwd: str = "/"
    unshare_net: bool = False  # an empty network of its own (else the caller's)
    # its own cgroup's folders, each at the path it is shown at (`cgroups.Cgroup.shown`)
    cgroup: dict[str, str] = field(default_factory=dict)


def python_paths() -> list[str]:
    """The folders Loom's own Python needs: its prefixes and the folder `loom` is imported from
    (a source checkout when installed in editable mode). Never the current folder."""
    import loom

    paths = {sys.prefix, sys.base_prefix, str(Path(loom.__file__).resolve().parent.parent)}
    real = {str(Path(p).resolve()) for p in paths}
    return sorted(_outermost(paths | real))


def _outermost(paths: set[str]) -> set[str]:
    ordered = sorted(paths, key=len)
    kept: list[str] = []
    for path in ordered:
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return set(kept)


def command(
    view: View, argv: list[str], *, bwrap: str = "bwrap", copied: list[int] | None = None
) -> list[str]:
    """`bwrap … setpriv … argv`: argv run inside the view, as `view.uid`.

    With `copied` (a list to fill), the single files the view shows in /etc (the host's
    allow-listed ones and the view's own passwd, group, hosts) are copied into it by bwrap from
    a descriptor each (`--file`), opened here and added to `copied`, instead of bound one by one:
    bwrap 0.8 reads the whole mount table again for each read-only bind, which made the view
    cost some 20–35 ms more to start. The caller passes them to bwrap (`pass_fds`) and closes
    them once it has started; the copies are root's, 0644, in a folder only root may write."""
    args = [
        bwrap,
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-cgroup-try",
        *(["--unshare-net"] if view.unshare_net else []),
        "--die-with-parent",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    for folder in SYSTEM_DIRS:
        if os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for name in LINKED:
        args += _root_entry(name)
    args += etc_entries(copied=copied)
    args += sys_entries(whole=bool(view.gpus), cgroup=view.cgroup)
    made: set[str] = {"/etc", "/sys"}
    for path, source in view.files.items():
        args += [*_parents(path, made), *_shown_file(source, path, copied)]
    args += _tmp("/tmp", view.tmp_bytes)
    # POSIX shared memory and semaphores (multiprocessing locks, data-loader workers)
    args += _tmp("/dev/shm", view.tmp_bytes)
    for path in view.read_only:
        if not _under_system(path):  # already shown, read-only (binding again can fail)
            args += [*_parents(path, made), "--ro-bind", path, path]
    for path in view.writable:
        args += [*_parents(path, made), "--bind", path, path]
    for device in gpu_devices(view.gpus):
        args += ["--dev-bind", device, device]
    args += ["--chdir", view.cwd, "--"]
    return args + drop_rights(view.uid) + argv


def etc_entries(etc: Path = Path("/etc"), copied: list[int] | None = None) -> list[str]:
    """The host's /etc, reduced to `ETC_SHOWN` (each read-only, where this machine has it;
    single files copied in with `copied`, see `command`)."""
    args = ["--perms", "0755", "--dir", "/etc"]
    try:
        present = sorted(os.listdir(etc))
    except OSError:
        return args
    for name in present:
        if name in ETC_SHOWN or name.startswith(ETC_PREFIXES):
            path = etc / name
            if path.is_symlink() and name == "mtab":
                args += ["--symlink", os.readlink(path), f"/etc/{name}"]
            elif path.exists():
                args += _shown_file(str(path), f"/etc/{name}", copied)
    return args


def _shown_file(source: str, target: str, copied: list[int] | None) -> list[str]:
    """`source` shown read-only at `target`: a regular file (not a link) copied in from a
    descriptor when `copied` collects them, anything else bound."""
    if copied is not None and not os.path.islink(source) and os.path.isfile(source):
        try:
            fd = os.open(source, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return ["--ro-bind", source, target]
        copied.append(fd)
        return ["--perms", "0644", "--file", str(fd), target]
    return ["--ro-bind", source, target]


def sys_entries(*, whole: bool, cgroup: dict[str, str], root: Path = Path("/sys")) -> list[str]:
    """The host's /sys (a GPU job's: the driver reads the PCI tree), else only the CPUs, NUMA
    nodes and memory settings, and the learner's own cgroup where a reader looks for limits."""
    if not root.is_dir():
        return []
    if whole:
        return ["--ro-bind", str(root), "/sys"]
    shown = {f"/sys/{part}": str(root / part) for part in SYS_SHOWN}
    shown.update(cgroup)
    args: list[str] = []
    made: set[str] = set()
    for target, source in sorted(shown.items()):
        if os.path.isdir(source):
            for folder in reversed(Path(target).parents[:-1]):  # /sys, /sys/devices, …
                if str(folder) not in made:
                    made.add(str(folder))
                    args += ["--perms", "0755", "--dir", str(folder)]
            args += ["--ro-bind", source, target]
    return args


def drop_rights(uid: int) -> list[str]:
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def _under_system(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in SYSTEM_DIRS)


def _parents(path: str, made: set[str]) -> list[str]:
    """Folders on the way to a mount point that the view lacks, made traversable by the learner
    (bwrap would make them 0700); `made` remembers those already made."""
    args: list[str] = []
    parent = Path(path).parent
    for folder in reversed([parent, *parent.parents]):
        text = str(folder)
        if text in made or text == "/" or any(text.startswith(d + "/") for d in SYSTEM_DIRS):
            continue
        if text in SYSTEM_DIRS or text == "/tmp":
            continue
        made.add(text)
        args += ["--perms", "0711", "--dir", text]
    return args


def _root_entry(name: str) -> list[str]:
    """`/bin`, `/lib`, …: a symlink into /usr on merged-/usr systems, else a read-only bind."""
    path = Path("/") / name
    if path.is_symlink():
        return ["--symlink", os.readlink(path), str(path)]
    if path.is_dir():
        return ["--ro-bind", str(path), str(path)]
    return []


def _tmp(path: str, size: int | None) -> list[str]:
    """A private tmpfs that everyone in the view may write (its pages count to its cgroup)."""
    args = ["--perms", "1777"]
    if size:
        args += ["--size", str(size)]
    return [*args, "--tmpfs", path]


def gpu_devices(gpus: list[int]) -> list[str]:
    """The device nodes of the given GPUs and the driver's shared nodes; none for a CPU job."""
    if not gpus:
        return []
    nodes = [f"/dev/nvidia{g}" for g in gpus]
    nodes += [f"/dev/{name}" for name in NVIDIA_SHARED]
    caps = Path("/dev/nvidia-caps")
    if caps.is_dir():
        nodes += [str(p) for p in sorted(caps.iterdir())]
    return [n for n in nodes if os.path.exists(n)]


def passwd(uid: int, home: str = "/tmp") -> tuple[str, str]:
    """`/etc/passwd` and `/etc/group` for a sandbox: root, nobody, and the job's own user."""
    users = (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"loom:x:{uid}:{uid}:Loom job:{home}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    groups = f"root:x:0:\nloom:x:{uid}:\nnogroup:x:65534:\n"
    return users, groups
