"""A network namespace per job: its learners meet on its own loopback and reach nothing else.

A namespace is made by a short-lived thread that leaves the host's network (`unshare`), brings
its loopback up, and pins it with a bind mount at `/run/netns/<name>` (where `ip netns` finds it
too, so an admin can look inside with `ip netns exec <name> ss -tlnp`). It lives as long as that
file: the job's processes enter it before they start (`enter`, in the child, before exec), and
the platform's own helpers for the job (the learner's MLflow endpoint) open their listening
sockets inside it (`inside`) — a socket stays in the namespace it was made in, whichever thread
then serves it. Removing the file leaves the namespace to the kernel, which frees it once the
last process in it is gone.

Nothing here shells out: `ip` costs two execs (~10 ms) where these calls cost well under one.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

RUN_DIR = Path("/run/netns")
PREFIX = "loom-"
CLONE_NEWNET = 0x40000000
MS_BIND = 0x1000
MNT_DETACH = 0x2
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
IFF_UP = 0x1
_IFREQ = struct.Struct("16sH14x")

T = TypeVar("T")


class NetnsUnavailable(OSError):
    """This machine gives Loom no network namespace; the message says why."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, doing: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NetnsUnavailable(errno, f"cannot {doing}: {os.strerror(errno)}")


def name_for(job_id: str, attempt: int) -> str:
    """The namespace of one attempt of a job (a file name: what is not a safe character goes)."""
    return f"{PREFIX}{re.sub(r'[^A-Za-z0-9_.-]', '_', job_id)[:200]}-a{int(attempt)}"


def path_for(name: str, root: Path = RUN_DIR) -> Path:
    return root / name


def create(name: str, root: Path = RUN_DIR) -> Path:
    """The namespace `name`, made with its loopback up, or the one already there (a second
    launch of the same attempt after a platform restart joins what its learners are in)."""
    path = path_for(name, root)
    if _is_namespace(path):
        return path
    root.mkdir(parents=True, exist_ok=True)
    failure: list[BaseException] = []

    def make() -> None:
        try:
            _check(_libc().unshare(CLONE_NEWNET), "leave the host's network (unshare)")
            _loopback_up()
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o444))
            own = f"/proc/self/task/{threading.get_native_id()}/ns/net".encode()
            _check(_libc().mount(own, bytes(path), None, MS_BIND, None), f"pin {path}")
        except BaseException as exc:  # raised again in the caller's thread
            failure.append(exc)

    # The thread that unshares is left in the new namespace and ends there: the caller's
    # own thread never leaves the host's network.
    worker = threading.Thread(target=make, name="netns", daemon=True)
    worker.start()
    worker.join()
    if failure:
        remove(name, root)
        raise failure[0]
    return path


def remove(name: str, root: Path = RUN_DIR) -> None:
    """Unpin the namespace; harmless when it is not there."""
    path = path_for(name, root)
    _libc().umount2(bytes(path), MNT_DETACH)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError:  # still pinned by another mount namespace's copy: the kernel frees it later
        pass


def names(root: Path = RUN_DIR) -> list[str]:
    """Loom's namespaces on this machine."""
    try:
        return sorted(p.name for p in root.iterdir() if p.name.startswith(PREFIX))
    except OSError:
        return []


def open_namespace(path: str | Path) -> int:
    """A descriptor of the namespace, for `enter` (opened before a fork, used after it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise NetnsUnavailable(exc.errno, f"the job's network {path} is gone") from exc
    return fd


def enter(fd: int) -> None:
    """Move the calling thread into the namespace (in a forked child before exec: the whole
    process, and what it starts)."""
    _check(_libc().setns(fd, CLONE_NEWNET), "enter the job's network (setns)")


def inside(path: str | Path, make: Callable[[], T]) -> T:
    """`make()` run by a thread that is inside the namespace: sockets it opens stay there."""
    fd = open_namespace(path)
    box: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            enter(fd)
            box.append(make())
        except BaseException as exc:
            failure.append(exc)

    try:
        worker = threading.Thread(target=run, name="netns-socket", daemon=True)
        worker.start()
        worker.join()
    finally:
        os.close(fd)
    if failure:
        raise failure[0]
    return box[0]


def probe(root: Path = RUN_DIR) -> str | None:
    """None when namespaces can be made here, else why not."""
    name = f"{PREFIX}probe-{os.getpid()}"
    try:
        create(name, root)
    except OSError as exc:
        return str(exc) if isinstance(exc, NetnsUnavailable) else f"cannot use {root}: {exc}"
    finally:
        remove(name, root)
    return None


def _is_namespace(path: Path) -> bool:
    """The file is a pinned namespace (a bind mount of one), not a left-over empty file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.fstat(fd).st_dev != os.stat(path.parent).st_dev
    finally:
        os.close(fd)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = _IFREQ.pack(b"lo", 0)
        flags = _IFREQ.unpack(fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | IFF_UP))
