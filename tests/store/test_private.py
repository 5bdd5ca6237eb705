"""The platform's home made private: folders 0700, files without group or other bits."""

from __future__ import annotations

import stat
from pathlib import Path

from loom.store.private import create_private, tighten, write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_tighten_makes_everything_below_private_and_leaves_links(tmp_path: Path) -> None:
    """Open folders and files below the home lose group and other bits; a link's target stays."""
    home, outside = tmp_path / "home", tmp_path / "outside.txt"
    (home / "jobs" / "j").mkdir(parents=True)
    (home / "jobs" / "j" / "run.sh").write_text("")
    outside.write_text("")
    (home / "link").symlink_to(outside)
    for path, wanted in ((home, 0o777), (home / "jobs", 0o755), (home / "jobs" / "j" / "run.sh",
                         0o775), (outside, 0o644)):  # fmt: skip
        path.chmod(wanted)
    tighten(home)
    assert (mode(home), mode(home / "jobs"), mode(home / "jobs" / "j")) == (0o700,) * 3
    assert mode(home / "jobs" / "j" / "run.sh") == 0o700  # still the owner's to run
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
