"""Model definition archives: checked before they are stored, unpacked safely, made from folders."""

from __future__ import annotations

import io
import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

from loom.domain.errors import ArchiveError, PayloadTooLarge
from loom.sandbox.files import UnsafePath, open_regular, regular_files


def _unsafe_reason(name: str, mode: int) -> str | None:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or (len(name) > 1 and name[1] == ":"):
        return f"absolute path {name!r}"
    if ".." in path.parts:
        return f"path {name!r} escapes the archive's folder"
    if stat.S_ISLNK(mode):
        return f"symbolic link {name!r}"
    return None


def check_zip(data: bytes, *, max_unpacked: int) -> list[str]:
    """Validate a zip archive and return its file names; raise `ArchiveError` (C102) if bad."""
    if not data:
        raise ArchiveError("the model definition is empty; send a zip archive of the code")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ArchiveError(f"the model definition is not a valid zip archive: {exc}") from exc
    with archive:
        infos = archive.infolist()
        total = 0
        for info in infos:
            reason = _unsafe_reason(info.filename, info.external_attr >> 16)
            if reason is not None:
                raise ArchiveError(f"the model definition contains an unsafe entry: {reason}")
            total += info.file_size
        if total > max_unpacked:
            raise PayloadTooLarge(
                f"the model definition unpacks to {total} bytes, more than the limit of "
                f"{max_unpacked} bytes"
            )
        try:
            broken = archive.testzip()
        except Exception as exc:  # zlib.error, RuntimeError (encrypted), EOFError, ...
            raise ArchiveError(f"the model definition zip cannot be read: {exc}") from exc
        if broken is not None:
            raise ArchiveError(f"the model definition zip is corrupt: bad CRC in {broken!r}")
        names = [i.filename for i in infos if not i.is_dir()]
    if not names:
        raise ArchiveError("the model definition zip holds no files")
    return names


def zip_tree(folder: Path, target: Path) -> None:
    """Write a zip of a folder to `target` (results downloads); empty if there is no folder."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        # The folder was written by untrusted code: no link is followed out of it.
        for relative in regular_files(folder):
            try:
                with open_regular(folder, relative) as data, archive.open(relative, "w") as out:
                    shutil.copyfileobj(data, out, 2**20)
            except UnsafePath:
                continue
