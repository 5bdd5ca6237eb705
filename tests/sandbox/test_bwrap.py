"""The sandbox's command line: what a view shows, and the rights it drops."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from loom.sandbox import bwrap, uid_for


def pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_a_view_shows_only_what_it_is_given_and_drops_every_right() -> None:
    """Writable and read-only folders are bound where they are; a folder under /usr is not
    bound twice; the command runs as the uid with no groups, capabilities or new privileges."""
    view = bwrap.View(
        uid=1500000001,
        read_only=["/srv/data", "/usr/local/cuda"],
        writable=["/srv/jobs/j/results"],
        cwd="/srv/jobs/j/results",
    )
    argv = bwrap.command(view, ["python", "train.py"])
    assert ("/srv/data", "/srv/data") in pairs(argv, "--ro-bind")
    assert ("/srv/jobs/j/results", "/srv/jobs/j/results") in pairs(argv, "--bind")
    assert all(dest != "/usr/local/cuda" for _src, dest in pairs(argv, "--ro-bind"))
    assert {"--unshare-pid", "--unshare-ipc", "--die-with-parent"} <= set(argv)
    tmpfs = [argv[i + 1] for i, a in enumerate(argv) if a == "--tmpfs"]
    assert tmpfs == ["/tmp", "/dev/shm"]  # private, and writable by the job's uid
    tail = argv[argv.index("--") + 1 :]
    assert tail[1:6] == [
        "--reuid=1500000001",
        "--regid=1500000001",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
    ]
    assert tail[-2:] == ["python", "train.py"]


def test_gpus_are_shown_only_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU job's view has no GPU device; a GPU job's has its own GPUs and the driver's shared
    nodes, never another GPU (every node is taken to exist here)."""
    monkeypatch.setattr(bwrap.os.path, "exists", lambda _path: True)
    assert bwrap.gpu_devices([]) == []
    found = bwrap.gpu_devices([3])
    gpus = [n for n in found if re.fullmatch(r"/dev/nvidia\d+", n)]
    assert gpus == ["/dev/nvidia3"]
    assert {"/dev/nvidiactl", "/dev/nvidia-uvm"} <= set(found)


def test_uids_are_stable_per_job_and_in_their_range() -> None:
    """A job keeps its uid across attempts; jobs get different ones inside the range."""
    base = 1_500_000_000
    assert uid_for("training-a", base) == uid_for("training-a", base)
    assert uid_for("training-a", base) != uid_for("training-b", base)
    assert base <= uid_for("training-a", base) < base + 2**24


def test_single_files_are_copied_in_from_descriptors(tmp_path: Path) -> None:
    """With `copied`, a view's single files (its own passwd, the host's /etc files) come from
    descriptors opened read-only, shown 0644; folders and links are still bound read-only."""
    passwd = tmp_path / "sandbox-passwd"
    passwd.write_text("root:x:0:0::/:/bin/false\n")
    shims = tmp_path / "bin"
    shims.mkdir()
    view = bwrap.View(uid=1500000001, files={"/etc/passwd": str(passwd), "/opt/b": str(shims)})
    copied: list[int] = []
    try:
        argv = bwrap.command(view, ["true"], copied=copied)
        by_target = {dest: int(fd) for fd, dest in pairs(argv, "--file")}
        assert set(by_target.values()) == set(copied)
        assert os.read(by_target["/etc/passwd"], 100) == passwd.read_bytes()
        at = argv.index("--file")
        assert argv[at - 2 : at] == ["--perms", "0644"]
        bound = pairs(argv, "--ro-bind")
        assert (str(shims), "/opt/b") in bound
        assert all(Path(src).is_dir() or Path(src).is_symlink() for src, _dest in bound)
        assert "--file" not in bwrap.command(view, ["true"])  # without `copied`: all bound
    finally:
        for fd in copied:
            os.close(fd)
