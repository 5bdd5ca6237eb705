"""What each learner of a gang sees, per framework: what that framework's own launcher sets.

Pure: the lifecycle gives the learner's rank and the ports it reserved; nothing here does I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

TENSORFLOW = frozenset({"tensorflow", "tf", "keras"})
JAX = frozenset({"jax", "flax"})
MPI = frozenset({"horovod", "mpi", "openmpi"})


@dataclass(frozen=True)
class Gang:
    """Where a job's learners meet: one address, a coordinator port, one port per learner."""

    host: str
    coordinator_port: int
    learner_ports: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.learner_ports)


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
    addresses = [f"{gang.host}:{port}" for port in gang.learner_ports]
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


def hostfile(gang: Gang, slots_per_host: int) -> str:
    """An Open MPI / Horovod hostfile: every learner of this gang on one host."""
    return f"{gang.host} slots={slots_per_host}\n"


def framework_env(
    framework: str, gang: Gang, rank: int, *, parameter_servers: int = 0
) -> dict[str, str]:
    """PyTorch's variables for every job (harmless elsewhere, and many tools read them), plus
    the framework's own: TF_CONFIG, JAX's, or Horovod's."""
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
