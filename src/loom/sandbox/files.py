"""Reading what untrusted code left behind without following it anywhere.

A sandboxed learner owns its results folder and can leave symbolic links, hard links, FIFOs or
device nodes there. The platform (root) must never follow one out of the folder: a link named
`model/model.onnx` pointing at the admin's token would otherwise become a downloadable model
file. Every folder is opened relative to its parent with `O_NOFOLLOW`, so a link swapped in
after the walk is refused too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NOFOLLOW_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class UnsafePath(OSError):
    """A path under a folder of untrusted code that is not a plain file or folder of its own."""


def regular_files(root: Path) -> list[str]:
    """Relative paths ('/'-separated) of the plain files under `root`, sorted: no symlink is
    followed or listed, and files with other hard links or of special types are left out."""
    return sorted(regular_file_stats(root))


def regular_file_stats(root: Path) -> dict[str, os.stat_result]:
    """`regular_files`, each with its `lstat`."""
    if not _is_real_dir(root):
        return {}
    found = {}
    for folder, _dirs, names, dir_fd in os.fwalk(root, follow_symlinks=False):
        base = Path(folder).relative_to(root)
        for name in names:
            with contextlib.suppress(OSError):
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                    found[(base / name).as_posix()] = info
    return found


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def open_regular(root: Path, relative: str) -> BinaryIO:
    """Open `root/relative` for reading, refusing links at every step and anything but a plain
    file with a single link."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise UnsafePath(f"not a file path: {relative!r}")
    fd = os.open(root, NOFOLLOW_DIR)
    try:
        for part in parts[:-1]:
            child = os.open(part, NOFOLLOW_DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        handle = os.open(parts[-1], NOFOLLOW_FILE, dir_fd=fd)
    except OSError as exc:
        raise UnsafePath(f"{relative!r} is not a plain file: {exc.strerror}") from exc
    finally:
        os.close(fd)
    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(handle)
        raise UnsafePath(f"{relative!r} is not a plain file with a single link")
    os.set_blocking(handle, True)
    return os.fdopen(handle, "rb")


def copy_tree(root: Path, target: Path) -> int:
    """Copy the plain files under `root` to `target` (created as needed); the count copied."""
    import shutil

    count = 0
    for relative in regular_files(root):
        try:
            source = open_regular(root, relative)
        except UnsafePath:
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        with source, destination.open("wb") as out:
            shutil.copyfileobj(source, out)
        count += 1
    return count


def iter_chunks(root: Path, relative: str, size: int = 1 << 20) -> Iterator[bytes]:
    with open_regular(root, relative) as handle:
        while chunk := handle.read(size):
            yield chunk


def write_file(folder: Path, relative: str, data: bytes) -> None:
    """Create or replace `folder/relative` without following a link the learner planted
    (in the file's place or in a folder on the way)."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    fd = open_folder(folder, parts[:-1])
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(parts[-1], flags, 0o644, dir_fd=fd)
    finally:
        os.close(fd)
    with os.fdopen(out, "wb") as handle:
        handle.write(data)


def open_folder(root: Path, parts: list[str], *, make: bool = True, clear: bool = False) -> int:
    """A descriptor of the folder `root/parts…` (made where missing, unless `make` is False),
    without following a link on the way; with `clear`, a file or link standing where a folder
    must be is removed."""
    fd = os.open(root, NOFOLLOW_DIR)
    try:
        for part in parts:
            if make:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, NOFOLLOW_DIR, dir_fd=fd)
            except OSError:  # ENOTDIR, ELOOP: not a folder of its own
                if not clear:
                    raise
                os.unlink(part, dir_fd=fd)
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, NOFOLLOW_DIR, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_nofollow(path: Path) -> BinaryIO:
    """Open a file that untrusted code may have replaced: refused if it is a link, a FIFO or
    anything but a plain file (the caller sees an OSError, as for a missing file)."""
    handle = os.open(path, NOFOLLOW_FILE)
    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode):
        os.close(handle)
        raise UnsafePath(f"{path.name!r} is not a plain file")
    os.set_blocking(handle, True)
    return os.fdopen(handle, "rb")
