"""A deployment's replicas on a Ray cluster (the platform's launcher is `ray`).

Each replica is an actor (owned by the gateway: it ends with it) holding one CPU on a node Ray
chose, spread over the nodes. It starts the usual model server there, confined by the node's
sandbox, on a TCP port of that node, with the model's files sent by the gateway through Ray (no
shared disk). The gateway reaches it across nodes with a per-deployment secret header the
server requires, so no one else on the cluster's network can call it directly. A replica lost
with its node is seen as exited, and the gateway replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from loom.launchers.ray_node import node_address, node_scratch
from loom.serving.confined import confine
from loom.serving.http1 import Message
from loom.serving.replicas import (
    MAX_RESPONSE,
    Connection,
    Replica,
    ReplicaGone,
    _why,
    free_port,
    replica_options,
    tail,
)
from loom.serving.rest import TOKEN_ENV, TOKEN_HEADER
from loom.serving.spec import DeploymentSpec


def model_files(model_dir: str) -> dict[str, bytes]:
    """The model folder's plain files, to send to a node."""
    root = Path(model_dir)
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


class ReplicaHost:
    """On a node: one replica's model server (a Ray actor; its calls may overlap)."""

    def __init__(self, deployment: str, replica: int) -> None:
        self.folder = node_scratch() / "serving" / deployment / f"replica-{replica}"
        self.process: subprocess.Popen[bytes] | None = None
        self.group: Any = None  # its cgroup, when confined

    def start(
        self,
        files: dict[str, bytes],
        options: list[str],
        token: str,
        sandbox: dict[str, Any] | None,
    ) -> tuple[str, int, int]:
        """Write the model here and start its server; where it listens, and its pid."""
        shutil.rmtree(self.folder, ignore_errors=True)
        model = self.folder / "model"
        for name, data in files.items():
            target = model / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        host = node_address()
        port = free_port(host)
        command = [sys.executable, "-m", "loom.serving", str(model), "--host", host,
                   "--port", str(port), *options]  # fmt: skip
        name = f"serve-{self.folder.parent.name}-{self.folder.name}"
        # Reached over its node's network (its gateway is elsewhere), with a secret of its own:
        # a replica here keeps the node's network, where one beside its gateway has none.
        on_node = {**sandbox, "network": "host"} if sandbox else None
        start = confine(on_node, self.folder, name, command, model, _ray_gpus())
        self.group = start.group
        with (self.folder / "replica.log").open("ab") as out:
            self.process = subprocess.Popen(
                start.command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.folder, env={**start.env, TOKEN_ENV: token}, start_new_session=True,
                preexec_fn=start.before_exec,  # noqa: PLW1509 (joins the replica's cgroup)
            )  # fmt: skip
        return host, port, self.process.pid

    def wait(self) -> int:
        assert self.process is not None
        return self.process.wait()

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.process.pid, sig)

    def last_lines(self, count: int) -> str:
        return tail(self.folder / "replica.log", count)

    def clean(self) -> None:
        """The replica is over: whatever it left running, its cgroup and its folder go."""
        self.signal(signal.SIGKILL)
        if self.group is not None:
            with contextlib.suppress(Exception):
                self.group.remove()
        shutil.rmtree(self.folder, ignore_errors=True)


def _ray_gpus() -> list[int]:
    """The GPUs Ray gave this actor (none for a CPU replica)."""
    import ray

    return [int(g) for g in ray.get_gpu_ids()]


class RayProcess:
    """A replica's server on its node, as the gateway sees a local process."""

    def __init__(self, actor: Any, pid: int) -> None:
        self.actor = actor
        self.pid = pid
        self.returncode: int | None = None

    async def wait(self) -> int:
        """Its exit code; -9 when its actor (or its node) is gone."""
        import ray

        if self.returncode is None:
            try:
                self.returncode = int(await self.actor.wait.remote())
            except ray.exceptions.RayError:
                self.returncode = -9
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.actor.signal.remote(int(sig))

    def kill(self) -> None:
        self.actor.signal.remote(int(signal.SIGKILL))

    async def end(self) -> None:
        """Clean the replica's node, then end its actor (which frees its CPU)."""
        import ray

        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.actor.clean.remote(), 10.0)
        with contextlib.suppress(Exception):
            ray.kill(self.actor, no_restart=True)


class RayReplica(Replica):
    """A replica on a Ray node, reached over TCP with the deployment's secret header."""

    host: str = ""
    port: int = 0
    token: bytes = b""

    async def spawn(self, spec: DeploymentSpec, folder: Path) -> None:
        import ray

        options = replica_options(spec, self.generation)
        host = ray.remote(ReplicaHost).options(
            num_cpus=float((spec.sandbox or {}).get("cpus") or 1),
            num_gpus=self.generation[4],  # Ray picks the node's GPUs and pins the actor to them
            max_concurrency=8,  # `wait` holds one thread for the replica's life
            scheduling_strategy="SPREAD",
        )
        actor = host.remote(folder.name, self.id)
        self.token = secrets.token_urlsafe(32).encode()
        files = await asyncio.to_thread(model_files, self.generation[0])
        try:
            self.host, self.port, pid = await actor.start.remote(
                files, options, self.token.decode(), spec.sandbox
            )
        except ray.exceptions.RayError as exc:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            raise OSError(f"Ray could not start it: {type(exc).__name__}") from exc
        self.process = RayProcess(actor, pid)  # type: ignore[assignment]

    async def exchange(self, request: Message, *, count: bool = True) -> Message:
        headers = [(k, v) for k, v in request.headers if k != TOKEN_HEADER]
        signed = Message(request.start, [*headers, (TOKEN_HEADER, self.token)], request.body,
                         request.keep_alive)  # fmt: skip
        return await super().exchange(signed, count=count)

    async def _connect(self) -> Connection:
        from loom.serving.http1 import MessageReader

        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=2**20)
            return MessageReader(reader, max_body=MAX_RESPONSE), writer
        except OSError as exc:
            raise ReplicaGone(_why(exc)) from exc

    async def stop(self, grace_s: float = 5.0) -> None:
        await super().stop(grace_s)
        process = self.process
        if isinstance(process, RayProcess):
            await process.end()

    async def last_lines(self, count: int = 5) -> str:
        """From its node, without holding up the gateway's loop."""
        process = self.process
        if not isinstance(process, RayProcess):
            return ""
        try:
            return str(await asyncio.wait_for(process.actor.last_lines.remote(count), 5.0))
        except Exception:  # its node (or its actor) is gone
            return "(its node is gone)"


def connect(address: str, namespace: str) -> None:
    """The gateway joins the cluster (as a driver); its replicas' actors end with it."""
    import logging

    import ray

    ray.init(address=address, namespace=namespace, log_to_driver=False,
             logging_level=logging.WARNING, configure_logging=False)  # fmt: skip
