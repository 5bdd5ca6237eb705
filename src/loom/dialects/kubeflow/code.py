"""The code sent with an object: the names it holds (what an image's paths may stand for), and
the same zip with files added (a ConfigMap's, mounted as a volume)."""

from __future__ import annotations

import io
import zipfile

from loom.domain.errors import ArchiveError


def empty() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w"):
        pass
    return out.getvalue()


def names(code: bytes | None) -> frozenset[str]:
    """Every file's and folder's name in the zip (folders with a trailing `/`)."""
    if not code:
        return frozenset()
    try:
        with zipfile.ZipFile(io.BytesIO(code)) as archive:
            found = set()
            for name in archive.namelist():
                found.add(name)
                parts = name.rstrip("/").split("/")
                found.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
            return frozenset(found)
    except zipfile.BadZipFile as exc:
        raise ArchiveError(f"the code is not a zip file: {exc}") from None


def with_files(code: bytes | None, files: dict[str, str]) -> bytes:
    """The zip with `files` (path → text) added; the code as it is when there are none."""
    base = code or empty()
    if not files:
        return base
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename not in files:
                target.writestr(info, source.read(info))
        for path, text in sorted(files.items()):
            target.writestr(path, text)
    return out.getvalue()
