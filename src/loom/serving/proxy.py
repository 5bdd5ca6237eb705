"""HAProxy as a deployment's data path (what it does: `proxy_config`), run and steered by the
deployment's gateway, which stays the control plane: the proxy's process, its admin socket, the
replicas it balances over (added when ready, drained before they stop), the access rules it
checks (pushed when they change), and its log, one line a request, which keeps the gateway's
counters, latency histogram and keys' last use as they were when the gateway answered itself.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import csv
import ctypes
import fcntl
import io
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loom.serving.proxy_config import (
    CANARY,
    GATEWAY,
    GRPC,
    LOG_FORMAT,
    MAIN,
    PUBLIC,
    REST,
    SLOT,
    SLOTS,
    ProxyPlan,
    backend,
    flags,
    render,
    server_line,
    slot_link,
)
from loom.serving.replicas import canary_generation, grpc_socket, terminate
from loom.serving.spec import SOCKETS, DeploymentSpec

if TYPE_CHECKING:
    from loom.serving.gateway import Gateway
    from loom.serving.replicas import Replica

HAPROXY = "haproxy"
ADMIN = f"{SOCKETS}/proxy.sock"
CONFIG = f"{SOCKETS}/proxy.cfg"
ACCESS_MAP = f"{SOCKETS}/access.map"
FLAGS_MAP = f"{SOCKETS}/flags.map"
GATEWAY_SOCKET = f"{SOCKETS}/gateway.sock"
GATEWAY_GRPC_SOCKET = f"{SOCKETS}/gateway-grpc.sock"
START_S = 10.0
TRACKS = (MAIN, CANARY)
LOAD_EVERY = 5  # ticks between two looks at HAProxy's statistics
# the log pipe's size: a tick's lines at some 100,000 requests/s (HAProxy never waits on a full
# pipe: it drops the line and counts it in DroppedLogs)
PIPE_BYTES = 1 << 20
F_SETPIPE_SZ = 1031


FIELDS = LOG_FORMAT.count(" ") + 1
NONE = b"-"  # what HAProxy logs for a variable not set
WATCHED_READ_S = 0.02  # a watched deployment's log is read this often (its lines are larger)


class ProxyFailed(Exception):
    """HAProxy could not start or be steered; the gateway serves the endpoint itself."""


def unproxied(spec: DeploymentSpec) -> str | None:
    """Why this deployment keeps the gateway's own data path; None when the proxy can take it.
    A graph and a transformer are the gateway's own work; HTTPS and replicas on Ray are not
    wired through the proxy (yet). Monitoring is not a reason: the proxy logs the bodies."""
    if spec.proxy != HAPROXY:
        return "the platform runs deployments without a proxy"
    if shutil.which(HAPROXY) is None:
        return "haproxy is not installed"
    for why, present in (
        ("an inference graph", spec.graph),
        ("a transformer", spec.transformer_dir),
        ("HTTPS", spec.certfile),
        ("replicas on Ray", spec.ray_address),
    ):
        if present:
            return f"{why} is served by the gateway itself"
    return None


class Proxy:
    def __init__(self, gateway: Gateway, port: int, grpc_port: int | None) -> None:
        self.gateway = gateway
        self.plan = ProxyPlan(
            host=gateway.spec.host,
            port=port,
            grpc_port=grpc_port,
            admin_socket=ADMIN,
            access_map=ACCESS_MAP,
            flags_map=FLAGS_MAP,
            gateway_socket=GATEWAY_SOCKET,
            gateway_grpc_socket=GATEWAY_GRPC_SOCKET,
            queue_timeout_s=gateway.spec.queue_timeout_s,
            ready_timeout_s=gateway.spec.ready_timeout_s,
            sockets=SOCKETS,
        )
        self.process: asyncio.subprocess.Process | None = None
        # a replica's servers go by "backend/r<id>"; what HAProxy calls them (the same, or
        # a gRPC slot's "backend/s<k>") is in `physical` while they are in use or doomed
        self.servers: set[str] = set()  # "backend/r<id>" registered and in use
        self.doomed: set[str] = set()  # in maintenance, let go once their connections close
        self.physical: dict[str, str] = {}
        self.hashes: dict[str, str] = {}  # token hash → the index pushed for it
        self.whose: dict[str, str] = {}  # index → whose the token is
        self.flags: dict[str, str] = {}
        self.inflight = 0  # requests at the replicas or in their lines, last look
        self.waiting = 0
        self.by_server: dict[str, int] = {}  # "backend/server" → its requests now
        self._versions: dict[bytes, str] = {}
        self._log: int | None = None  # the read end of HAProxy's log pipe
        self._partial = b""
        self._ticks = 0
        self._reader: asyncio.Task[None] | None = None

    # -- the process -------------------------------------------------------------------------
    async def start(self) -> None:
        """Write the configuration and maps, start HAProxy, wait for its admin socket."""
        access = self.gateway.access
        self.flags = self._flags()
        self.hashes = {h: f"k{i}" for i, h in enumerate(sorted(access.hashes))}
        self.whose = {index: access.hashes[h] for h, index in self.hashes.items()}
        _write(self._path(ACCESS_MAP), _map_text(self.hashes))
        _write(self._path(FLAGS_MAP), _map_text(self.flags))
        _write(self._path(CONFIG), render(self.plan).encode())
        self._path(ADMIN).unlink(missing_ok=True)
        # The log goes to a pipe read once a tick (not by the event loop as lines come: a
        # wake-up every few requests cost the replicas on the same core a third more CPU).
        self._log, write = os.pipe()
        os.set_blocking(self._log, False)
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._log, F_SETPIPE_SZ, PIPE_BYTES)
        try:
            self.process = await asyncio.create_subprocess_exec(
                HAPROXY, "-f", CONFIG, "-db",
                stdin=asyncio.subprocess.DEVNULL, stdout=write,
                cwd=self.gateway.folder, preexec_fn=_placed(self.gateway.spec.proxy_cpus),
            )  # fmt: skip
        except OSError as exc:
            raise ProxyFailed(f"haproxy did not start: {exc.strerror}") from exc
        finally:
            os.close(write)
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.returncode is not None:
                raise ProxyFailed(f"haproxy exited with code {self.process.returncode}")
            with contextlib.suppress(ProxyFailed):
                await self.command("show info")
                self._reader = asyncio.get_running_loop().create_task(self._read_watched())
                return
            await asyncio.sleep(0.05)
        raise ProxyFailed(f"haproxy's admin socket did not answer within {START_S:g} s")

    async def stop(self, grace_s: float) -> None:
        """Stop taking requests and let those under way finish (at most `grace_s`)."""
        process = self.process
        if self._reader is not None:
            self._reader.cancel()
        if process is not None and process.returncode is None:
            await terminate(process, grace_s, signal.SIGUSR1)  # HAProxy's soft stop
        self.read_log()  # the last requests' lines (a failed start's pipe is closed too)
        if self._log is not None:
            os.close(self._log)
            self._log = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def command(self, line: str) -> str:
        """One command on HAProxy's admin socket, and its answer."""
        try:
            reader, writer = await asyncio.open_unix_connection(self._admin_address())
        except OSError as exc:
            raise ProxyFailed(f"haproxy's admin socket: {exc.strerror}") from exc
        try:
            writer.write(line.encode() + b"\n")
            await writer.drain()
            return (await reader.read()).decode("utf-8", "replace")
        except OSError as exc:
            raise ProxyFailed(f"haproxy's admin socket: {exc.strerror}") from exc
        finally:
            writer.close()

    # -- steering, each tick of the gateway ---------------------------------------------------
    async def sync(self) -> None:
        """Bring HAProxy in line with the gateway: rules, flags, servers; read its load."""
        if not self.alive:
            return
        spec = self.gateway.spec
        self._versions = {
            backend(protocol, track).encode(): version
            for protocol in (REST, GRPC)
            for track, version in ((MAIN, spec.model_version), (CANARY, spec.canary_version))
        }
        self.read_log()
        await self._sync_access()
        await self._sync_flags()
        await self._sync_servers()
        self._ticks += 1
        if self._ticks % LOAD_EVERY == 0:
            await self._read_load(servers=False)

    async def _sync_access(self) -> None:
        hashes = self.gateway.access.hashes
        for gone in [h for h in self.hashes if h not in hashes]:
            await self.command(f"del map {ACCESS_MAP} {gone}")
            self.whose.pop(self.hashes.pop(gone), None)
        for new in [h for h in hashes if h not in self.hashes]:
            index = f"k{len(self.whose)}-{new[:8]}"
            await self.command(f"add map {ACCESS_MAP} {new} {index}")
            self.hashes[new] = index
        for hashed, index in self.hashes.items():
            self.whose[index] = hashes[hashed]

    async def _sync_flags(self) -> None:
        wanted = self._flags()
        for key in [k for k in self.flags if k not in wanted]:
            await self.command(f"del map {FLAGS_MAP} {key}")
        for key, value in wanted.items():
            if self.flags.get(key) != value:
                verb = "set" if key in self.flags else "add"
                await self.command(f"{verb} map {FLAGS_MAP} {key} {value}")
        self.flags = wanted

    def _flags(self) -> dict[str, str]:
        spec = self.gateway.spec
        share = spec.canary_percent if canary_generation(spec) else 0.0
        monitor = self.gateway.monitor
        watch = monitor is not None and not spec.request_log
        payloads = monitor.payload_rate if monitor is not None else 0.0
        return flags(self.gateway.access.public, share, spec.max_queue, watch, payloads)

    async def _sync_servers(self) -> None:
        wanted = self._wanted()
        for name in sorted(set(wanted) - self.servers):
            if await self._enable(name, *wanted[name]):
                self.servers.add(name)
        for name in sorted(self.servers - set(wanted)):
            await self._retire(name)
        await self._let_go()

    async def _enable(self, name: str, socket: str, protocol: str) -> bool:
        """Send a replica's socket requests: a free gRPC slot pointed at it, else a server
        added at run time."""
        backend_name = name.split("/", maxsplit=1)[0]
        per = self.gateway.spec.per_replica
        slot = self._free_slot(backend_name) if protocol == GRPC else None
        if slot is not None:
            link = self._path(slot_link(SOCKETS, backend_name, slot))
            fresh = link.with_name(link.name + ".new")
            fresh.unlink(missing_ok=True)
            fresh.symlink_to(os.path.relpath(self._path(socket), link.parent))
            fresh.replace(link)  # the slot is off and has no connection: nothing sees the swap
            physical = f"{backend_name}/{SLOT}{slot}"
            await self.command(f"set maxconn server {physical} {per}")
        else:
            physical = name
            answer = await self.command(f"add server {name} {server_line(socket, per, protocol)}")
            if "New server registered" not in answer:
                print(f"proxy: {name} not added: {answer.strip()}", file=sys.stderr, flush=True)
                return False
        await self.command(f"set server {physical} state ready")
        self.physical[name] = physical
        return True

    def _free_slot(self, backend_name: str) -> int | None:
        taken = {p for n, p in self.physical.items() if n.startswith(backend_name + "/")}
        for slot in range(SLOTS):
            if f"{backend_name}/{SLOT}{slot}" not in taken:
                return slot
        return None

    async def _let_go(self) -> None:
        """Forget the doomed servers whose connections have all closed: a slot is free again
        (HAProxy closes a server's idle connections as it goes into maintenance), a server
        added at run time is deleted."""
        if not self.doomed:
            return
        connections = await self._connections()
        for name in sorted(self.doomed):
            physical = self.physical.get(name, name)
            if physical != name:  # a slot
                if connections.get(physical, 1):
                    continue
            elif "Server deleted" not in await self.command(f"del server {name}"):
                continue
            self.doomed.discard(name)
            self.physical.pop(name, None)

    async def _connections(self) -> dict[str, int]:
        """Each gRPC slot's connections to its replica, used or idle, from `show servers
        conn`."""
        found = {}
        for track in TRACKS:
            answer = await self.command(f"show servers conn {backend(GRPC, track)}")
            lines = [line for line in answer.splitlines() if line.strip()]
            if not lines or not lines[0].startswith("#"):
                continue
            header = lines[0].lstrip("# ").split()
            for line in lines[1:]:
                row = dict(zip(header, line.split(), strict=False))
                with contextlib.suppress(KeyError, ValueError):
                    found[row["bkname/svname"]] = sum(
                        int(row[k]) for k in ("used_cur", "safe_nb", "unsafe_nb", "idle_cur")
                    )
        return found

    def _wanted(self) -> dict[str, tuple[str, str]]:
        """The servers HAProxy should balance over: every ready replica, on its track (none
        while the request log is on: the gateway logs bodies, so it answers every request)."""
        spec = self.gateway.spec
        if spec.request_log:
            return {}
        canary = canary_generation(spec)
        wanted = {}
        for replica in self.gateway.replicas:
            if replica.state != "ready":
                continue
            track = CANARY if canary is not None and replica.generation == canary else MAIN
            name = f"r{replica.id}"
            wanted[f"{backend(REST, track)}/{name}"] = (replica.socket, REST)
            if self.plan.grpc_port is not None:
                wanted[f"{backend(GRPC, track)}/{name}"] = (grpc_socket(replica.socket), GRPC)
        return wanted

    async def _retire(self, name: str) -> None:
        await self.command(f"set server {self.physical.get(name, name)} state maint")
        self.servers.discard(name)
        self.doomed.add(name)

    async def drained(self, replica: Replica, timeout_s: float) -> None:
        """Send the replica nothing new, and wait (at most `timeout_s`) until the requests
        HAProxy gave it are answered."""
        mine = [n for n in self.servers | self.doomed if n.endswith(f"/r{replica.id}")]
        with contextlib.suppress(ProxyFailed):
            for name in mine:
                if name in self.servers:
                    await self._retire(name)
            deadline = time.monotonic() + timeout_s
            while self.alive and time.monotonic() < deadline:
                await self._read_load(servers=True)
                if not any(self.by_server.get(self.physical.get(n, n), 0) for n in mine):
                    return
                await asyncio.sleep(0.05)

    async def _read_load(self, servers: bool) -> None:
        """Requests at the replicas and in line, from HAProxy's statistics (the backends', and
        with `servers` each server's)."""
        asked = "show stat" if servers else "show stat -1 2 -1"
        rows = csv.DictReader(io.StringIO((await self.command(asked)).lstrip("# ")))
        tracks = {backend(p, t) for p in (REST, GRPC) for t in TRACKS}
        inflight = waiting = 0
        by_server = {}
        for row in rows:
            if row.get("pxname") not in tracks:
                continue
            current, queued = int(row.get("scur") or 0), int(row.get("qcur") or 0)
            if row.get("svname") == "BACKEND":
                inflight, waiting = inflight + current + queued, waiting + queued
            else:
                by_server[f"{row['pxname']}/{row['svname']}"] = current + queued
        self.inflight, self.waiting = inflight, waiting
        if servers:
            self.by_server = by_server

    # -- the log: one line a request ---------------------------------------------------------
    async def _read_watched(self) -> None:
        """While the deployment is watched its lines carry bodies: read them more often than
        once a tick, so that the pipe (which HAProxy never waits on) does not fill."""
        while self.alive:
            await asyncio.sleep(WATCHED_READ_S)
            if self.flags.get("watch"):
                self.read_log()

    def read_log(self) -> None:
        """Count the requests HAProxy logged since the last look (each tick, and before the
        metrics are read, so that a scrape sees every request answered before it)."""
        if self._log is None:
            return
        chunks = [self._partial]
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._log, PIPE_BYTES):
                chunks.append(chunk)
        lines = b"".join(chunks).split(b"\n")
        self._partial = lines.pop()
        now = time.monotonic()
        for line in lines:
            self._count(line, now)

    def _count(self, line: bytes, now: float) -> None:
        """One request HAProxy answered, or had a replica answer, into the gateway's counters
        (those it sent to the gateway, the gateway counted itself)."""
        parts = line.split(b" ")
        if len(parts) != FIELDS or parts[1].startswith(GATEWAY.encode()):
            return
        status, track, whose, micros, path, sampled, body, answer = parts
        try:
            code = int(status)
        except ValueError:
            return
        gateway = self.gateway
        gateway.requests[code] = gateway.requests.get(code, 0) + 1
        version = self._versions.get(track)
        if version:
            key = (version, code)
            gateway.by_version[key] = gateway.by_version.get(key, 0) + 1
        if micros.isdigit():
            gateway.latency.observe(int(micros) / 1e6)
        holder = self.whose.get(whose.decode("latin-1"))
        if holder is not None and whose != PUBLIC.encode():
            gateway.access.note_use(holder)
        gateway.autoscaler.started(now)
        monitor = gateway.monitor
        if monitor is not None and version and body != NONE:
            try:
                request = binascii.a2b_base64(body)
                response = binascii.a2b_base64(answer) if answer != NONE else None
            except binascii.Error:  # a line cut short: not watched
                return
            ms = int(micros) / 1000 if micros.isdigit() else 0.0
            path_text = path.decode("latin-1")
            monitor.record(path_text, request, response, code, version, ms, sampled == b"1")

    def _path(self, relative: str) -> Path:
        return self.gateway.folder / relative

    def _admin_address(self) -> str:
        """The admin socket's address, the shorter of relative to the working directory (the
        gateway's folder, where it runs) and absolute: a socket's address is at most 107 bytes,
        and a platform's home may be deep."""
        absolute = str(self._path(ADMIN))
        return min(os.path.relpath(absolute), absolute, key=len)


def _write(path: Path, data: bytes) -> None:
    """A file only the gateway's user reads (in its 0700 socket folder, too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _map_text(entries: dict[str, str]) -> bytes:
    return "".join(f"{key} {value}\n" for key, value in entries.items()).encode()


def _placed(cpus: list[int]) -> Callable[[], None]:
    """What HAProxy's process does before it runs: end with the gateway that started it, even
    killed (it holds the port), and run on `cpus` (of those this machine lets it have), if
    given: a core of its own, away from the replicas', keeps its work off theirs."""
    wanted = {cpu for cpu in cpus if cpu < (os.cpu_count() or 1)}

    def prepare() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if wanted:
            with contextlib.suppress(OSError):  # none of them is this process's to use
                os.sched_setaffinity(0, wanted)

    return prepare
