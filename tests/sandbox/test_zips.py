"""Zips between the platform and its learners: unpacked over a folder only when every member is
safe, never through a link, and made from a folder without following one."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from loom.sandbox import zips


def archive(path: Path, *members: tuple[str | zipfile.ZipInfo, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in members:
            out.writestr(name, data)
    return path


def contents(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def link(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.filterwarnings("ignore:Duplicate name")  # zipfile's, as it writes the twin
@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ((("ok", b"x"), ("../x", b"x")), "escapes"),
        ((("ok", b"x"), (link("l"), b"/etc/passwd")), "symbolic link"),
        ((("a//b", b"x"),), "not a relative path"),
        ((("a\\b", b"x"),), "backslash"),
        ((("a", b"x"), ("a", b"y")), "appears twice"),
        ((("a", b"x"), ("a/b", b"y")), "inside a file"),
        ((("big", b"\0" * 5000),), "more than the limit"),
    ],
)
def test_a_refused_archive_changes_nothing(
    tmp_path: Path, members: tuple[tuple[str | zipfile.ZipInfo, bytes], ...], reason: str
) -> None:
    """Whatever the member at fault, the target is left as it was, and no staging is left."""
    target = tmp_path / "results"
    target.mkdir()
    (target / "ok").write_bytes(b"before")
    with pytest.raises(zips.ArchiveRefused, match=reason):
        zips.unpack_over(archive(tmp_path / "in.zip", *members), target, max_bytes=4096)
    assert contents(target) == {"ok": b"before"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.zip", "results"]


def test_corrupt_data_is_refused_too(tmp_path: Path) -> None:
    """A member whose bytes do not match its CRC is found while unpacking, before any move."""
    source = archive(tmp_path / "in.zip", ("a", b"a" * 100), ("b", b"b" * 100))
    data = bytearray(source.read_bytes())
    data[data.index(b"PK\x03\x04", 10) - 5] ^= 0xFF  # inside the first member's data
    source.write_bytes(bytes(data))
    target = tmp_path / "out"
    with pytest.raises(zips.ArchiveRefused, match="cannot be read"):
        zips.unpack_over(source, target, max_bytes=4096)
    assert contents(target) == {}


def test_unpacking_merges_and_replaces_links_without_following_them(tmp_path: Path) -> None:
    """Files of the same name are replaced (a planted link too, its target intact), others kept,
    a file stands where a folder was; the deletions list removes files and is not written."""
    secret = tmp_path / "secret"
    secret.write_text("admin-token")
    target = tmp_path / "checkpoints"
    (target / "model").mkdir(parents=True)
    (target / "model" / "w.pt").symlink_to(secret)
    (target / "old.pt").write_text("old")
    (target / "kept.pt").write_text("kept")
    (target / "was-a-folder").mkdir()
    (target / "was-a-folder" / "x").write_text("x")
    source = archive(
        tmp_path / "in.zip",
        ("model/w.pt", b"new weights"),
        ("was-a-folder", b"a file now"),
        (zips.DELETIONS, json.dumps(["old.pt", "never-there.pt"]).encode()),
    )
    done = zips.unpack_over(source, target, max_bytes=4096, deletions=zips.DELETIONS)
    assert (done.files, done.bytes, done.deleted) == (2, 21, ["old.pt", "never-there.pt"])
    assert secret.read_text() == "admin-token"
    assert contents(target) == {
        "model/w.pt": b"new weights",
        "kept.pt": b"kept",
        "was-a-folder": b"a file now",
    }


def test_a_folder_may_not_grow_past_its_limit(tmp_path: Path) -> None:
    """What the folder would hold after the upload counts, replaced files once."""
    target = tmp_path / "results"
    target.mkdir()
    (target / "a").write_bytes(b"x" * 3000)
    ok = archive(tmp_path / "ok.zip", ("a", b"y" * 3000))
    zips.unpack_over(ok, target, max_bytes=4096, max_folder_bytes=4096)
    more = archive(tmp_path / "more.zip", ("b", b"z" * 2000))
    with pytest.raises(zips.ArchiveRefused, match="the folder would hold"):
        zips.unpack_over(more, target, max_bytes=4096, max_folder_bytes=4096)


def test_zipping_leaves_links_out_and_says_what_it_read(tmp_path: Path) -> None:
    """Only plain files are written, each with the `fstat` of what was read."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "a.txt").write_text("abc")
    (folder / "link").symlink_to("/etc/passwd")
    target = tmp_path / "out.zip"
    written = zips.zip_files(folder, ["a.txt", "link", "gone"], target, extra={"x.json": b"[]"})
    assert list(written) == ["a.txt"] and written["a.txt"].st_size == 3
    assert sorted(zipfile.ZipFile(target).namelist()) == ["a.txt", "x.json"]
