"""What an environment need not hold: the distributions the platform already has, at the very
same version. An environment's packages come before the platform's on its path (a `.pth` line,
`builder._layer`), so a copy of numpy or pandas that the installer put in the environment only
because a package asked for it shadows the platform's identical one. Removed, the same files
are found one step further along the path: the job imports what it would have imported, and
the build compiles, and the disk keeps, half as much (the evaluation toolkits' environment:
3,435 of its 6,282 modules were such copies).

A distribution is the same when its name (canonical) and its version string are: a local tag
(`2.13.0+cpu`) makes another one. What was removed is noted in the environment's marker (the
platform's `.dist-info` folders it now relies on); `still_shared` checks they are still there,
so an environment over a platform whose packages changed is built again, not run half-broken.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from pathlib import Path

from packaging.utils import canonicalize_name

DIST_INFO = ".dist-info"


def _key(folder_name: str) -> tuple[str, str] | None:
    """(canonical name, version) of a `<name>-<version>.dist-info` folder."""
    stem = folder_name.removesuffix(DIST_INFO)
    name, dash, version = stem.rpartition("-")
    return (canonicalize_name(name), version) if dash and name and version else None


def provided(base_paths: Iterable[str]) -> dict[tuple[str, str], str]:
    """The platform's distributions, (name, version) → their `.dist-info` folder."""
    found: dict[tuple[str, str], str] = {}
    for base in base_paths:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            key = _key(name) if name.endswith(DIST_INFO) else None
            if key is not None:
                found.setdefault(key, os.path.join(base, name))
    return found


def _files(site_packages: Path, dist_info: Path) -> set[Path]:
    """The files a distribution installed inside `site_packages` (its RECORD)."""
    try:
        with (dist_info / "RECORD").open(newline="") as record:
            rows = [row[0] for row in csv.reader(record) if row]
    except OSError:
        return set()
    inside = set()
    for row in rows:
        path = Path(os.path.normpath(site_packages / row))
        if path.is_relative_to(site_packages) and path != site_packages:
            inside.add(path)
    return inside


def drop_copies(site_packages: Path, base_paths: Iterable[str]) -> list[str]:
    """Remove from the environment each distribution the platform has at the same version;
    the platform's `.dist-info` folders now relied on, sorted. A file another (kept)
    distribution also lists stays (a namespace package's `__init__.py`, say)."""
    platform = provided(base_paths)
    copies: list[tuple[Path, str]] = []
    kept: list[Path] = []
    for dist_info in sorted(site_packages.glob(f"*{DIST_INFO}")):
        key = _key(dist_info.name)
        if key is not None and key in platform:
            copies.append((dist_info, platform[key]))
        else:
            kept.append(dist_info)
    if not copies:
        return []
    keep = set().union(*(_files(site_packages, d) for d in kept)) if kept else set()
    folders: set[Path] = set()
    for dist_info, _ in copies:
        for path in _files(site_packages, dist_info) - keep:
            folders.update(p for p in path.parents if p.is_relative_to(site_packages))
            try:
                path.unlink()
            except (FileNotFoundError, IsADirectoryError):
                continue
        _remove_if_empty(dist_info)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if folder != site_packages:
            _remove_if_empty(folder)
    return sorted(shared for _, shared in copies)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty, or gone
        return


def still_shared(relied_on: object) -> bool:
    """Whether the platform still has every distribution the environment relies on."""
    if not isinstance(relied_on, list):
        return relied_on is None  # built before environments shared anything
    return all(isinstance(path, str) and os.path.isdir(path) for path in relied_on)
