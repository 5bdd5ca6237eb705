"""What each learner of a gang sees, per framework: what that framework's own launcher sets.

Pure: the lifecycle gives the learner's rank and the ports it reserved; nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TENSORFLOW = frozenset({"tensorflow", "tf", "keras"})
JAX = frozenset({"jax", "flax"})
MPI = frozenset({"horovod", "mpi", "openmpi"})


@dataclass(frozen=True)
class Gang:
    """Where a job's learners meet: rank 0's address and a coordinator port there, one port per
    learner, and each learner's own address when they are on several machines."""

    host: str
    coordinator_port: int
    learner_ports: tuple[int, ...]
    hosts: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.learner_ports)

    def address(self, rank: int) -> str:
        """Where learner `rank` listens: its machine's address and its port."""
        host = self.hosts[rank] if self.hosts else self.host
        return f"{host}:{self.learner_ports[rank]}"


def pytorch_env(gang: Gang, rank: int) -> dict[str, str]:
    """torchrun's variables: `init_process_group("env://")` works as it is. Each learner is
    its own node with its own devices (CUDA_VISIBLE_DEVICES holds only its GPUs), so its local
    rank is 0 and `torch.cuda.set_device(LOCAL_RANK)` picks its first GPU."""
    return {
        "MASTER_ADDR": gang.host,
        "MASTER_PORT": str(gang.coordinator_port),
        "WORLD_SIZE": str(gang.size),
        "RANK": str(rank),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank),
        "NODE_RANK": str(rank),
    }


def tf_config(gang: Gang, rank: int, parameter_servers: int = 0) -> str:
    """TF_CONFIG for MultiWorkerMirroredStrategy, or FfDL's parameter-server layout when
    `parameter_servers` > 0: the first learners are `ps`, the rest `worker`."""
    addresses = [gang.address(rank) for rank in range(gang.size)]
    if parameter_servers <= 0:
        cluster = {"worker": addresses}
        task = {"type": "worker", "index": rank}
    else:
        cluster = {"ps": addresses[:parameter_servers], "worker": addresses[parameter_servers:]}
        is_ps = rank < parameter_servers
        index = rank if is_ps else rank - parameter_servers
        task = {"type": "ps" if is_ps else "worker", "index": index}
    return json.dumps({"cluster": cluster, "task": task})


def jax_env(gang: Gang, rank: int) -> dict[str, str]:
    """What `jax.distributed.initialize()` reads."""
    return {
        "JAX_COORDINATOR_ADDRESS": f"{gang.host}:{gang.coordinator_port}",
        "JAX_NUM_PROCESSES": str(gang.size),
        "JAX_PROCESS_ID": str(rank),
    }


def hostfile(gang: Gang) -> str:
    """An Open MPI / Horovod hostfile: each machine of the gang, with one slot per learner
    there."""
    slots: dict[str, int] = {}
    for host in gang.hosts or (gang.host,) * gang.size:
        slots[host] = slots.get(host, 0) + 1
    return "".join(f"{host} slots={count}\n" for host, count in slots.items())


def framework_env(
    framework: str,
    gang: Gang,
    rank: int,
    *,
    parameter_servers: int = 0,
    replicas: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """PyTorch's variables for every job (harmless elsewhere, and many tools read them), plus
    the framework's own: TF_CONFIG, JAX's, or Horovod's; for a job made from a Kubeflow object,
    what its operator sets for each replica (`replicas`: `framework_options.replicas`)."""
    env = _framework_env(framework, gang, rank, parameter_servers)
    if replicas is not None:
        from loom.domain.replicas import layout_of, replica_env  # it builds on this module

        layout = layout_of(replicas)
        assert layout is not None
        if layout.style == "TFJob":
            env.pop("TF_CONFIG", None)  # the operator's own, or none for a single replica
        env.update(replica_env(layout, gang, rank))
    return env


def _framework_env(framework: str, gang: Gang, rank: int, parameter_servers: int) -> dict[str, str]:
    env = pytorch_env(gang, rank)
    name = framework.lower()
    if name in TENSORFLOW:
        env["TF_CONFIG"] = tf_config(gang, rank, parameter_servers)
    if name in JAX:
        env.update(jax_env(gang, rank))
    if name in MPI:
        env.update(
            {
                "HOROVOD_RANK": str(rank),
                "HOROVOD_SIZE": str(gang.size),
                "HOROVOD_LOCAL_RANK": "0",
                "HOROVOD_LOCAL_SIZE": "1",
                "OMPI_COMM_WORLD_RANK": str(rank),
                "OMPI_COMM_WORLD_SIZE": str(gang.size),
            }
        )
    return env
