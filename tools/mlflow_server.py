"""The real MLflow tracking server (its own venv, `tools.foreign`) on loopback, for the MLflow
dialect's differential tests and benchmarks: SQLite or PostgreSQL behind it, artifacts served
through its proxy, one worker.

    with MlflowServer(tmp_path) as mlflow:
        mlflow.url   # http://127.0.0.1:PORT
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from tools.foreign import python

# MLflow's own switches, so that nothing tries to reach the network.
QUIET = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    # its job runner (huey consumers, ~70 s of CPU a test run): for MLflow's own GenAI jobs,
    # which neither the differential test nor the benchmark calls
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MlflowServer:
    def __init__(self, home: Path, backend: str | None = None) -> None:
        self.home = home
        self.backend = backend or f"sqlite:///{home / 'mlflow.db'}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home / "mlflow-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180) -> MlflowServer:
        self.home.mkdir(parents=True, exist_ok=True)
        mlflow = python("mlflow-server").parent / "mlflow"
        command = [
            str(mlflow), "server", "--backend-store-uri", self.backend,
            "--artifacts-destination", str(self.home / "artifacts"),
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
        ]  # fmt: skip
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                env={**os.environ, **QUIET},
                cwd=self.home,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its workers go with it, by process group
            )
        self._wait(timeout)
        return self

    def _wait(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the MLflow server exited:\n{self.tail()}")
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.25)
        raise RuntimeError(f"the MLflow server did not answer in {timeout:.0f}s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
