"""Model definition archives: corrupt, empty, escaping or oversized ones are refused."""

from __future__ import annotations

import io
import stat
import zipfile

import pytest

from loom.domain.errors import ArchiveError, PayloadTooLarge
from loom.storage.archive import check_zip
from tests.conftest import make_zip

LIMIT = 10 * 2**20


def test_good_zip() -> None:
    """A plain zip of code is accepted and its files listed."""
    assert check_zip(make_zip({"a.py": "x", "pkg/b.py": "y"}), max_unpacked=LIMIT) == [
        "a.py",
        "pkg/b.py",
    ]


@pytest.mark.parametrize("name", ["../evil.py", "a/../../evil.py", "/etc/passwd", "C:/x.py"])
def test_escaping_paths(name: str) -> None:
    """Entries that would land outside the model folder are refused with C102."""
    with pytest.raises(ArchiveError) as caught:
        check_zip(make_zip({name: "x"}), max_unpacked=LIMIT)
    assert caught.value.code is not None and caught.value.code.value == "C102"
    assert name in caught.value.message


def test_symlink() -> None:
    """A symbolic link in the archive is refused."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/etc/passwd")
    with pytest.raises(ArchiveError):
        check_zip(buffer.getvalue(), max_unpacked=LIMIT)


@pytest.mark.parametrize(
    "data",
    [b"", b"not a zip at all", make_zip({"a": "b"})[:-30]],
    ids=["empty", "not-a-zip", "truncated"],  # stable names: the zip holds the time it was made
)
def test_corrupt(data: bytes) -> None:
    """Empty, non-zip and truncated uploads are C102."""
    with pytest.raises(ArchiveError):
        check_zip(data, max_unpacked=LIMIT)


def test_bad_crc() -> None:
    """A zip whose content does not match its checksum is refused."""
    data = bytearray(make_zip({"a.py": "print('hello world')" * 10}))
    data[40] ^= 0xFF
    with pytest.raises(ArchiveError):
        check_zip(bytes(data), max_unpacked=LIMIT)


def test_zip_bomb() -> None:
    """An archive that unpacks beyond the limit is refused as too large."""
    data = make_zip({"big.txt": "0" * (2 * 2**20)})
    with pytest.raises(PayloadTooLarge):
        check_zip(data, max_unpacked=2**20)
