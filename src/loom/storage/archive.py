"""Model definition archives: checked before they are stored, unpacked safely, made from folders."""

from __future__ import annotations

import io
import zipfile

from loom.domain.errors import ArchiveError, PayloadTooLarge
from loom.sandbox.zips import unsafe_reason, zip_tree

__all__ = ["check_zip", "zip_tree"]


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
            reason = unsafe_reason(info.filename, info.external_attr >> 16)
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
