"""The platform's home made private: folders 0700, files without group or other bits."""

from __future__ import annotations

import stat
from pathlib import Path

from loom.store.private import create_private, tighten, write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_tighten_closes_the_home_and_its_top_level_and_leaves_links(tmp_path: Path) -> None:
    """The home and what lies directly in it lose group and other bits; a link's target stays,
    and what lies deeper keeps its mode (it may be shown to a running learner's uid, and
    nobody else gets past the 0700 home)."""
    home, outside = tmp_path / "home", tmp_path / "outside.txt"
    (home / "jobs" / "j").mkdir(parents=True)
    (home / "jobs" / "j" / "hostfile").write_text("")
    (home / "notes.txt").write_text("")
    outside.write_text("")
    (home / "link").symlink_to(outside)
    for path, wanted in ((home, 0o777), (home / "jobs", 0o755), (home / "notes.txt", 0o664),
                         (home / "jobs" / "j" / "hostfile", 0o644), (outside, 0o644)):  # fmt: skip
        path.chmod(wanted)
    tighten(home)
    assert (mode(home), mode(home / "jobs"), mode(home / "notes.txt")) == (0o700, 0o700, 0o600)
    assert mode(home / "jobs" / "j" / "hostfile") == 0o644
    assert mode(outside) == 0o644


def test_private_files_are_0600_and_replaced_whole(tmp_path: Path) -> None:
    """A private write replaces the file in one step with mode 0600; a new database is 0600."""
    target = tmp_path / "secret.key"
    target.write_text("old")
    target.chmod(0o644)
    write_private(target, b"new")
    assert (target.read_bytes(), mode(target)) == (b"new", 0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["secret.key"]
    create_private(tmp_path / "db" / "loom.db")
    assert mode(tmp_path / "db" / "loom.db") == 0o600
