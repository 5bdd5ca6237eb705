"""A deployment's gateway, `python -m loom.serving.gateway FOLDER`: one endpoint in front of the
deployment's replicas.

It balances requests over the ready replicas (fewest in flight first), replaces a replica that
dies (a request it was holding is sent once more, to another one), scales between the minimum and
the maximum with the autoscaler — down to zero, starting a replica when a request comes — and
drains a replica before stopping it. It reads `spec.json` from FOLDER (again on SIGHUP), writes
`status.json` there, and drains everything on SIGTERM. It runs in its own session, so it goes on
serving while the platform restarts.

Every request but the health probes needs a bearer token the deployment accepts (`access.py`)
unless the deployment is public; the token goes no further than the gateway. Replicas listen on
unix sockets in FOLDER/run (mode 0700), the gateway's working directory. With a certificate in
the spec, the endpoint is HTTPS.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import signal
import ssl
import sys
import time
from collections.abc import Collection, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from loom.serving import gateway_front, gateway_metrics
from loom.serving.access import ACCESS, AccessList
from loom.serving.admission import Admission, Busy
from loom.serving.autoscale import Autoscaler, Policy
from loom.serving.exposition import CONTENT_TYPE
from loom.serving.gateway_graph import call_member, internal_socket, link_members, member_path
from loom.serving.gateway_tls import grpc_tls_context, tls_context
from loom.serving.gateway_transform import transformed, transformer_generation, verb_of
from loom.serving.graph_router import GraphRouter
from loom.serving.graphs import Graph
from loom.serving.http1 import (
    NOT_FORWARDED,
    BadMessage,
    Message,
    MessageReader,
    encode_response,
)
from loom.serving.monitor import Monitor
from loom.serving.observe import Histogram, RequestLog
from loom.serving.proxy import Proxy
from loom.serving.replica_envs import EnvironmentFailed, ReplicaEnvironments
from loom.serving.replicas import (
    Generation,
    Replica,
    ReplicaGone,
    canary_generation,
    generation,
    pin_gpus,
    private_sockets,
    socket_path,
)
from loom.serving.spec import SPEC, STATUS, DeploymentSpec, redact_paths, write_atomic, write_pid

TICK_S = 0.1
MAX_REQUEST = 64 * 2**20
JSON = [(b"content-type", b"application/json")]
CHALLENGE = [*JSON, (b"www-authenticate", b"Bearer")]
HEALTH = frozenset({"/", "/v2/health/live", "/v2/health/ready"})  # open: they tell nothing


def _error(status: int, message: str, keep_alive: bool = True) -> bytes:
    return encode_response(status, orjson.dumps({"error": message}), JSON, keep_alive=keep_alive)


def _unauthorized(message: str) -> bytes:
    return encode_response(401, orjson.dumps({"error": message}), CHALLENGE)


def policy(spec: DeploymentSpec) -> Policy:
    return Policy(
        spec.min_replicas, spec.max_replicas, spec.target_concurrency, spec.scale_down_delay_s
    )


class Gateway:
    def __init__(self, folder: Path, spec: DeploymentSpec) -> None:
        self.folder = folder
        self.spec = spec
        self.autoscaler = Autoscaler(policy(spec))
        self.replicas: list[Replica] = []
        self.ready = asyncio.Event()
        self.next_id = 1
        self.port = spec.port
        self.grpc_port: int | None = None
        self.desired = spec.min_replicas
        self.inflight = 0
        self.requests: dict[int, int] = {}
        self.by_version: dict[tuple[str, int], int] = {}  # (version, status) → requests
        self.latency = Histogram()
        self.restarts = 0
        self.failures = 0
        self.backoff_until = 0.0
        self.cold_starts: list[float] = []
        self.message = ""
        self.stopping = asyncio.Event()
        self.log = RequestLog(folder / "requests.jsonl") if spec.request_log else None
        self.monitor = Monitor.of(folder, spec)
        self.access = AccessList(folder / ACCESS)
        self.access.refresh(force=True)
        self.tls: ssl.SSLContext | None = None
        self.grpc_tls: ssl.SSLContext | None = None  # the same certificate, HTTP/2 by ALPN
        self._tasks: set[asyncio.Task[None]] = set()
        self.admission = Admission(
            self.capacity, max_wait_s=spec.queue_timeout_s, max_line=spec.max_queue
        )
        self.environments = ReplicaEnvironments(folder, self._building)
        self.router = GraphRouter(Graph.from_json(spec.graph)) if spec.graph else None
        self.front: Proxy | None = None  # the compiled data path, when it carries requests
        self.unproxied = ""  # why the gateway answers every request itself, when it does

    def _building(self, news: str) -> None:
        """The environment build's progress, in the status (from the builder's thread)."""
        self.message = redact_paths(news)

    def capacity(self) -> int:
        """Requests the ready replicas take at once."""
        return self.spec.per_replica * sum(1 for r in self.replicas if r.state == "ready")

    # -- serving -----------------------------------------------------------------------------
    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, trusted: bool = False
    ) -> None:
        """A connection's requests; `trusted`: the internal socket, which only the platform's
        user reaches (a graph's gateway calling this deployment), needs no token."""
        requests = MessageReader(reader, max_body=MAX_REQUEST, writer=writer)
        try:
            while not self.stopping.is_set():
                try:
                    request = await requests.next()
                except BadMessage as exc:
                    writer.write(_error(exc.status, str(exc), keep_alive=False))
                    await writer.drain()
                    break
                if request is None:
                    break
                writer.write(await self.respond(request, trusted))
                await writer.drain()
                if not request.keep_alive:
                    break
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def respond(self, request: Message, trusted: bool = False) -> bytes:
        path = request.target.split("?", 1)[0]
        health = path in HEALTH and (path != "/" or request.method == "GET")
        if not health and not trusted:  # POST / is a graph's request, never a probe
            refused = self.access.refusal(request.header(b"authorization"))
            if refused is not None:
                self.requests[401] = self.requests.get(401, 0) + 1
                return _unauthorized(refused)
        if path == "/metrics":
            body = await self.prometheus()
            return encode_response(200, body, [(b"content-type", CONTENT_TYPE.encode())])
        if path == "/v2/health/live":
            return encode_response(200, b'{"live":true}', JSON)
        if path == "/" and health:  # KServe's V1 liveness
            return encode_response(200, b'{"status":"alive"}', JSON)
        if path == "/v2/health/ready":
            ready = self.serving() or self.spec.min_replicas == 0
            return encode_response(200, orjson.dumps({"ready": ready}), JSON)
        return await self.forward(request)

    async def forward(self, request: Message) -> bytes:
        response = await self.relay(request)
        reason = response.start[2] if len(response.start) > 2 else None
        return encode_response(
            response.status,
            response.body,
            response.headers,
            reason=reason,
            keep_alive=request.keep_alive,
        )

    async def relay(self, request: Message) -> Message:
        """The replicas' response to `request`, or the gateway's own error response; counted,
        timed and logged whatever the protocol the caller spoke (REST, or gRPC translated)."""
        started = time.monotonic()
        self.inflight += 1
        self.autoscaler.started(started)
        status, replica_id, version = 502, None, None
        entered = False
        try:
            await self.admission.enter()
            entered = True
            verb = verb_of(request.target) if self.spec.transformer_dir else None
            if self.router is not None:
                response, replica = await self.route(request), None
            elif verb is not None:
                response, replica = await transformed(self, request, started, verb)
            else:
                response, replica = await self.send(request, started)
            status = response.status
            if replica is not None:
                replica_id, version = replica.id, replica.version
                key = (replica.version, status)
                self.by_version[key] = self.by_version.get(key, 0) + 1
        except Busy as exc:
            status = 503
            response = _answer(503, orjson.dumps({"error": f"busy: {exc.message}; retry"}))
            response.headers.append((b"retry-after", b"%d" % exc.retry_after_s))
        except _Refused as exc:
            status = exc.status
            response = _answer(status, orjson.dumps({"error": exc.message}))
        except Exception as exc:  # a gateway fault: answered, logged, never a dropped request
            print(f"gateway error on {request.target}: {exc!r}", file=sys.stderr, flush=True)
            status = 502
            response = _answer(502, orjson.dumps({"error": f"gateway error: {type(exc).__name__}"}))
        finally:
            if entered:
                self.admission.leave()
            self.inflight -= 1
            elapsed = time.monotonic() - started
            self.latency.observe(elapsed)
            self.requests[status] = self.requests.get(status, 0) + 1
        if self.log is not None:
            self.log.write(
                method=request.method,
                path=request.target,
                status=status,
                ms=round(elapsed * 1000, 3),
                replica=replica_id,
                request=request.body,
                response=response.body,
            )
        if self.monitor is not None:
            self.monitor.observe(request, response, status, version, elapsed * 1000)
        return response

    async def route(self, request: Message) -> Message:
        """A graph's answer: its router's, calling the steps' deployments."""
        assert self.router is not None
        kept = [(k, v) for k, v in request.headers if k not in NOT_FORWARDED]

        async def call(member: str, body: bytes) -> tuple[int, bytes]:
            path = member_path(request.target, member)
            if path is None:
                return 404, b'{"error": "a graph answers POST /, :predict and infer"}'
            return await call_member(member, path, body, kept)

        status, body = await self.router.run(request.body, call)
        return _answer(status, body)

    async def send(
        self, request: Message, started: float, role: Generation | None = None
    ) -> tuple[Message, Replica]:
        """To the least busy ready replica of the track the request falls to (the canary's
        share, or the rest; a `role`'s, the transformer's); once more to another if that one
        dies first."""
        failed: set[Replica] = set()
        canary = canary_generation(self.spec)
        to_canary = canary is not None and random.random() * 100 < self.spec.canary_percent
        for attempt in range(2):
            replica = await self.pick(
                started, avoid=failed, canary=canary, to_canary=to_canary, role=role
            )
            try:
                return await replica.exchange(request), replica
            except ReplicaGone as exc:
                failed.add(replica)
                if attempt == 1:
                    raise _Refused(502, f"replica {replica.id} failed: {exc}") from exc
        raise AssertionError("unreachable")

    async def pick(
        self,
        started: float,
        avoid: Collection[Replica] = (),
        canary: Generation | None = None,
        to_canary: bool = False,
        role: Generation | None = None,
    ) -> Replica:
        transformer = self.transformer()
        while True:
            ready = [r for r in self.replicas if r.state == "ready" and r not in avoid]
            ready = [
                r for r in ready if (r.generation == role if role else r.generation != transformer)
            ]
            if canary is not None:  # its track's replicas, if it has one ready; else any
                track = [r for r in ready if (r.generation == canary) == to_canary]
                ready = track or ready
            if ready:
                return min(ready, key=lambda r: (r.inflight, r.id))
            if self.stopping.is_set():
                raise _Refused(503, f"deployment {self.spec.name!r} is stopping")
            if not any(r.state == "ready" for r in self.replicas):
                self.ready.clear()  # set again when one is
            if not any(r.state == "starting" for r in self.replicas):
                self.reconcile(time.monotonic(), wanted_now=1)
            remaining = self.spec.ready_timeout_s - (time.monotonic() - started)
            if remaining <= 0:  # why is for the owner (status.json), not for every caller
                raise _Refused(503, f"no replica of {self.spec.name!r} became ready")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready.wait(), min(remaining, 1.0))

    # -- replicas ----------------------------------------------------------------------------
    def reconcile(self, now: float, wanted_now: int = 0) -> None:
        """Start and drain replicas towards what the autoscaler wants; roll out a new spec."""
        if self.stopping.is_set() or self.router is not None:  # a graph has no replicas
            return
        active = [r for r in self.replicas if r.state in ("starting", "ready")]
        desired = max(self.autoscaler.desired(now, len(active)), wanted_now)
        desired = min(desired, self.spec.max_replicas)
        self.desired = desired
        pools = self.pools(desired)
        for wanted, count in pools.items():
            fresh = [r for r in active if r.generation == wanted]
            if len(fresh) < count and now >= self.backoff_until:
                for _ in range(count - len(fresh)):
                    self.start_replica(wanted)
        stale = [r for r in active if r.generation not in pools]
        if stale and all(
            sum(1 for r in active if r.generation == wanted and r.state == "ready") >= max(count, 1)
            for wanted, count in pools.items()
        ):
            for replica in stale:
                self.retire(replica)
        if stale:
            return
        for wanted, count in pools.items():
            fresh = [r for r in active if r.generation == wanted]
            surplus = len(fresh) - count
            for replica in sorted(fresh, key=lambda r: (r.state == "ready", r.inflight, -r.id)):
                if surplus <= 0:
                    break
                self.retire(replica)
                surplus -= 1

    def pools(self, desired: int) -> dict[Generation, int]:
        """How many replicas each version wants: the canary its share of `desired` (at least
        one while any is wanted), the main version the rest (at least one too)."""
        main = generation(self.spec)
        canary = canary_generation(self.spec)
        transformer = self.transformer()
        beside = {transformer: desired} if transformer else {}  # as many as the predictor
        if canary is None or canary == main:
            return {main: desired, **beside}
        share = math.ceil(desired * self.spec.canary_percent / 100) if desired else 0
        share = min(max(share, 1 if desired else 0), desired)
        return {main: max(desired - share, 1 if desired else 0), canary: share, **beside}

    def serving(self) -> bool:
        """Whether a replica can answer (and, with a transformer, one of its replicas too);
        a graph's gateway answers itself."""
        if self.router is not None:
            return True
        transformer = self.transformer()
        ready = {r.generation == transformer for r in self.replicas if r.state == "ready"}
        return False in ready and (transformer is None or True in ready)

    def transformer(self) -> Generation | None:
        """What the deployment's transformer replicas serve, when it has a transformer."""
        folder = self.spec.transformer_dir
        return transformer_generation(folder) if folder else None

    def start_replica(self, serves: Generation | None = None) -> Replica:
        kind = Replica
        if self.spec.ray_address:  # on the cluster's nodes
            from loom.serving.ray_replicas import RayReplica

            kind = RayReplica
        replica = kind(
            id=self.next_id,
            socket=socket_path(self.next_id),
            generation=serves or generation(self.spec),
            log=self.folder / f"replica-{self.next_id}.log",
        )
        self.next_id += 1
        self.replicas.append(replica)
        self.background(self._run(replica))
        return replica

    async def _run(self, replica: Replica) -> None:
        cold = not any(r.state == "ready" for r in self.replicas)
        try:
            if not self.spec.ray_address:  # on a Ray cluster, Ray pins it to its node's GPUs
                others = [r.gpus for r in self.replicas if r is not replica]
                replica.gpus = pin_gpus(self.spec.gpu_ids, others, replica.generation[4])
        except ValueError as exc:
            self._failed(replica, f"replica {replica.id} could not start: {exc}")
            return
        section = self.spec.environments.get(replica.generation[0])
        try:
            if section is not None:
                replica.environment = await self.environments.prepare(section)
        except EnvironmentFailed as exc:
            self._failed(replica, f"replica {replica.id} could not start: {exc}")
            return
        try:
            await replica.spawn(self.spec, self.folder)
        except OSError as exc:
            self._failed(replica, f"replica {replica.id} could not start: {exc}")
            return
        if replica.state != "starting":  # retired before its process existed
            await replica.stop()
            return
        self.background(self._watch(replica))
        ready = await replica.wait_ready(self.spec.ready_timeout_s)
        if replica.state != "starting":  # drained while starting, or the gateway is stopping
            return
        if ready:
            replica.state = "ready"
            replica.ready_at = time.monotonic()
            self.failures, self.message = 0, ""
            if cold:
                self.cold_starts.append(replica.ready_at - replica.started_at)
            self.ready.set()
            self.admission.wake()  # more room for those in line
            return
        assert replica.process is not None
        code = replica.process.returncode
        reason = (
            f"exited with code {code}"
            if code is not None
            else f"was not ready within {self.spec.ready_timeout_s:g} s"
        )
        await replica.stop()
        self._failed(replica, f"replica {replica.id} {reason}: {await replica.last_lines()}")

    async def _watch(self, replica: Replica) -> None:
        """A ready replica that dies is removed, and the next reconcile replaces it; one that
        dies while starting is for `_run` to report."""
        assert replica.process is not None
        code = await replica.process.wait()
        if replica.state != "ready":
            return
        replica.state = "stopped"
        with contextlib.suppress(ValueError):
            self.replicas.remove(replica)
        await replica.stop()
        if not self.stopping.is_set():
            self.restarts += 1
            print(f"replica {replica.id} exited with code {code}; replacing it", flush=True)
        if not any(r.state == "ready" for r in self.replicas):
            self.ready.clear()

    def _failed(self, replica: Replica, message: str) -> None:
        with contextlib.suppress(ValueError):
            self.replicas.remove(replica)
        self.failures += 1
        self.backoff_until = time.monotonic() + min(30.0, 0.5 * 2**self.failures)
        self.message = redact_paths(message)
        print(message, file=sys.stderr, flush=True)

    def retire(self, replica: Replica) -> None:
        """Drain the replica (it takes no new request from now on), then stop it."""
        replica.state = "draining"
        self.background(self._retire(replica))

    async def _retire(self, replica: Replica) -> None:
        if self.front is not None:  # what the proxy gave it is answered first
            await self.front.drained(replica, self.spec.drain_timeout_s)
        await replica.drain(self.spec.drain_timeout_s)
        with contextlib.suppress(ValueError):
            self.replicas.remove(replica)
        replica.log.unlink(missing_ok=True)  # a replica that crashed keeps its log

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- control -----------------------------------------------------------------------------
    async def control(self) -> None:
        last_status = 0.0
        written: dict[str, Any] = {}
        while not self.stopping.is_set():
            now = time.monotonic()
            if not (self.folder / SPEC).exists():  # deleted, or its platform's home is gone
                print("the deployment's folder is gone: stopping", file=sys.stderr, flush=True)
                self.stopping.set()
                break
            self.access.refresh()
            self.autoscaler.sample(now, self.load()[0])
            self.reconcile(now)
            await gateway_front.steer(self)
            status = self.status()
            if status != written or now - last_status > 2:
                try:
                    write_atomic(self.folder / STATUS, {**status, "updated_at": time.time()})
                    written, last_status = status, now
                except OSError as exc:  # the folder went (seen next tick), or the disk is full
                    print(f"status not written: {exc}", file=sys.stderr, flush=True)
            if self.log is not None:
                self.log.flush()
            if self.monitor is not None:
                self.monitor.tick()
            await asyncio.sleep(TICK_S)

    def load(self) -> tuple[int, int]:
        """Requests in flight (at the replicas or in line) and in line, wherever they came in."""
        inflight, waiting = self.inflight, self.admission.waiting
        if self.front is not None:
            inflight, waiting = inflight + self.front.inflight, waiting + self.front.waiting
        return inflight, waiting

    def reload(self) -> None:
        try:
            self.spec = DeploymentSpec.read(self.folder)
        except (OSError, ValueError, TypeError) as exc:
            print(f"spec not reloaded: {exc}", file=sys.stderr, flush=True)
            return
        if self.front is None:  # the data path chosen at start stays
            self.spec = replace(self.spec, proxy="")
        self.autoscaler.policy = policy(self.spec)
        self.admission.max_wait_s = self.spec.queue_timeout_s
        self.admission.max_line = self.spec.max_queue
        self.backoff_until, self.failures = 0.0, 0
        for context in (self.tls, self.grpc_tls):  # a renewed certificate, same files
            if context is None:
                continue
            try:
                context.load_cert_chain(self.spec.certfile, self.spec.keyfile or None)
            except (OSError, ssl.SSLError) as exc:
                print(f"certificate not reloaded: {exc}", file=sys.stderr, flush=True)
        if self.spec.request_log and self.log is None:
            self.log = RequestLog(self.folder / "requests.jsonl")
        elif not self.spec.request_log and self.log is not None:
            self.log.close()
            self.log = None
        self.background(self._remonitor())

    async def _remonitor(self) -> None:
        """A new detector (and payload log) for new monitoring settings or versions."""
        old = self.monitor
        new = self.spec
        if old is not None and _watched(old.spec) == _watched(new):
            old.spec = new
            return
        self.monitor = None
        if old is not None:
            await old.stop()
        self.monitor = Monitor.of(self.folder, self.spec)
        if self.monitor is not None:
            self.monitor.start()

    async def shutdown(self) -> None:
        self.stopping.set()
        if self.front is not None:  # no new request; those under way are answered
            await self.front.stop(self.spec.drain_timeout_s)
        await asyncio.gather(*(r.drain(self.spec.drain_timeout_s) for r in list(self.replicas)))
        self.replicas.clear()
        if self.monitor is not None:
            await self.monitor.stop()
        self.environments.release()
        with contextlib.suppress(OSError):  # the folder may be gone with the deployment
            write_atomic(self.folder / STATUS, {**self.status(), "updated_at": time.time()})
        if self.log is not None:
            self.log.close()

    def status(self) -> dict[str, Any]:
        return {
            **gateway_metrics.status(self),
            "monitoring": self.monitor.status() if self.monitor is not None else None,
        }

    async def prometheus(self) -> bytes:
        return await gateway_metrics.prometheus(self)


def _watched(spec: DeploymentSpec) -> tuple[object, ...]:
    """What a monitor is made for: a change of it starts a new one."""
    return (spec.monitoring, spec.model_dir, spec.canary_model_dir, spec.canary_version)


def _answer(status: int, body: bytes) -> Message:
    return Message([b"HTTP/1.1", str(status).encode()], list(JSON), body)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def run(folder: Path) -> None:
    spec = DeploymentSpec.read(folder)
    private_sockets(folder)
    if spec.ray_address:
        from loom.serving.ray_replicas import connect

        await asyncio.to_thread(connect, spec.ray_address, spec.ray_namespace)
    gateway = Gateway(folder, spec)
    gateway.tls, gateway.grpc_tls = tls_context(spec), grpc_tls_context(spec)
    server, grpc_server = await gateway_front.endpoints(gateway)
    internal = await asyncio.start_unix_server(
        lambda r, w: gateway.handle(r, w, trusted=True), internal_socket(folder), limit=2**20
    )
    if spec.graph:
        link_members(folder, spec.graph_members)
    write_pid(folder, os.getpid())
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, gateway.stopping.set)
    loop.add_signal_handler(signal.SIGINT, gateway.stopping.set)
    loop.add_signal_handler(signal.SIGHUP, gateway.reload)
    scheme = "https" if gateway.tls else "http"
    grpc_at = f" and gRPC {spec.host}:{gateway.grpc_port}" if gateway.grpc_port else ""
    through = "through haproxy" if gateway.front else f"by the gateway ({gateway.unproxied})"
    print(f"deployment {spec.name!r} at {scheme}://{spec.host}:{gateway.port}{grpc_at}, "
          f"{through}", flush=True)  # fmt: skip
    if gateway.monitor is not None:
        gateway.monitor.start()
    control = asyncio.create_task(gateway.control())
    await gateway.stopping.wait()
    server.close()
    internal.close()
    if grpc_server is not None:  # calls under way finish; the replicas drain after
        await grpc_server.stop(grace=spec.drain_timeout_s)
    await control
    await gateway.shutdown()


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m loom.serving.gateway DEPLOYMENT_FOLDER")
    folder = Path(sys.argv[1]).resolve()
    try:
        import uvloop
    except ImportError:
        asyncio.run(run(folder))
    else:
        uvloop.run(run(folder))


if __name__ == "__main__":
    main()
