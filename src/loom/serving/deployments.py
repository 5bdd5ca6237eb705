"""Deployments, the platform's side: a registered model version served by a gateway process
(`loom.serving.gateway`) with its replicas, one endpoint (port) each.

The platform stores what was asked, copies the version's files into the deployment's folder,
writes the gateway's `spec.json` and `access.json` (who may call it) and starts the gateway in a
session of its own, with an allow-listed environment; it reads back the gateway's `status.json`.
Gateways outlive the platform, and a supervisor thread starts again any gateway that is not
running (after a crash of its own, or of the machine) and renders each `access.json` again when
keys or the owner's tokens change.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.domain.errors import Conflict, InvalidInput, NotFound, PlatformError
from loom.environments.sections import Sources
from loom.launchers.confinement import SandboxPolicy
from loom.registry.models import ModelRegistry
from loom.serving.canary import CanaryChange
from loom.serving.canary import apply as apply_canary
from loom.serving.code import (
    Code,
    check_version,
    code_of,
    environments_of,
    store_transformer,
    transformer_dir,
)
from loom.serving.deployment_view import described
from loom.serving.drift import DriftHistory
from loom.serving.environment import serving_env
from loom.serving.formats import MAX_MLMODEL, NotServable, model_file, zip_entries
from loom.serving.graph_deployments import graph_members, refuse_if_a_step
from loom.serving.keys import DeploymentAccess
from loom.serving.monitoring import REFERENCE_FILE, DetectorRuntime, Monitoring
from loom.serving.replicas import free_port
from loom.serving.scaling import Scaling, columns, columns_of
from loom.serving.spec import (
    PID,
    STATUS,
    DeploymentSpec,
    Tls,
    read_status,
    redact_paths,
    write_pid,
)
from loom.store.db import Database
from loom.store.tables import Deployment, ModelVersion

log = logging.getLogger("loom.serving")

SUPERVISE_S = 2.0
STALE_STATUS_S = 10.0


class Deployments:
    def __init__(
        self,
        db: Database,
        registry: ModelRegistry,
        home: Path,
        host: str = "127.0.0.1",
        tls: Tls | None = None,
        sandbox: SandboxPolicy | None = None,
        ray: tuple[str, str] | None = None,
        unconfined: str | None = None,
        gpus: list[int] | None = None,
        sources: Sources | None = None,
        detector: DetectorRuntime | None = None,
        proxy: str = "",
        proxy_cpus: list[int] | None = None,
    ) -> None:
        self.db = db
        self.proxy = "" if proxy == "off" else proxy  # the data path gateways put in front
        self.proxy_cpus = list(proxy_cpus or [])  # where it runs; none: any CPU
        self.sources = sources or Sources(root=home / "environments")
        self.detector = detector or DetectorRuntime()  # how gateways run drift detectors
        self.drift = DriftHistory(db)
        self.gpus = gpus or []  # the GPUs of this machine replicas may be pinned to
        self.unconfined = unconfined  # why replicas could not be sandboxed here: none are made
        self.ray = ray  # (address, namespace): replicas on that Ray cluster's nodes
        self.sandbox = sandbox or SandboxPolicy()
        self.registry = registry
        self.root = home / "deployments"
        self.host = host
        self.tls = tls
        self.access = DeploymentAccess(db)
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._retries: dict[str, tuple[int, float]] = {}  # id → (restarts in a row, next try)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- requests ----------------------------------------------------------------------------
    def create(
        self,
        owner: str,
        name: str,
        model: str,
        ref: str,
        scaling: Scaling,
        port: int | None,
        *,
        public: bool = False,
        grpc_port: int | None = None,
        monitoring: Monitoring | None = None,
        code: Code | None = None,
    ) -> dict[str, Any]:
        code = (code or Code()).checked()
        if self.unconfined is not None:
            raise Conflict(
                f"this platform cannot sandbox serving replicas ({self.unconfined}), and will "
                "not run a model server with its rights; LOOM_ISOLATION=off accepts that"
            )
        scaling = scaling.checked(self._gpu_count())
        version = self.registry.version(owner, model, ref)
        _has_reference(version, monitoring)
        now = time.time()
        # One lock from the row to its gateway: the supervisor, seeing the row between the two,
        # started a gateway of its own, then this one a second (left running, known to none).
        with self._lock:
            with self.db.session() as session:
                taken = session.scalars(
                    select(Deployment).where(Deployment.owner_id == owner, Deployment.name == name)
                ).first()
                if taken is not None:
                    raise Conflict(f"a deployment named {name!r} exists; delete it or pick another")
                row = Deployment(
                    id=uuid.uuid4().hex,
                    owner_id=owner,
                    name=name,
                    model_name=model,
                    model_ref=ref,
                    model_version=version.version,
                    port=self._port(session, port),
                    created_at=now,
                    updated_at=now,
                    public=public,
                    monitoring=monitoring.as_dict() if monitoring and monitoring.active else None,
                    runtime=code.runtime,
                    pip=code.pip or None,
                    explainer=code.explainer,
                    **columns(scaling),
                )
                if isinstance(code.transformer, str):
                    row.transformer = store_transformer(self.registry.artifacts, code.transformer)
                session.add(row)
                session.flush()
                row.grpc_port = self._port(session, grpc_port, "grpc_port")
                with without_paths(f"deployment {name!r}: its model files could not be copied"):
                    self._materialize(row, version)
                    self._spec(row)  # its transformer and environments, checked before it is kept
            with without_paths(f"deployment {name!r} could not be started"):
                self._spawn(row)
        return self.view(row)

    def _gpu_count(self) -> int | None:
        """How many GPUs a replica may take; None on a Ray cluster, whose nodes Ray counts."""
        return None if self.ray else len(self.gpus)

    def _port(self, session: Session, wanted: int | None, what: str = "port") -> int:
        """A port no deployment has (for REST or gRPC): `wanted`, or a free one."""
        rows = session.execute(select(Deployment.port, Deployment.grpc_port)).all()
        used = {p for row in rows for p in row if p is not None}
        if wanted is not None and wanted in used:
            raise Conflict(f"{what} {wanted} is used by a deployment")
        port = wanted or free_port(self.host)
        while port in used:
            port = free_port(self.host)
        if wanted is not None and not _bindable(self.host, wanted):
            raise InvalidInput(f"{what}: {wanted} is in use on {self.host}", field=what)
        return port

    def all(self, owner: str) -> list[dict[str, Any]]:
        with self.db.session() as session:
            rows = session.scalars(
                select(Deployment).where(Deployment.owner_id == owner).order_by(Deployment.name)
            )
            return [self.view(row) for row in rows]

    def get(self, owner: str, name: str) -> dict[str, Any]:
        return self.view(self._row(owner, name))

    def update(
        self,
        owner: str,
        name: str,
        changes: dict[str, Any],
        ref: str | None,
        *,
        public: bool | None = None,
        canary: CanaryChange | None = None,
        monitoring: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """New scaling, batching or model version; the gateway rolls replicas over without
        dropping a request. Made public or private, it answers accordingly within a second.
        A canary serves another version to a share of requests, until promoted (it becomes
        the version served) or rolled back."""
        with self._lock, self.db.session() as session:
            row = self._row(owner, name, session)
            current = Scaling(**columns_of(row))
            if "min_replicas" in changes and "max_replicas" not in changes:
                wider = max(changes["min_replicas"], row.max_replicas)
                changes = {**changes, "max_replicas": wider}
            scaling = replace(current, **changes).checked(self._gpu_count())
            for key, value in columns(scaling).items():
                setattr(row, key, value)
            if ref is not None:
                version = self.registry.version(owner, row.model_name, ref)
                row.model_ref, row.model_version = ref, version.version
                with without_paths(f"deployment {name!r}: its model files could not be copied"):
                    self._materialize(row, version)
            if public is not None:
                row.public = public
            if monitoring is not None:
                changed = (Monitoring.of(row.monitoring) or Monitoring()).changed(monitoring)
                _has_reference(
                    self.registry.version(owner, row.model_name, str(row.model_version)), changed
                )
                row.monitoring = changed.as_dict() if changed.active else None
            if canary is not None:
                if ref is not None:
                    raise InvalidInput(
                        "version: roll out a version, or change the canary, not both at once",
                        field="version",
                    )
                self._canary(row, canary)
            row.updated_at = time.time()
        with without_paths(f"deployment {name!r} could not be updated"):
            self.access.sync(row, self.folder(row))
            self._write_spec(row)
        self._signal(row, signal.SIGHUP)
        return self.view(row)

    def _canary(self, row: Deployment, change: CanaryChange) -> None:
        def resolve(ref: str) -> ModelVersion:
            return self.registry.version(row.owner_id, row.model_name, ref)

        def materialize(version: ModelVersion) -> None:
            with without_paths(f"deployment {row.name!r}: the canary's files could not be copied"):
                self._materialize(row, version, version.version)

        apply_canary(row, change, resolve, materialize)

    def delete(self, owner: str, name: str, timeout_s: float = 60.0) -> None:
        """Drain and stop the gateway and its replicas, then forget the deployment."""
        with self._lock:
            row = self._row(owner, name)
            refuse_if_a_step(self, row)
            self._signal(row, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while self._alive(row) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._alive(row):
                self._signal(row, signal.SIGKILL)
            self._children.pop(row.id, None)
            self.access.forget(row)
            with self.db.session() as session:
                found = session.get(Deployment, row.id)
                if found is not None:
                    session.delete(found)
            shutil.rmtree(self.folder(row), ignore_errors=True)

    def using(self, owner: str, model: str, version: int | None = None) -> list[str]:
        """The deployments serving the model (or that version of it)."""
        with self.db.session() as session:
            query = select(Deployment).where(
                Deployment.owner_id == owner, Deployment.model_name == model
            )
            rows = session.scalars(query)
            return [
                r.name
                for r in rows
                if version is None or version in (r.model_version, r.canary_version)
            ]

    def folder_of(self, owner: str, name: str) -> Path:
        """The deployment's folder (its payload log), for its owner."""
        return self.folder(self._row(owner, name))

    def _row(self, owner: str, name: str, session: Session | None = None) -> Deployment:
        query = select(Deployment).where(Deployment.owner_id == owner, Deployment.name == name)
        found: Deployment | None
        if session is not None:
            found = session.scalars(query).first()
        else:
            with self.db.session() as own:
                found = own.scalars(query).first()
        if found is None:
            raise NotFound(f"no deployment {name!r}")
        return found

    # -- keys --------------------------------------------------------------------------------
    def create_key(self, owner: str, name: str, key_name: str) -> dict[str, Any]:
        """A key that calls this deployment (shown once); it works within a second."""
        row = self._row(owner, name)
        created = self.access.create(row, key_name)
        with without_paths(f"deployment {name!r}: its access rules could not be written"):
            self.access.sync(row, self.folder(row))
        return created

    def keys(self, owner: str, name: str) -> list[dict[str, Any]]:
        row = self._row(owner, name)
        return self.access.list(row, self.folder(row))

    def revoke_key(self, owner: str, name: str, key_id: str) -> None:
        """The key stops working within a second."""
        row = self._row(owner, name)
        self.access.revoke(row, key_id)
        with without_paths(f"deployment {name!r}: its access rules could not be written"):
            self.access.sync(row, self.folder(row))

    # -- what a deployment looks like --------------------------------------------------------
    def view(self, row: Deployment) -> dict[str, Any]:
        status = read_status(self.folder(row)) or {}
        pid = self._pid(row)
        alive = self._alive(row, pid)
        if status.get("pid") != pid:
            status = {}  # written by an earlier gateway
        fresh = time.time() - float(status.get("updated_at", 0)) < STALE_STATUS_S
        state = str(status.get("state", "starting")) if alive and fresh else "down"
        if alive and not status:
            state = "starting"
        scheme = "https" if self.tls else "http"
        endpoint = f"{scheme}://{_display(self.host)}:{row.port}"
        message = status.get("message") or ("" if alive else self._gateway_tail(row))
        grpc = f"{_display(self.host)}:{row.grpc_port}" if row.grpc_port else None
        view = described(row, status, state, redact_paths(message), endpoint, grpc)
        view["monitoring"] = (
            {**row.monitoring, "status": _monitor_status(status.get("monitoring"))}
            if row.monitoring
            else None
        )
        return view

    # -- processes ---------------------------------------------------------------------------
    def folder(self, row: Deployment) -> Path:
        return self.root / row.id

    def _materialize(
        self, row: Deployment, version: ModelVersion | None = None, number: int | None = None
    ) -> None:
        """The version's files (the one served, or `number`), copied into the deployment's
        folder (so that serving goes on whatever later happens to the registry)."""
        number = number or row.model_version
        target = self.folder(row) / f"model-v{number}"
        if target.is_dir() or row.graph:
            return
        if version is None:
            version = self.registry.version(row.owner_id, row.model_name, str(number))
        digests = {entry["path"]: entry["digest"] for entry in version.files}
        try:
            chosen = model_file(
                digests,
                lambda name: self._small(version.files, name),
                lambda name: zip_entries(self.registry.artifacts.path(digests[name])),
                row.runtime,
            )
        except NotServable as exc:
            raise InvalidInput(
                f"model {row.model_name!r} version {version.version}: {exc}", field="model"
            ) from exc
        check_version(chosen, code_of(row), on_ray=bool(self.ray))
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        for entry in version.files:
            destination = partial / entry["path"]
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.registry.artifacts.path(entry["digest"]), destination)
        environments_of(row, self.sources, partial)  # its requirements checked before kept
        partial.rename(target)

    def _small(self, files: list[dict[str, Any]], name: str) -> bytes:
        """A small file of a version (its MLmodel), or an empty one if it is not small."""
        entry = next(e for e in files if e["path"] == name)
        if int(entry.get("size") or 0) > MAX_MLMODEL:
            return b"\0" * (MAX_MLMODEL + 1)  # refused for its size, never read
        return self.registry.artifacts.get(entry["digest"])

    def _spec(self, row: Deployment) -> DeploymentSpec:
        model_dir = self.folder(row) / f"model-v{row.model_version}"
        canary = self.folder(row) / f"model-v{row.canary_version}" if row.canary_version else None
        transformer = transformer_dir(row, self.registry.artifacts, self.folder(row))
        served = [p for p in (model_dir, canary, Path(transformer) if transformer else None) if p]
        return DeploymentSpec(
            name=row.name,
            model_dir=str(model_dir),
            model_version=str(row.model_version),
            host=self.host,
            port=row.port,
            grpc_port=row.grpc_port,
            canary_model_dir=(
                str(self.folder(row) / f"model-v{row.canary_version}") if row.canary_version else ""
            ),
            canary_version=str(row.canary_version or ""),
            canary_percent=row.canary_percent or 0.0,
            certfile=self.tls.certfile if self.tls else "",
            keyfile=self.tls.keyfile if self.tls else "",
            sandbox=self.sandbox.replica_section(row.id),
            ray_address=self.ray[0] if self.ray else "",
            ray_namespace=self.ray[1] if self.ray else "loom",
            gpu_ids=[] if self.ray else list(self.gpus),
            monitoring=row.monitoring,
            monitor_python=self.detector.python,
            monitor_environment=self.detector.environment,
            monitor_start_timeout_s=self.detector.start_timeout_s,
            monitor_cpu_budget=self.detector.cpu_budget,
            runtime=row.runtime or "",
            explainer=row.explainer or "",
            transformer_dir=transformer,
            environments=environments_of(row, self.sources, *(p for p in served if p.is_dir())),
            graph=row.graph,
            graph_members=graph_members(self, row),
            proxy=self.proxy,
            proxy_cpus=list(self.proxy_cpus),
            **columns_of(row),
        )

    def _write_spec(self, row: Deployment) -> None:
        self._spec(row).write(self.folder(row))

    def _spawn(self, row: Deployment) -> None:
        folder = self.folder(row)
        folder.mkdir(parents=True, exist_ok=True)
        self.access.sync(row, folder)
        self._write_spec(row)
        (folder / PID).unlink(missing_ok=True)
        (folder / STATUS).unlink(missing_ok=True)  # the last gateway's: no longer true
        with (folder / "gateway.log").open("ab") as out:
            child = subprocess.Popen(
                [sys.executable, "-m", "loom.serving.gateway", str(folder)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=folder,
                env=self._gateway_env(),
                start_new_session=True,
            )
        write_pid(folder, child.pid)
        self._children[row.id] = child

    def _gateway_env(self) -> dict[str, str]:
        """The allow-list, and Ray's own settings when its replicas are on a Ray cluster (the
        gateway is the platform's, not the user's)."""
        env = serving_env()
        if self.ray:
            env.update({k: v for k, v in os.environ.items() if k.startswith("RAY_")})
        return env

    def _pid(self, row: Deployment) -> int | None:
        try:
            return int((self.folder(row) / PID).read_text())
        except (OSError, ValueError):
            return None

    def _alive(self, row: Deployment, pid: int | None = None) -> bool:
        """Whether the gateway (`pid`, else the one in its pid file) is running."""
        child = self._children.get(row.id)
        if child is not None and child.poll() is not None:
            self._children.pop(row.id, None)  # reaped
            return False
        pid = pid if pid is not None else self._pid(row)
        if pid is None:
            return False
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return b"loom.serving.gateway" in command and str(self.folder(row)).encode() in command

    def _signal(self, row: Deployment, sig: signal.Signals) -> None:
        pid = self._pid(row)
        if pid is not None and self._alive(row, pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _gateway_tail(self, row: Deployment) -> str:
        try:
            lines = (self.folder(row) / "gateway.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(line for line in lines[-3:] if line.strip())

    # -- supervision -------------------------------------------------------------------------
    def start(self) -> None:
        """Start gateways that are not running, then keep them running (again after a stop)."""
        self._stop.clear()
        self._restart_if_changed()
        self.supervise()
        self._thread = threading.Thread(target=self._loop, name="loom-deployments", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop supervising; the gateways go on serving."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(SUPERVISE_S):
            try:
                self.supervise()
            except Exception:  # the supervisor must not die of one bad deployment
                log.exception("deployment supervision failed")

    def supervise(self) -> None:
        with self.db.session() as session:
            rows = list(session.scalars(select(Deployment)))
        now = time.monotonic()
        for row in rows:
            self._sync_access(row)
            if row.monitoring:
                self._take_drift(row)
            with self._lock:
                if self._alive(row):
                    self._retries.pop(row.id, None)
                    continue
                tries, next_at = self._retries.get(row.id, (0, 0.0))
                if self._stop.is_set() or now < next_at or not self._exists(row.id):
                    continue
                self._retries[row.id] = (tries + 1, now + min(60.0, 2.0**tries))
                log.warning("deployment %s: its gateway is not running; starting it", row.name)
                try:
                    self._materialize(row)
                    self._spawn(row)
                except Exception as exc:
                    log.warning("deployment %s could not be started: %s", row.name, exc)

    def _restart_if_changed(self) -> None:
        """A gateway started under other platform settings (the address it listens on, HTTPS,
        or how its replicas are confined) is stopped, to be started again as the platform now
        runs: after an upgrade or a change of settings no replica stays unconfined."""
        with self.db.session() as session:
            rows = list(session.scalars(select(Deployment)))
            for row in rows:  # made before deployments had a gRPC endpoint
                if row.grpc_port is None:
                    row.grpc_port = self._port(session, None, "grpc_port")
                    session.flush()
        for row in rows:
            try:
                had = DeploymentSpec.read(self.folder(row))
            except (OSError, ValueError, TypeError):
                continue
            wanted = self._spec(row)
            if _platform_part(had) != _platform_part(wanted):
                log.warning("deployment %s: restarting its gateway for new settings", row.name)
                self._write_spec(row)
                self._signal(row, signal.SIGTERM)

    def _take_drift(self, row: Deployment) -> None:
        try:
            self.drift.ingest(row, self.folder(row))
        except Exception:  # one deployment's bad file is not every one's
            log.exception("deployment %s: drift windows not taken in", row.name)

    def _sync_access(self, row: Deployment) -> None:
        """Keys or the owner's tokens may have changed since the last tick."""
        if not self.folder(row).is_dir():
            return
        try:
            self.access.sync(row, self.folder(row))
        except OSError as exc:
            log.warning("deployment %s: access rules not written: %s", row.name, exc.strerror)

    def _exists(self, deployment_id: str) -> bool:
        with self.db.session() as session:
            return session.get(Deployment, deployment_id) is not None


def _monitor_status(status: dict[str, Any] | None) -> dict[str, Any] | None:
    """The detector's status as its gateway wrote it, its message without the server's paths
    (it may quote the detector's log)."""
    if not status:
        return status
    return {**status, "message": redact_paths(str(status.get("message") or ""))}


def _has_reference(version: ModelVersion, monitoring: Monitoring | None) -> None:
    """Drift and outliers are judged against the version's reference data: refuse to watch a
    version that has none, saying how to give it one."""
    if monitoring is None or not monitoring.detects:
        return
    if not any(entry["path"] == REFERENCE_FILE for entry in version.files):
        what = "drift" if monitoring.drift else "outliers"
        raise InvalidInput(
            f"monitoring.{what}: version {version.version} has no reference data "
            f"({REFERENCE_FILE}); call tracking.save_reference(X) in the training script",
            field=f"monitoring.{what}",
        )


@contextlib.contextmanager
def without_paths(what: str) -> Iterator[None]:
    """An OSError as a PlatformError that says what failed and why, but not the server's paths
    (its message names them); the log keeps the whole error."""
    try:
        yield
    except OSError as exc:
        log.warning("%s: %s", what, exc)
        raise PlatformError(f"{what}: {exc.strerror or type(exc).__name__}") from exc


def _display(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def _bindable(host: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _platform_part(spec: DeploymentSpec) -> tuple[object, ...]:
    """What of a gateway's spec the platform's settings decide, rather than the deployment."""
    return (
        spec.host, spec.grpc_port, spec.certfile, spec.keyfile, spec.sandbox, spec.gpu_ids,
        spec.proxy, spec.proxy_cpus,
    )  # fmt: skip
