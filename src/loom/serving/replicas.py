"""A deployment's replicas: model servers (`python -m loom.serving`), each a process of its own
listening on a unix socket in the deployment's `run/` folder (mode 0700: only the gateway's user
reaches it; no TCP port), with the gateway's pool of keep-alive connections to it.

Socket paths are relative to the deployment's folder, the working directory of the gateway and
its replicas: an absolute one would pass the 108-byte limit of a socket's address under a deep
LOOM_HOME.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from loom.sandbox.cgroups import Cgroup
from loom.serving.confined import confine
from loom.serving.http1 import BadMessage, Message, MessageReader, encode_request
from loom.serving.spec import SOCKETS, DeploymentSpec

# A pooled connection to a replica: its writer, and its responses' reader (kept with it: a
# parser made per exchange cost 3.8 us of the gateway's hot path).
Connection = tuple[MessageReader, asyncio.StreamWriter]
# What a replica serves and how: model folder, version, batch size, batch wait, GPUs it takes
Generation = tuple[str, str, int, float, int]
MAX_RESPONSE = 512 * 2**20


class ReplicaGone(Exception):
    """The replica closed the connection or died before it answered."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def socket_path(replica_id: int) -> str:
    """Where a replica listens, relative to the deployment's folder."""
    return f"{SOCKETS}/replica-{replica_id}.sock"


def grpc_socket(replica_socket: str) -> str:
    """Where a replica serves gRPC beside its REST socket, for a proxy that speaks it."""
    return replica_socket.removesuffix(".sock") + ".grpc.sock"


def private_sockets(folder: Path) -> None:
    """FOLDER/run, only for this user, emptied of an earlier gateway's sockets; and FOLDER as
    the working directory, where the replicas' relative socket paths start."""
    os.chdir(folder)
    run = folder / SOCKETS
    run.mkdir(mode=0o700, exist_ok=True)
    run.chmod(0o700)
    for stale in run.glob("*.sock"):
        stale.unlink(missing_ok=True)


def replica_command(
    spec: DeploymentSpec, generation: Generation, uds: str, python: str | None = None
) -> list[str]:
    """The command line of one replica on this machine (in its environment's `python`, when
    its model needs one beyond the platform's)."""
    command = [python or sys.executable, "-m", "loom.serving", generation[0], "--uds", uds,
               *replica_options(spec, generation)]  # fmt: skip
    if spec.proxy and spec.grpc_port is not None:  # the proxy calls it over gRPC itself
        command += ["--grpc-uds", grpc_socket(uds)]
    return command


def replica_options(spec: DeploymentSpec, generation: Generation) -> list[str]:
    """What a replica serves and how, wherever it runs and listens: the only place it is said.
    A replica given GPUs runs its model on them (and fails if it cannot), else on the CPU."""
    model_dir, version, batch_size, batch_wait_ms, gpus = generation
    options = ["--name", spec.name, "--version", version, "--batch-size", str(batch_size),
               "--batch-wait-ms", str(batch_wait_ms), "--device", "cuda" if gpus else "cpu",
               "--behind-gateway"]  # fmt: skip
    if model_dir == spec.transformer_dir:
        return [*options, "--role", "transformer"]
    if spec.runtime:
        options += ["--runtime", spec.runtime]
    if spec.explainer:
        options += ["--explainer", spec.explainer]
    return options


def pin_gpus(available: list[int], taken: list[list[int]], count: int) -> list[int]:
    """The `count` GPUs of `available` that the fewest replicas are pinned to now (`taken`:
    each replica's), lowest numbers first on a tie: replicas spread over the GPUs, and share
    them once each has one. A `ValueError` when fewer than `count` are available."""
    if count > len(available):
        have = len(available)
        raise ValueError(f"a replica wants {count} GPU(s); this machine serves with {have}")
    load = dict.fromkeys(available, 0)
    for gpus in taken:
        for gpu in gpus:
            if gpu in load:
                load[gpu] += 1
    return sorted(sorted(available, key=lambda g: (load[g], g))[:count])


def tail(log: Path, count: int) -> str:
    """A replica log's last lines, on one line."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-count:])


def generation(spec: DeploymentSpec) -> Generation:
    """What a replica serves and how; a replica of another generation is replaced."""
    return (
        spec.model_dir,
        spec.model_version,
        spec.batch_size,
        spec.batch_wait_ms,
        spec.gpus_per_replica,
    )


def canary_generation(spec: DeploymentSpec) -> Generation | None:
    """What the canary's replicas serve, when the deployment has one."""
    if not spec.canary_model_dir:
        return None
    return (
        spec.canary_model_dir,
        spec.canary_version,
        spec.batch_size,
        spec.batch_wait_ms,
        spec.gpus_per_replica,
    )


@dataclass(eq=False)
class Replica:
    id: int
    socket: str  # relative to the deployment's folder (the working directory)
    generation: Generation
    log: Path
    process: asyncio.subprocess.Process | None = None
    state: str = "starting"  # starting → ready → draining → stopped
    inflight: int = 0
    started_at: float = field(default_factory=time.monotonic)
    ready_at: float | None = None
    idle: list[Connection] = field(default_factory=list)
    quiet: asyncio.Event = field(default_factory=asyncio.Event)
    group: Cgroup | None = None  # its cgroup, when confined
    gpus: list[int] = field(default_factory=list)  # the GPUs it was pinned to (on this machine)
    environment: Path | None = None  # the environment it runs in, beyond the platform's Python

    @property
    def version(self) -> str:
        return self.generation[1]

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    async def spawn(self, spec: DeploymentSpec, folder: Path) -> None:
        """Start the replica, in its sandbox when the spec asks for one."""
        env = self.environment
        python = str(env / "bin" / "python") if env is not None else None
        command = replica_command(spec, self.generation, self.socket, python)
        name = f"serve-{folder.name}-r{self.id}"
        model_dir = Path(self.generation[0])
        start = confine(spec.sandbox, folder, name, command, model_dir, self.gpus, env)
        self.group = start.group
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(
                *start.command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                cwd=folder,
                env=start.env,
                start_new_session=True,
                preexec_fn=start.before_exec,
            )

    async def wait_ready(self, timeout_s: float) -> bool:
        """Poll the replica's readiness until it answers ready, exits, or the time is up."""
        deadline = time.monotonic() + timeout_s
        probe = Message([b"GET", b"/v2/health/ready"], [(b"host", b"replica")])
        while time.monotonic() < deadline:
            if self.process is None or self.process.returncode is not None:
                return False
            with contextlib.suppress(ReplicaGone):
                response = await self.exchange(probe, count=False)
                if response.status == 200 and b'"ready":true' in response.body.replace(b" ", b""):
                    return True
            await asyncio.sleep(0.05)
        return False

    async def exchange(self, request: Message, *, count: bool = True) -> Message:
        """Send one request and read its response, on a pooled connection when there is one
        (a stale one is replaced once); ReplicaGone when the replica cannot answer."""
        if count:
            self.inflight += 1
        try:
            for attempt in range(2):
                reused = bool(self.idle)
                conn = self.idle.pop() if reused else await self._connect()
                try:
                    response = await self._send(conn, request)
                except ReplicaGone:
                    _close(conn)
                    if reused and attempt == 0:
                        continue
                    raise
                if response.keep_alive:
                    self.idle.append(conn)
                else:
                    _close(conn)
                return response
            raise ReplicaGone("no connection")  # pragma: no cover - the loop returns or raises
        finally:
            if count:
                self.inflight -= 1
                if self.inflight == 0:
                    self.quiet.set()

    async def _connect(self) -> Connection:
        try:
            reader, writer = await asyncio.open_unix_connection(self.socket, limit=2**20)
            return MessageReader(reader, max_body=MAX_RESPONSE), writer
        except OSError as exc:
            raise ReplicaGone(_why(exc)) from exc

    @staticmethod
    async def _send(conn: Connection, request: Message) -> Message:
        responses, writer = conn
        try:
            writer.write(encode_request(request))
            await writer.drain()
            response = await responses.next()
        except OSError as exc:
            raise ReplicaGone(_why(exc)) from exc
        except (asyncio.IncompleteReadError, BadMessage) as exc:
            raise ReplicaGone(str(exc)) from exc
        if response is None:
            raise ReplicaGone("the replica closed the connection")
        return response

    async def drain(self, timeout_s: float) -> None:
        """Take no new requests, let those in flight finish, then stop the process."""
        self.state = "draining"
        if self.inflight:
            self.quiet.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.quiet.wait(), timeout_s)
        await self.stop()

    async def stop(self, grace_s: float = 5.0) -> None:
        self.state = "stopped"
        for conn in self.idle:
            _close(conn)
        self.idle.clear()
        with contextlib.suppress(OSError):
            os.unlink(self.socket)
        process = self.process
        if process is not None and process.returncode is None:
            await terminate(process, grace_s)
        if self.group is not None:  # whatever the replica left running, and its cgroup
            await asyncio.to_thread(self.group.remove)

    async def last_lines(self, count: int = 5) -> str:
        return tail(self.log, count)


async def terminate(
    process: asyncio.subprocess.Process, grace_s: float, sig: int = signal.SIGTERM
) -> None:
    """Ask the process to stop with `sig`; after `grace_s`, kill it."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(sig)
    try:
        await asyncio.wait_for(process.wait(), grace_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def _why(exc: OSError) -> str:
    """What went wrong, without the path an OSError may carry."""
    return exc.strerror or type(exc).__name__


def _close(conn: Connection) -> None:
    with contextlib.suppress(Exception):
        conn[1].close()
