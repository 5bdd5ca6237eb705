"""Zipping a code folder for submission, as `loom train DIR` does."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

SKIP = frozenset({"__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def zip_folder(folder: Path) -> bytes:
    """A zip of a folder's files with paths relative to it; caches and VCS folders left out."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIP)
            for name in sorted(files):
                path = Path(root) / name
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
