"""Zip archives between the platform and its learners (no shared disk, design 3.8).

Both sides are untrusted by the other: a folder is zipped without following a link that its
learner left there, and an archive is unpacked so that nothing lands outside the target and a
refused archive changes nothing there.

    unpack_over(zip, target)    every member checked first, then all unpacked beside `target`,
                                then each file moved into place (replacing one of the same name)
    zip_files / zip_tree        plain files only, each opened without following a link
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from loom.sandbox.files import (
    UnsafePath,
    open_folder,
    open_regular,
    regular_file_stats,
    regular_files,
)

CHUNK = 1 << 20
# In a learner's checkpoints upload: not a file, the JSON list of files it deleted since.
DELETIONS = ".loom-deleted.json"
MAX_NAME_BYTES = 4096  # Linux's PATH_MAX
MAX_PART_BYTES = 255  # and NAME_MAX
# What reading a crafted archive may raise, besides `zipfile.BadZipFile`.
UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)


class ArchiveRefused(ValueError):
    """An archive refused before anything was unpacked; the message names the member and why."""


@dataclass(frozen=True)
class Unpacked:
    files: int
    bytes: int
    deleted: list[str]


def unsafe_reason(name: str, mode: int) -> str | None:
    """Why a member would write outside the archive's folder, or is a link; None if it would
    not."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or (len(name) > 1 and name[1] == ":"):
        return f"absolute path {name!r}"
    if ".." in path.parts:
        return f"path {name!r} escapes the archive's folder"
    if stat.S_ISLNK(mode):
        return f"symbolic link {name!r}"
    return None


def invalid_name(name: str) -> str | None:
    """Why a name is not a plain relative path of a file (or, ending in '/', of a folder)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"member name {name!r} holds a control character"
    if "\\" in name:
        return f"member name {name!r} holds a backslash"
    parts = name.removesuffix("/").split("/")
    if any(part in ("", ".") for part in parts):
        return f"member name {name!r} is not a relative path (an empty or '.' part)"
    if len(name.encode()) > MAX_NAME_BYTES or any(len(p.encode()) > MAX_PART_BYTES for p in parts):
        return f"member name {name[:60]!r}… is longer than a file name may be"
    return None


def _refusal(info: zipfile.ZipInfo) -> str | None:
    mode = info.external_attr >> 16
    reason = unsafe_reason(info.filename, mode) or invalid_name(info.filename)
    kind = stat.S_IFMT(mode)  # 0 when the archiver did not say (Python's own writestr)
    if reason is None and kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        reason = f"{info.filename!r} is not a plain file or folder"
    if reason is None and info.flag_bits & 0x1:
        reason = f"{info.filename!r} is encrypted"
    return reason


def checked_members(
    archive: zipfile.ZipFile, max_bytes: int, limit_name: str = ""
) -> list[zipfile.ZipInfo]:
    """The archive's members, each a plain file or folder at a safe relative path, listed once,
    together no larger than `max_bytes`; `ArchiveRefused` names the first that is not."""
    seen: set[str] = set()
    total = 0
    members = archive.infolist()
    for info in members:
        reason = _refusal(info)
        if reason is not None:
            raise ArchiveRefused(reason)
        key = info.filename.removesuffix("/")
        if key in seen:
            raise ArchiveRefused(f"{key!r} appears twice in the archive")
        seen.add(key)
        total += info.file_size
    if total > max_bytes:
        largest = max(members, key=lambda m: m.file_size)
        raise ArchiveRefused(
            f"the archive unpacks to {_mib(total)} ({largest.filename!r} alone "
            f"{_mib(largest.file_size)}), more than the limit of {_mib(max_bytes)}{limit_name}"
        )
    return members


def unpack_over(
    source: Path,
    target: Path,
    *,
    max_bytes: int,
    limit_name: str = "",
    deletions: str | None = None,
    max_folder_bytes: int | None = None,
) -> Unpacked:
    """Unpack the zip `source` over the folder `target` (made if missing): files of the same
    name are replaced, others kept. With `deletions`, the member of that name is not a file but
    a JSON list of paths to remove from `target` first. With `max_folder_bytes`, an archive
    that would leave `target` holding more is refused. A refused archive (`ArchiveRefused`)
    changes nothing."""
    try:
        archive = zipfile.ZipFile(source)
    except (*UNREADABLE, OSError, ValueError) as exc:
        raise ArchiveRefused(f"the body is not a zip archive ({exc})") from exc
    with archive:
        members = checked_members(archive, max_bytes, limit_name)
        deleted = _deletions(archive, deletions) if deletions else []
        members = [m for m in members if m.filename != deletions]
        if max_folder_bytes is not None:
            _check_folder(target, members, deleted, max_folder_bytes, limit_name)
        target.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-upload-"))
        try:
            size = _extract(archive, members, staging)
            for name in deleted:
                _remove(target, name)
            placed = regular_files(staging)
            for name in placed:
                _place(staging, name, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Unpacked(len(placed), size, deleted)


def _deletions(archive: zipfile.ZipFile, member: str) -> list[str]:
    """The paths the member `member` lists; none when the archive has no such member."""
    if member not in archive.NameToInfo:
        return []
    try:
        names = json.loads(archive.read(member))
    except (*UNREADABLE, ValueError) as exc:
        raise ArchiveRefused(f"{member!r} cannot be read as JSON: {exc}") from exc
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ArchiveRefused(f"{member!r} must be a JSON list of file paths")
    for name in names:
        reason = unsafe_reason(name, 0) or invalid_name(name)
        if reason is not None:
            raise ArchiveRefused(f"{member!r} lists {reason}")
    return list(names)


def _check_folder(
    target: Path, members: list[zipfile.ZipInfo], deleted: list[str], limit: int, named: str
) -> None:
    incoming = {m.filename: m.file_size for m in members if not m.is_dir()}
    kept = regular_file_stats(target)
    after = sum(incoming.values()) + sum(
        info.st_size for name, info in kept.items() if name not in incoming and name not in deleted
    )
    if after > limit:
        raise ArchiveRefused(
            f"with this archive the folder would hold {_mib(after)}, more than the limit of "
            f"{_mib(limit)}{named}"
        )


def _extract(archive: zipfile.ZipFile, members: list[zipfile.ZipInfo], folder: Path) -> int:
    """Every member into the fresh folder `folder`; the bytes written."""
    total = 0
    for info in members:
        parts = info.filename.removesuffix("/").split("/")
        try:
            fd = open_folder(folder, parts if info.is_dir() else parts[:-1])
        except (FileExistsError, NotADirectoryError) as exc:
            raise ArchiveRefused(f"{info.filename!r} lies inside a file of the archive") from exc
        try:
            if not info.is_dir():
                total += _write_member(archive, info, parts[-1], fd)
        except UNREADABLE as exc:
            raise ArchiveRefused(f"{info.filename!r} cannot be read: {exc}") from exc
        except FileExistsError as exc:
            raise ArchiveRefused(f"{info.filename!r} is also a folder of the archive") from exc
        finally:
            os.close(fd)
    return total


def _write_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, fd: int) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    written = 0
    sink = os.fdopen(os.open(name, flags, 0o644, dir_fd=fd), "wb")
    with sink, archive.open(info) as data:
        while chunk := data.read(CHUNK):
            written += len(chunk)
            if written > info.file_size:  # zipfile stops there; this says so if not
                raise ArchiveRefused(f"{info.filename!r} is larger than the archive says")
            sink.write(chunk)
    return written


def _place(staging: Path, name: str, target: Path) -> None:
    """Move one unpacked file into `target`, replacing a file, link or folder of its name."""
    parts = name.split("/")
    fd = open_folder(target, parts[:-1], clear=True)
    try:
        try:
            os.replace(staging / name, parts[-1], dst_dir_fd=fd)
        except OSError:  # a folder of that name: the archive's file takes its place
            shutil.rmtree(parts[-1], dir_fd=fd)
            os.replace(staging / name, parts[-1], dst_dir_fd=fd)
    finally:
        os.close(fd)


def _remove(target: Path, name: str) -> None:
    parts = name.split("/")
    try:
        fd = open_folder(target, parts[:-1], make=False)
    except OSError:  # no such folder: nothing to remove
        return
    try:
        with suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(parts[-1], dir_fd=fd)
    finally:
        os.close(fd)


def zip_files(
    folder: Path,
    names: Iterable[str],
    target: Path,
    *,
    extra: dict[str, bytes] | None = None,
    compression: int = zipfile.ZIP_DEFLATED,
) -> dict[str, os.stat_result]:
    """Write the plain files `names` of `folder` and the `extra` members into the zip `target`.
    Each file is opened without following a link; one gone, or made a link, since it was listed
    is left out. What was written, each with the `fstat` of the file it was read from."""
    written: dict[str, os.stat_result] = {}
    with zipfile.ZipFile(target, "w", compression) as archive:
        for relative in names:
            try:
                source = open_regular(folder, relative)
            except UnsafePath:
                continue
            with source:
                seen = os.fstat(source.fileno())
                big = seen.st_size >= 1 << 30  # zip64 headers: it may pass 2 GiB as it is read
                with archive.open(relative, "w", force_zip64=big) as out:
                    shutil.copyfileobj(source, out, CHUNK)
            written[relative] = seen
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return written


def zip_tree(folder: Path, target: Path, compression: int = zipfile.ZIP_DEFLATED) -> None:
    """A zip of a folder's plain files at `target`; empty if there is no folder."""
    zip_files(folder, regular_files(folder), target, compression=compression)


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
