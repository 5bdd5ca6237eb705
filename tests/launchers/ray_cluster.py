"""A real two-node Ray cluster on this machine, started and stopped by the tests.

Each node has its own Ray temp folder and its own scratch root for Loom's learners
(`LOOM_NODE_SCRATCH_DIR`), so nothing passes between them through a shared folder. The head
notices a lost node within about two seconds (Ray's health checks, shortened here).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.conftest import free_port, processes_with

RAY = str(Path(sys.executable).parent / "ray")
QUIET = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}


class RayCluster:
    def __init__(self, root: Path, cpus: int = 2) -> None:
        self.root = root
        # Ray's sockets live in its temp folder, and a socket's path is at most 107 bytes.
        self.temp = Path(tempfile.mkdtemp(prefix="lray-"))
        self.cpus = cpus
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.client_address = f"ray://127.0.0.1:{free_port()}"  # Ray Client's proxy
        # Token authentication, as a multi-user platform needs it: the nodes, the platform and
        # its gateways hold the token; a learner's allow-listed environment does not.
        self.env = {**QUIET, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}

    def scratch(self, node: str) -> Path:
        return self.root / f"scratch-{node}"

    def _start(self, node: str, *args: str) -> None:
        env = {**os.environ, **self.env, "LOOM_NODE_SCRATCH_DIR": str(self.scratch(node))}
        temp = self.temp / node
        command = [
            RAY,
            "start",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={self.cpus}",
            "--num-gpus=1",  # declared, not real: what Ray hands out is what is tested
            "--object-store-memory=80000000",
            f"--temp-dir={temp}",
            "--disable-usage-stats",
            *args,
        ]
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"ray start ({node}) failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> RayCluster:
        os.environ.update(self.env)  # the platform's driver, started by the tests, reads them
        client_port = self.client_address.rsplit(":", 1)[1]
        self._start(
            "head",
            "--head",
            f"--port={self.port}",
            f"--ray-client-server-port={client_port}",
            "--include-dashboard=false",
        )
        self.start_worker()
        return self

    def start_worker(self) -> None:
        self._start("worker", f"--address={self.address}", '--resources={"worker": 1}')
        self.wait_nodes(2)

    def alive_nodes(self) -> int:
        said = self._ask(
            f"import ray; ray.init(address={self.address!r}, log_to_driver=False);"
            "print('alive', sum(1 for n in ray.nodes() if n['Alive']))",
            "alive",
        )
        return int(said[0]) if said else -1

    def named_actors(self, namespace: str = "loom") -> list[str]:
        """The live named actors of a namespace (the platform's: `loom`)."""
        said = self._ask(
            f"import ray; ray.init(address={self.address!r}, namespace={namespace!r}, "
            "log_to_driver=False); from ray.util import list_named_actors;"
            "print('named', *list_named_actors())",
            "named",
        )
        if said is None:
            raise RuntimeError("could not list the cluster's named actors")
        return said

    def kill_named(self, names: list[str], namespace: str = "loom") -> None:
        """End these named actors (those already gone are skipped)."""
        said = self._ask(
            f"import ray; ray.init(address={self.address!r}, namespace={namespace!r}, "
            "log_to_driver=False)\n"
            f"for name in {names!r}:\n"
            "    try:\n        ray.kill(ray.get_actor(name))\n"
            "    except ValueError:\n        pass\n"
            "print('killed')",
            "killed",
        )
        if said is None:
            raise RuntimeError(f"could not end the actors {names}")

    def _ask(self, script: str, tag: str) -> list[str] | None:
        """What a driver of the cluster printed after `tag` on its last such line (None if
        it failed or printed none)."""
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**os.environ, **self.env},
            timeout=60,
            check=False,
        )
        said = [line.split()[1:] for line in out.stdout.splitlines() if line.split()[:1] == [tag]]
        return said[-1] if out.returncode == 0 and said else None

    def wait_nodes(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_nodes() != count:
            assert time.monotonic() < deadline, f"the cluster never had {count} live nodes"
            time.sleep(0.5)

    def kill_worker(self) -> None:
        """The worker node is lost: its raylet killed, as a machine that went away."""
        raylets = [
            pid
            for pid in processes_with(str(self.temp / "worker").encode())
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/raylet")
        ]
        assert raylets, "no raylet of the worker node"
        for pid in raylets:
            os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """This cluster's processes, and theirs, killed: not `ray stop`, which would stop every
        Ray cluster on the machine (a benchmark's too). Nothing here relies on Ray's record of
        the machine's last cluster: every address is given."""
        ours = [
            *processes_with(str(self.temp).encode()),
            *processes_with(f"127.0.0.1:{self.port}".encode()),
        ]
        found: set[psutil.Process] = set()
        for pid in ours:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                found |= {process, *process.children(recursive=True)}
        for process in found:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(list(found), timeout=10)
        shutil.rmtree(self.temp, ignore_errors=True)
        for name in self.env:
            os.environ.pop(name, None)
