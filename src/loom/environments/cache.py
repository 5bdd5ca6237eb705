"""Garbage collection of a machine's environments: by age first, then by size, least recently
used first, skipping any environment a learner holds (its lock, shared) or a builder builds."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from pathlib import Path

LAST_USED = "last-used"


def folder_bytes(folder: Path) -> int:
    """Bytes a folder takes, hard links to one file counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            try:
                stat = os.lstat(os.path.join(parent, name))
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


RECENT_S = 3600.0  # never removed for size: it may be about to be used


def prune(root: Path, max_bytes: int, max_age_s: float, marker: str) -> list[str]:
    """Remove what should go; the digests removed."""
    now = time.time()
    for leftover in root.glob(".removing-*"):  # a collector that died while removing
        shutil.rmtree(leftover, ignore_errors=True)
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            used = (folder / LAST_USED).stat().st_mtime
        except OSError:
            used = folder.stat().st_mtime
        found.append((used, folder, _size(folder / marker)))
    found.sort()  # least recently used first
    total = sum(size for _, _, size in found)
    removed = []
    for used, folder, size in found:
        if now - used <= max_age_s and (total <= max_bytes or now - used < RECENT_S):
            continue
        if _remove_unless_held(root, folder):
            removed.append(folder.name)
            total -= size
    return removed


def _size(marker: Path) -> int:
    try:
        return int(json.loads(marker.read_text()).get("bytes", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def _remove_unless_held(root: Path, folder: Path) -> bool:
    lock_path = root / f"{folder.name}.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    with os.fdopen(fd, "r+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # in use, or being built
        trash = root / f".removing-{folder.name}-{os.getpid()}"
        with contextlib.suppress(OSError):
            folder.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
            return True
    return False
