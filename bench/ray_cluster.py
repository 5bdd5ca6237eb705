"""A Ray cluster on this machine, for the benchmarks' Ray rows: a head, and a worker node or not.

Started as the tests start theirs (tests/launchers/ray_cluster.py): each node has its own Ray temp
folder and its own scratch root for Loom's learners (`LOOM_NODE_SCRATCH_DIR`), so nothing passes
between them through a shared folder. It runs the `ray` of the venv it is given: this one's for
Loom on Ray, so that Loom's node code (`loom.launchers.ray_node`) imports on its nodes.

`stop` ends this cluster's processes only: `ray stop` would end every Ray process on the machine,
a test's cluster included.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from peers import free_port

QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


class RayCluster:
    """`nodes` nodes of `cpus` each; the head serves Ray's dashboard, and so Ray Jobs."""

    def __init__(self, cpus: int, nodes: int = 2, python: str = sys.executable) -> None:
        self.cpus = cpus
        self.nodes = nodes
        self.python = python
        self.env = {**os.environ, **QUIET}
        self._fresh()

    def _fresh(self) -> None:
        # Ray's sockets live in its temp folder, and a socket's path is at most 107 bytes.
        self.temp = Path(tempfile.mkdtemp(prefix="lbray-"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.dashboard = f"http://127.0.0.1:{free_port()}"

    def _start(self, node: str, *args: str) -> None:
        env = {**self.env, "LOOM_NODE_SCRATCH_DIR": str(self.temp / f"scratch-{node}")}
        ray = str(Path(self.python).parent / "ray")
        command = [ray, "start", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}",
                   "--object-store-memory=80000000", f"--temp-dir={self.temp / node}",
                   "--disable-usage-stats", *args]  # fmt: skip
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"ray start ({node}) failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> RayCluster:
        """Started once more from scratch if a node fails to: on a busy machine a raylet can
        miss Ray's fixed 30 s to register."""
        try:
            return self._start_nodes()
        except RuntimeError as exc:
            print(f"{exc}\nstarting the Ray cluster again", file=sys.stderr, flush=True)
            self.stop()
            self._fresh()
        try:
            return self._start_nodes()
        except RuntimeError as exc:
            self.stop()
            raise SystemExit(str(exc)) from None

    def _start_nodes(self) -> RayCluster:
        # Ports of its own, where Ray's defaults would be shared with another cluster here.
        self._start("head", "--head", f"--port={self.port}", "--include-dashboard=true",
                    f"--dashboard-port={self.dashboard.rsplit(':', 1)[1]}",
                    f"--dashboard-agent-listen-port={free_port()}",
                    f"--ray-client-server-port={free_port()}")  # fmt: skip
        for n in range(1, self.nodes):
            self._start(f"worker{n}", f"--address={self.address}")
        self._wait_nodes()
        return self

    def _wait_nodes(self, timeout: float = 60) -> None:
        script = (
            f"import ray; ray.init(address={self.address!r}, log_to_driver=False);"
            "print('alive', sum(1 for n in ray.nodes() if n['Alive']))"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run([self.python, "-c", script], env=self.env,
                                 capture_output=True, text=True, check=False)  # fmt: skip
            if f"alive {self.nodes}" in out.stdout.splitlines():
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Ray cluster never had {self.nodes} live nodes")

    def processes(self) -> set[int]:
        """This cluster's processes: those naming its temp folder or its port, and their
        children (Ray's workers, agents and the learners' wrappers)."""
        marks = (str(self.temp).encode(), f":{self.port}".encode())
        table: dict[int, tuple[bytes, int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    table[int(entry.name)] = ((entry / "cmdline").read_bytes(), int(stat[1]))
                except (OSError, IndexError):
                    continue  # gone meanwhile
        ours = {pid for pid, (command, _) in table.items() if any(m in command for m in marks)}
        while more := {pid for pid, (_, parent) in table.items() if parent in ours} - ours:
            ours |= more
        return ours - {os.getpid()}

    def stop(self) -> None:
        for _ in range(3):  # a worker Ray was starting may appear once its parent is gone
            for pid in self.processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
