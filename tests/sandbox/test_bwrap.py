"""The sandbox's command line: what a view shows, and the rights it drops."""

from __future__ import annotations

import re

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
