"""Kubeflow's replica layouts: which learner of a gang is which replica (a TFJob's Chief and
Workers, a PyTorchJob's Master and Workers, ...), and what each operator sets for it.

A job made from a Kubeflow object carries its layout in `framework_options.replicas`: the
object's kind (`style`), its replica types in order with their counts (learner 1 is the first
replica of the first type), and a few of the object's settings. The variables follow Kubeflow's
Training Operator v1 and Trainer v2 (their `envvar.go`s and plugins), with the gang's addresses
in place of the pods' DNS names. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loom.domain.learner_env import Gang, jax_env

STYLES = ("TFJob", "PyTorchJob", "MPIJob", "XGBoostJob", "JAXJob", "PaddleJob", "TrainJob")
# Trainer v2's ML policies (a runtime's `mlPolicy`): what the trainer's nodes are given.
TRAINJOB_POLICIES = ("torch", "jax", "xgboost", "mpi", "plain")


@dataclass(frozen=True)
class Layout:
    style: str  # one of STYLES
    replicas: tuple[tuple[str, int], ...]  # (replica type, count), learner order
    job: str = ""  # the object's name
    policy: str = "plain"  # TrainJob: its runtime's ML policy
    nproc_per_node: str | None = None  # PyTorchJob's nprocPerNode, TrainJob's numProcPerNode

    @property
    def size(self) -> int:
        return sum(count for _, count in self.replicas)

    def role(self, rank: int) -> tuple[str, int]:
        """Learner `rank`'s (0-based) replica type and its index among that type."""
        first = 0
        for kind, count in self.replicas:
            if rank < first + count:
                return kind, rank - first
            first += count
        raise ValueError(f"rank {rank} is past the layout's {self.size} replicas")

    def ranks(self, kind: str) -> list[int]:
        return [r for r in range(self.size) if self.role(r)[0] == kind]

    def as_options(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "style": self.style,
            "types": [[kind, count] for kind, count in self.replicas],
            "job": self.job,
            "policy": self.policy,
        }
        if self.nproc_per_node is not None:
            found["nproc_per_node"] = self.nproc_per_node
        return found


def layout_of(options: Mapping[str, Any] | None) -> Layout | None:
    """The layout in a manifest's `framework_options.replicas`; ValueError saying what is wrong."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise ValueError("replicas must be a mapping: style, types, job")
    style = options.get("style")
    if style not in STYLES:
        raise ValueError(f"replicas.style {style!r} is not one of {', '.join(STYLES)}")
    types = options.get("types")
    if not isinstance(types, list) or not types:
        raise ValueError("replicas.types must be a list of [type, count]")
    replicas = []
    for item in types:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not isinstance(item[0], str)
            or not isinstance(item[1], int)
            or item[1] < 1
        ):
            raise ValueError(f"replicas.types: {item!r} is not [type, count ≥ 1]")
        replicas.append((item[0], item[1]))
    policy = str(options.get("policy") or "plain")
    if policy not in TRAINJOB_POLICIES:
        raise ValueError(f"replicas.policy {policy!r} is not one of {', '.join(TRAINJOB_POLICIES)}")
    nproc = options.get("nproc_per_node")
    return Layout(
        style,
        tuple(replicas),
        str(options.get("job") or ""),
        policy,
        None if nproc is None else str(nproc),
    )


def replica_env(layout: Layout, gang: Gang, rank: int) -> dict[str, str]:
    """What the object's operator would set for learner `rank` (0-based)."""
    env = {"PYTHONUNBUFFERED": "1"}
    style = layout.style
    if style == "TFJob":
        env.update(_tensorflow(layout, gang, rank))
    elif style == "PyTorchJob":
        env.update(_pytorch(layout, gang, rank))
    elif style == "XGBoostJob":
        env.update(_xgboost(layout, gang, rank))
    elif style == "JAXJob":
        env.update(_jax(gang, rank))
    elif style == "PaddleJob":
        env.update(_paddle(layout, gang, rank))
    elif style == "MPIJob":
        env.update(_mpi(gang, rank))
    elif style == "TrainJob":
        env.update(_trainjob(layout, gang, rank))
    return env


def _tensorflow(layout: Layout, gang: Gang, rank: int) -> dict[str, str]:
    """TF_CONFIG with every replica type's addresses, lower-cased as the operator writes them;
    none for a job of one replica (the operator's `isDistributed`)."""
    if layout.size < 2:
        return {}
    cluster = {
        kind.lower(): [gang.address(r) for r in layout.ranks(kind)] for kind, _ in layout.replicas
    }
    kind, index = layout.role(rank)
    config = {
        "cluster": cluster,
        "task": {"type": kind.lower(), "index": index},
        "environment": "cloud",
    }
    return {"TF_CONFIG": json.dumps(config)}


def _pytorch(layout: Layout, gang: Gang, rank: int) -> dict[str, str]:
    """The Master is rank 0 and the Workers follow it; torchrun's `PET_` variables too."""
    nproc = layout.nproc_per_node
    per_node = int(nproc) if nproc is not None and nproc.isdigit() else 1
    env = {
        "MASTER_ADDR": gang.host,
        "MASTER_PORT": str(gang.coordinator_port),
        "WORLD_SIZE": str(layout.size * per_node),
        "RANK": str(rank),
        "PET_NODE_RANK": str(rank),
        "PET_NNODES": str(layout.size),
        "PET_MASTER_ADDR": gang.host,
        "PET_MASTER_PORT": str(gang.coordinator_port),
    }
    if nproc is not None:
        env["PET_NPROC_PER_NODE"] = nproc
    return env


def _xgboost(layout: Layout, gang: Gang, rank: int) -> dict[str, str]:
    """Rabit's tracker on the Master; LightGBM's worker list. Learners on one machine share an
    address, so each worker is listed with its own port (the operator lists names and one
    port)."""
    workers = [r for r in range(layout.size) if layout.role(r)[0] != "Master"]
    return {
        "MASTER_ADDR": gang.host,
        "MASTER_PORT": str(gang.coordinator_port),
        "WORLD_SIZE": str(layout.size),
        "RANK": str(rank),
        "WORKER_PORT": str(gang.learner_ports[rank]),
        "WORKER_ADDRS": ",".join(gang.address(r) for r in workers),
    }


def _jax(gang: Gang, rank: int) -> dict[str, str]:
    return {
        "COORDINATOR_ADDRESS": gang.host,
        "COORDINATOR_PORT": str(gang.coordinator_port),
        "NUM_PROCESSES": str(gang.size),
        "PROCESS_ID": str(rank),
    }


def _paddle(layout: Layout, gang: Gang, rank: int) -> dict[str, str]:
    """Collective mode (Workers only) meets at worker 0; PS mode at the Master."""
    env = {
        "PADDLE_MASTER": f"{gang.host}:{gang.coordinator_port}",
        "PADDLE_NNODES": str(layout.size),
        "PADDLE_JOB_ID": layout.job,
    }
    if any(kind == "Master" for kind, _ in layout.replicas):
        kind, _index = layout.role(rank)
        env["PADDLE_SERVER_NUM" if kind == "Master" else "PADDLE_TRAINER_NUM"] = "1"
    return env


def _mpi(gang: Gang, rank: int) -> dict[str, str]:
    """What `mpirun` gives each of its processes (one per worker slot)."""
    return {
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": str(gang.size),
        "OMPI_COMM_WORLD_LOCAL_RANK": "0",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
        "PMIX_RANK": str(rank),
    }


def _trainjob(layout: Layout, gang: Gang, rank: int) -> dict[str, str]:
    """Trainer v2's plugins, by the runtime's ML policy."""
    if layout.policy == "torch":
        return {
            "PET_NNODES": str(layout.size),
            "PET_NPROC_PER_NODE": layout.nproc_per_node or "1",
            "PET_NODE_RANK": str(rank),
            "PET_MASTER_ADDR": gang.host,
            "PET_MASTER_PORT": str(gang.coordinator_port),
        }
    if layout.policy == "xgboost":
        return {
            "DMLC_TRACKER_URI": gang.host,
            "DMLC_TRACKER_PORT": str(gang.coordinator_port),
            "DMLC_TASK_ID": str(rank),
            "DMLC_NUM_WORKER": str(layout.size),
        }
    if layout.policy == "jax":
        return jax_env(gang, rank)
    if layout.policy == "mpi":
        return _mpi(gang, rank)
    return {}
