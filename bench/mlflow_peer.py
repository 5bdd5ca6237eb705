"""MLflow as a metrics peer: a local tracking server in its own venv, timed by mlflow_probe.py.

Imported by the benchmarks from Loom's venv (it never imports mlflow itself), or run alone:

    python bench/mlflow_peer.py
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import peer_python

VERSION = "3.17.2"  # 3.18.0 is on PyPI, but its mlflow-skinny 3.18.0 is not installable here
MLFLOW = [f"mlflow=={VERSION}"]
PROBE = Path(__file__).resolve().parent / "mlflow_probe.py"
# MLflow's own telemetry switches, so nothing tries to reach the network.
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(log: Path, lines: int = 20) -> str:
    """The last lines of the server's log, for an error message."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_health(url: str, server: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Wait until GET /health answers 200; fail clearly if the server exits or never answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the MLflow server exited ({server.returncode}):\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"the MLflow server did not answer /health in {timeout:.0f}s:\n{_tail(log)}")


def stop(server: subprocess.Popen[bytes]) -> None:
    """Stop the server and its uvicorn workers: SIGTERM to its process group, then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):  # whatever outlived the server's own exit
        os.killpg(server.pid, signal.SIGKILL)
    server.wait(timeout=10)


def measure_mlflow(points: int = 20_000, batch: int = 1000, runs: int = 5) -> dict[str, object]:
    """Points/s that an MLflow tracking server (SQLite, 1 worker) takes through log_batch: the
    median of `runs` runs after a warm-up run (mlflow_probe.py)."""
    python = peer_python("mlflow", MLFLOW)
    env = {**os.environ, **QUIET}
    home = Path(tempfile.mkdtemp(prefix="loom-bench-mlflow-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = home / "server.log"
    try:
        with log.open("wb") as out:
            server = subprocess.Popen(
                [str(python.parent / "mlflow"), "server",
                 "--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}",
                 "--default-artifact-root", str(home / "artifacts"),
                 "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                 "--disable-security-middleware"],
                env=env, cwd=home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            wait_health(url, server, log, timeout=120)
            result = subprocess.run(
                # -P: bench/ (where bench/mlflow.py is) stays off sys.path, `mlflow` is MLflow
                [str(python), "-P", str(PROBE), url, str(points), str(batch), str(runs)],
                env=env, capture_output=True, text=True, check=False, timeout=600,
            )  # fmt: skip
            lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
            if result.returncode != 0 or not lines:
                raise RuntimeError(
                    f"mlflow_probe.py failed ({result.returncode}):\n{result.stderr[-2000:]}"
                )
            measured: dict[str, object] = json.loads(lines[-1])
        finally:
            stop(server)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {"system": f"MLflow {VERSION}", **measured}


if __name__ == "__main__":
    print(json.dumps(measure_mlflow()))
