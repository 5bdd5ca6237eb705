"""Peer systems for the benchmarks, each in its own virtual environment under bench/.peers/."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

PEERS = Path(__file__).resolve().parent / ".peers"


def peer_python(name: str, packages: list[str]) -> Path:
    """The interpreter of a peer's own venv, created and filled on first use."""
    venv = PEERS / name
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = " ".join(packages)
    if stamp.exists() and stamp.read_text() == wanted:
        return python
    PEERS.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"installing {wanted} into {venv} (once) ...", file=sys.stderr, flush=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
        check=True,
    )
    stamp.write_text(wanted)
    return python


def free_port() -> int:
    """A port free on this machine now, for a server a benchmark starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table, as the benchmarks print it."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True))  # noqa: E731
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([title, line(header), rule, *(line(r) for r in rows)])
