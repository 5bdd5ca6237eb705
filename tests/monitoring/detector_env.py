"""The detectors' environment for tests: a virtual environment with Alibi Detect (never in
Loom's own), made once under `.venvs/monitoring` and kept; Loom's source folder is put on its
path by a `.pth` line, so that `python -m loom.serving.detector` runs there."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import loom

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venvs" / "monitoring"
PACKAGES = ["alibi-detect==0.13.0", "torch==2.13.0"]


def detector_python() -> str:
    """The environment's interpreter, made the first time (a few minutes), then reused."""
    python = VENV / "bin" / "python"
    done = VENV / ".loom-ready"
    VENV.parent.mkdir(exist_ok=True)
    with (VENV.parent / "monitoring.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            uv = str(Path(sys.executable).parent / "uv")
            subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(VENV)], check=True)
            subprocess.run(
                [uv, "pip", "install", "-q", "--python", str(python), "--index-strategy",
                 "unsafe-best-match", *_sources(), *PACKAGES],
                check=True,
            )  # fmt: skip
            site = next((VENV / "lib").glob("python3*/site-packages"))
            (site / "zz_loom_source.pth").write_text(str(Path(loom.__file__).parents[1]) + "\n")
            done.touch()
    return str(python)


def _sources() -> list[str]:
    """Where this machine's pip finds packages (a mirror, wheels on disk), as uv options."""
    from tests.conftest import package_sources

    found = package_sources()
    options = []
    for url in filter(None, found.get("LOOM_ENVIRONMENTS_EXTRA_INDEX_URLS", "").split(",")):
        options += ["--extra-index-url", url]
    for place in filter(None, found.get("LOOM_ENVIRONMENTS_FIND_LINKS", "").split(",")):
        options += ["--find-links", place]
    return options
