"""A job's folders under `LOOM_HOME/jobs/<id>/` and the spec its learners' wrappers read."""

from __future__ import annotations

import re
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from loom.domain.learner_env import MPI, Gang, framework_env, hostfile
from loom.domain.manifest import PUBLIC_CONNECTION_KEYS, DataStore, DataStoreType, Manifest

LOCAL_TYPES = {DataStoreType.LOCAL, DataStoreType.MOUNT_VOLUME, DataStoreType.HOST_MOUNT}
OBJECT_TYPES = {DataStoreType.S3_DATASTORE, DataStoreType.MOUNT_COS}


class Workspace:
    """Where one job lives on this machine."""

    def __init__(self, jobs_dir: Path, job_id: str) -> None:
        self.root = jobs_dir / job_id
        self.job_id = job_id

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    def learner_dir(self, attempt: int, learner: int) -> Path:
        return self.root / "learners" / f"learner-{learner}" / f"attempt-{attempt}"

    def dirs(self, learner: int, manifest: Manifest) -> dict[str, str]:
        """FfDL's folders, per learner where FfDL had them per learner."""
        data = self.root / "data"
        for store in manifest.data_stores:
            folder = self.store_data_dir(store)
            if folder is not None:
                data = folder
                break
        return {
            "DATA_DIR": str(data),
            "MODEL_DIR": str(self.root / "learners" / f"learner-{learner}" / "model"),
            "RESULT_DIR": str(self.results),
            "LOG_DIR": str(self.root / "logs" / f"learner-{learner}"),
            "CHECKPOINT_DIR": str(self.checkpoints),
            "JOB_STATE_DIR": str(self.state),
        }

    @property
    def state(self) -> Path:
        """Shared by the job's learners; not the job's root, which holds the wrappers' files."""
        return self.root / "state"

    def store_data_dir(self, store: DataStore) -> Path | None:
        """Where a store's training data is: its host folder, or a download folder."""
        if store.type in OBJECT_TYPES:
            return self.root / "data" / store.id if store.training_data else None
        return _store_data_dir(store)

    def write_hostfile(self, gang: Gang) -> None:
        """Horovod's / Open MPI's hostfile, shared by the gang's learners."""
        self.state.mkdir(parents=True, exist_ok=True)
        (self.state / "hostfile").write_text(hostfile(gang))
        (self.state / "hostfile").chmod(0o644)  # read by the job's uid, whatever the umask

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def host_path(store: DataStore) -> Path | None:
    """The host folder of a local / host-mount store; None for any other."""
    if store.type not in LOCAL_TYPES and store.connection.get("type") != "host_mount":
        return None
    path = store.connection.get("path")
    return Path(path).expanduser() if path else None


def _store_data_dir(store: DataStore) -> Path | None:
    base = host_path(store)
    if base is None or store.training_data is None:
        return base
    return base / store.training_data.container


def store_specs(workspace: Workspace, manifest: Manifest, job_id: str) -> list[dict[str, Any]]:
    """What the wrapper needs to know of the data stores; no secret ever goes in here."""
    specs = []
    for store in manifest.data_stores:
        base = host_path(store)
        spec: dict[str, Any] = {"id": store.id, "type": store.type.value}
        if base is not None:
            spec["type"] = "local"
            spec["data_dir"] = str(_store_data_dir(store))
            if store.training_results is not None:
                spec["results_dir"] = str(base / store.training_results.container / job_id)
        elif store.type in OBJECT_TYPES:
            spec.update(
                type="s3",
                endpoint=store.connection.get("auth_url") or store.connection.get("endpoint"),
                region=store.connection.get("region"),
            )
            if store.training_data is not None:
                spec["bucket"] = store.training_data.container
                spec["download_dir"] = str(workspace.store_data_dir(store))
            if store.training_results is not None:
                spec["results_bucket"] = store.training_results.container
        specs.append(spec)
    return specs


def store_secrets(manifest: Manifest) -> dict[str, dict[str, str]]:
    """Each store's credentials, for the wrapper's standard input and nothing else."""
    return {
        store.id: {k: v for k, v in store.connection.items() if k not in PUBLIC_CONNECTION_KEYS}
        for store in manifest.data_stores
        if store.secrets
    }


CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def api_certificates(tls: tuple[Path, Path] | None) -> str | None:
    """What a learner trusts to reach an HTTPS API: the certificates of the platform's own
    chain, sent as text in its spec (no shared disk), never the private key that a combined PEM
    file may also hold."""
    if tls is None:
        return None
    return "\n".join(CERTIFICATE.findall(tls[0].read_text())) or None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def new_gang(learners: int, host: str = "127.0.0.1") -> Gang:
    """Ports for a gang to meet on: a coordinator's and one per learner."""
    return Gang(host, free_port(), tuple(free_port() for _ in range(learners)))


def learner_spec(
    *,
    workspace: Workspace,
    manifest: Manifest,
    job_id: str,
    attempt: int,
    learner: int,
    code_zip: Path,
    api_url: str,
    api_ca: str | None,
    home: Path,
    retry_s: float,
    halt_grace_s: float,
    gang: Gang,
    devices: list[int],
) -> dict[str, Any]:
    folder = workspace.learner_dir(attempt, learner)
    options = manifest.framework_options
    env = {
        "TRAINING_ID": job_id,
        "LEARNER_ID": str(learner),
        "NUM_LEARNERS": str(manifest.learners),
        "GPU_COUNT": str(len(devices)),
        # The GPUs this learner was given, and only those; none for a CPU job.
        "CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in devices),
        "TRAINING_ATTEMPT": str(attempt),
        **framework_env(
            manifest.framework.name,
            gang,
            learner - 1,
            parameter_servers=int(options.get("parameter_servers", 0)),
            replicas=options.get("replicas"),
        ),
    }
    for store in manifest.data_stores:
        store_dir = workspace.store_data_dir(store)
        if store_dir is not None:
            env[f"DATA_DIR_{re.sub(r'[^A-Za-z0-9]', '_', store.id).upper()}"] = str(store_dir)
    if manifest.framework.name.lower() in MPI:
        env["HOROVOD_HOSTFILE"] = env["OMPI_HOSTFILE"] = str(workspace.state / "hostfile")
    return {
        "job_id": job_id,
        "attempt": attempt,
        "learner_id": learner,
        "command": manifest.framework.command,
        "code_zip": str(code_zip),
        "dirs": workspace.dirs(learner, manifest),
        "env": env,
        "data_stores": store_specs(workspace, manifest, job_id),
        "metrics": (
            manifest.evaluation_metrics.model_dump(mode="json", by_alias=True, exclude_none=True)
            if manifest.evaluation_metrics is not None
            else None
        ),
        "api_url": api_url,
        "api_ca": api_ca,
        "home": str(home),
        "python": sys.executable,
        "retry_s": retry_s,
        "halt_grace_s": halt_grace_s,
        "memory_limit": manifest.memory,
        "cpus": manifest.cpus,
        "storage_limit": manifest.storage,
        "user_env": dict(manifest.environment.env) if manifest.environment else {},
        "status_file": str(folder / "status.json"),
        "spool_file": str(folder / "spool.jsonl"),
    }
