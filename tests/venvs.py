"""Foreign clients in virtual environments of their own (`.venvs/NAME` in the repository,
git-ignored): made once from the machine's pip configuration, then reused by every test run.
`make test` makes them beforehand (see the Makefile's `.venvs/%` targets)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tools import uvpip

VENVS = ROOT / ".venvs"
KFP = ("kfp==2.17.3",)


def foreign_python(name: str, requirements: tuple[str, ...]) -> Path:
    """The Python of `.venvs/NAME`, with `requirements` installed (made now if it is not)."""
    folder = VENVS / name
    python = folder / "bin" / "python"
    marker = folder / ".installed"
    wanted = "\n".join(requirements) + "\n"
    if marker.exists() and marker.read_text() == wanted:
        return python
    VENVS.mkdir(exist_ok=True)
    with (VENVS / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes make it once
        if marker.exists() and marker.read_text() == wanted:
            return python
        venv = [sys.executable, "-m", "venv", "--clear", "--without-pip", str(folder)]
        subprocess.run(venv, check=True)  # uv fills it from outside: no pip of its own
        uvpip.install(python, list(requirements))
        marker.write_text(wanted)
    return python


def kfp_python() -> Path:
    """The real KFP SDK (kfp 2.17.3): its compiler and its `kfp.Client`."""
    return foreign_python("kfp", KFP)
