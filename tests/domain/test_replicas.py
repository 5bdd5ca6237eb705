"""What each Kubeflow operator sets for each replica, as pure functions of the layout and the
gang: the learners' order is the operator's rank order."""

from __future__ import annotations

import json

import pytest

from loom.domain.learner_env import Gang, framework_env
from loom.domain.replicas import Layout, layout_of, replica_env

GANG = Gang("10.0.0.1", 29500, (4001, 4002, 4003), ("10.0.0.1", "10.0.0.2", "10.0.0.3"))


def test_tf_config_names_every_replica_type_and_each_learners_task() -> None:
    """A TFJob's Chief, PS and Worker: one cluster of lower-cased types, each learner's task
    its type and index, the operator's `environment: cloud`."""
    layout = Layout("TFJob", (("Chief", 1), ("PS", 1), ("Worker", 1)), "tf")
    configs = [json.loads(replica_env(layout, GANG, r)["TF_CONFIG"]) for r in range(3)]
    assert configs[0]["cluster"] == {
        "chief": ["10.0.0.1:4001"],
        "ps": ["10.0.0.2:4002"],
        "worker": ["10.0.0.3:4003"],
    }
    assert [c["task"] for c in configs] == [
        {"type": "chief", "index": 0},
        {"type": "ps", "index": 0},
        {"type": "worker", "index": 0},
    ]
    assert configs[2]["environment"] == "cloud"


def test_a_single_replica_tfjob_gets_no_tf_config() -> None:
    """The operator sets TF_CONFIG only for a distributed job; Loom's own is taken away too."""
    one = Gang("h", 1, (2,))
    layout = {"style": "TFJob", "types": [["Worker", 1]], "job": "tf"}
    assert "TF_CONFIG" not in framework_env("tensorflow", one, 0, replicas=layout)


@pytest.mark.parametrize(
    ("style", "types", "rank", "expected"),
    [
        ("PyTorchJob", [["Master", 1], ["Worker", 2]], 2, {"RANK": "2", "WORLD_SIZE": "3"}),
        ("XGBoostJob", [["Master", 1], ["Worker", 2]], 1, {"RANK": "1", "WORKER_PORT": "4002"}),
        ("JAXJob", [["Worker", 3]], 2, {"PROCESS_ID": "2", "NUM_PROCESSES": "3"}),
        ("PaddleJob", [["Master", 1], ["Worker", 2]], 0, {"PADDLE_SERVER_NUM": "1"}),
        ("MPIJob", [["Worker", 3]], 1, {"OMPI_COMM_WORLD_RANK": "1"}),
    ],
)
def test_each_operator_sets_its_own_variables(
    style: str, types: list[list[object]], rank: int, expected: dict[str, str]
) -> None:
    """Each kind's variables, by rank (the Master first, then the Workers)."""
    env = framework_env("python", GANG, rank, replicas={"style": style, "types": types})
    assert expected.items() <= env.items()
    assert env["PYTHONUNBUFFERED"] == "1"


def test_a_trainjobs_runtime_policy_chooses_its_variables() -> None:
    """Trainer v2: torch gives torchrun's PET_ variables, xgboost Rabit's tracker."""
    torch = Layout("TrainJob", (("node", 3),), "t", "torch", "2")
    env = replica_env(torch, GANG, 1)
    assert env["PET_NNODES"] == "3" and env["PET_NODE_RANK"] == "1"
    assert env["PET_NPROC_PER_NODE"] == "2" and env["PET_MASTER_ADDR"] == "10.0.0.1"
    xgboost = replica_env(Layout("TrainJob", (("node", 3),), "t", "xgboost"), GANG, 2)
    assert xgboost["DMLC_TASK_ID"] == "2" and xgboost["DMLC_NUM_WORKER"] == "3"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"style": "Nope", "types": [["Worker", 1]]}, "style"),
        ({"style": "TFJob", "types": []}, "types"),
        ({"style": "TFJob", "types": [["Worker", 0]]}, "count"),
        ({"style": "TrainJob", "types": [["node", 1]], "policy": "flux"}, "policy"),
    ],
)
def test_a_bad_layout_is_refused(options: dict[str, object], words: str) -> None:
    """A manifest's layout that is not one is refused, saying which part."""
    with pytest.raises(ValueError, match=words):
        layout_of(options)
