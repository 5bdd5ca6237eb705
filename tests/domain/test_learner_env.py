"""What each framework's learners see, as pure functions."""

from __future__ import annotations

import json

from loom.domain.learner_env import Gang, framework_env, hostfile

GANG = Gang("127.0.0.1", 29500, (30001, 30002, 30003))


def test_pytorch_variables_for_every_framework() -> None:
    """torchrun's variables are set for any framework, rank 0-based."""
    env = framework_env("custom", GANG, 2)
    assert env["MASTER_ADDR"] == "127.0.0.1"
    assert env["MASTER_PORT"] == "29500"
    assert (env["WORLD_SIZE"], env["RANK"], env["LOCAL_RANK"]) == ("3", "2", "0")
    assert env["GROUP_RANK"] == "2"  # each learner is a node with only its own GPUs
    assert "TF_CONFIG" not in env


def test_tf_config_multi_worker() -> None:
    """TensorFlow's TF_CONFIG lists every worker and names this one's index."""
    config = json.loads(framework_env("tensorflow", GANG, 1)["TF_CONFIG"])
    assert config["cluster"] == {
        "worker": ["127.0.0.1:30001", "127.0.0.1:30002", "127.0.0.1:30003"]
    }
    assert config["task"] == {"type": "worker", "index": 1}


def test_tf_config_parameter_servers() -> None:
    """With parameter servers, FfDL's layout: the first learners are ps, the rest workers."""
    first = json.loads(framework_env("tensorflow", GANG, 0, parameter_servers=1)["TF_CONFIG"])
    last = json.loads(framework_env("tensorflow", GANG, 2, parameter_servers=1)["TF_CONFIG"])
    assert first["cluster"]["ps"] == ["127.0.0.1:30001"]
    assert first["task"] == {"type": "ps", "index": 0}
    assert last["task"] == {"type": "worker", "index": 1}


def test_jax_and_horovod() -> None:
    """JAX's coordinator variables and Horovod's ranks; a hostfile with all slots."""
    jax = framework_env("jax", GANG, 1)
    assert jax["JAX_COORDINATOR_ADDRESS"] == "127.0.0.1:29500"
    assert (jax["JAX_NUM_PROCESSES"], jax["JAX_PROCESS_ID"]) == ("3", "1")
    horovod = framework_env("horovod", GANG, 0)
    assert (horovod["HOROVOD_RANK"], horovod["HOROVOD_SIZE"]) == ("0", "3")
    assert hostfile(GANG) == "127.0.0.1 slots=3\n"


SPREAD = Gang("10.0.0.1", 29500, (30001, 30002, 30003), ("10.0.0.1", "10.0.0.2", "10.0.0.1"))


def test_a_gang_over_several_machines() -> None:
    """On a cluster each learner listens on its own machine: TF_CONFIG names each one's address,
    MASTER_ADDR and JAX's coordinator are rank 0's, the hostfile counts slots per machine."""
    env = framework_env("tensorflow", SPREAD, 1)
    assert json.loads(env["TF_CONFIG"])["cluster"]["worker"] == [
        "10.0.0.1:30001",
        "10.0.0.2:30002",
        "10.0.0.1:30003",
    ]
    assert env["MASTER_ADDR"] == "10.0.0.1"
    assert framework_env("jax", SPREAD, 2)["JAX_COORDINATOR_ADDRESS"] == "10.0.0.1:29500"
    assert hostfile(SPREAD) == "10.0.0.1 slots=2\n10.0.0.2 slots=1\n"
