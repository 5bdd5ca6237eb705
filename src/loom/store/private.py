"""The platform's home is its owner's alone: folders 0700, files 0600.

New files get those modes from the umask the server sets; `tighten` fixes what an older version,
a looser umask or a world-writable home left behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from loom.domain.errors import PlatformError

PRIVATE_UMASK = 0o077


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step, in a file only its owner can read."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)


def create_private(path: Path) -> None:
    """Create an empty owner-only file unless it exists (SQLite opens it as an empty database)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return


def tighten(home: Path) -> None:
    """Make `home` private (0700) and what lies directly in it its owner's alone.

    Only the top level is walked: once the home is 0700 nobody else reaches anything below it,
    and files below may be meant for a sandboxed learner's uid (its hostfile, `/etc/passwd`,
    python shims), which a deep walk would make unreadable under a learner that is running."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        home.chmod(0o700)
    except PermissionError as exc:
        raise PlatformError(
            f"LOOM_HOME {home} belongs to another user, so it cannot be made private; "
            "point LOOM_HOME at a folder of your own"
        ) from exc
    uid = os.getuid()
    for entry in home.iterdir():
        with contextlib.suppress(FileNotFoundError):
            _private(entry, uid)


def _private(path: Path, uid: int) -> None:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or info.st_uid != uid:
        return
    wanted = 0o700 if stat.S_ISDIR(info.st_mode) else (info.st_mode & 0o700)
    if stat.S_IMODE(info.st_mode) != wanted:
        path.chmod(wanted)
