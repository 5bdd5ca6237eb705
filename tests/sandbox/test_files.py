"""Reading and writing in a folder that untrusted code owns, without following its links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loom.sandbox import files


def planted(tmp_path: Path) -> tuple[Path, Path]:
    results, secret = tmp_path / "results", tmp_path / "token"
    (results / "model").mkdir(parents=True)
    secret.write_text("admin-token")
    (results / "model" / "model.onnx").symlink_to(secret)
    (results / "model" / "real.onnx").write_bytes(b"onnx")
    os.link(results / "model" / "real.onnx", results / "twin.onnx")
    (results / "sub").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(results / "pipe")
    (results / "log.txt").write_text("ok")
    return results, secret


def test_only_plain_single_link_files_are_listed(tmp_path: Path) -> None:
    """Links, hard-linked files, FIFOs and linked folders are left out of a listing."""
    results, _secret = planted(tmp_path)
    assert files.regular_files(results) == ["log.txt"]
    assert files.regular_files(results / "sub") == []  # a linked folder is not walked


def test_links_are_refused_when_opened(tmp_path: Path) -> None:
    """Opening a link (last part or on the way) raises, and so does a hard-linked file."""
    results, _secret = planted(tmp_path)
    for name in ("model/model.onnx", "sub/token", "model/real.onnx", "../token"):
        with pytest.raises(files.UnsafePath):
            files.open_regular(results, name)
    with files.open_regular(results, "log.txt") as handle:
        assert handle.read() == b"ok"
    with pytest.raises(OSError):
        files.open_nofollow(results / "model" / "model.onnx")


def test_a_planted_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    """Writing a file where the learner left a link replaces the link; its target is intact,
    and copying a tree copies plain files only."""
    results, secret = planted(tmp_path)
    (results / "learner-1").mkdir()
    (results / "learner-1" / "training-log.txt").symlink_to(secret)
    files.write_file(results, "learner-1/training-log.txt", b"lines\n")
    assert secret.read_text() == "admin-token"
    assert (results / "learner-1" / "training-log.txt").read_bytes() == b"lines\n"
    copied = tmp_path / "copy"
    assert files.copy_tree(results, copied) == 2
    assert sorted(p.name for p in copied.rglob("*") if p.is_file()) == [
        "log.txt",
        "training-log.txt",
    ]
