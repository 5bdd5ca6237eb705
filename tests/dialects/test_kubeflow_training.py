"""Kubeflow's training kinds applied unchanged to a real platform: each becomes one Loom job
whose learners get what the kind's operator sets, runs to success, and reads back the Kubeflow
way; a PyTorchJob's Master and Worker all-reduce over gloo; a TFJob's Chief and Worker get the
TF_CONFIG the operator writes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder

pytestmark = pytest.mark.integration

CODE = Path(__file__).parent / "kubeflow_code"
SMALL = "resources: {limits: {cpu: 250m, memory: 512Mi}}"


def replica(kind: str, count: int, command: str, container: str, extra: str = "") -> str:
    return f"""
    {kind}:
      replicas: {count}
      restartPolicy: Never
      template:
        spec:
          containers:
          - name: {container}
            image: ghcr.io/example/trainer:1.0
            command: {command}
            {SMALL}
            {extra}"""


SHOW = "[python3, /opt/app/show_env.py]"
ALLREDUCE = "[python3, /opt/app/allreduce.py]"
CHIEF = "env: [{name: ROLE, value: chief}]"
WORKER = "env: [{name: ROLE, value: worker}]"
TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: trainjob}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    command: [python3, show_env.py]
    resourcesPerNode: {limits: {cpu: 250m, memory: 512Mi}}
"""
JOBS = f"""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: allreduce}}
spec:
  pytorchReplicaSpecs:{replica("Master", 1, ALLREDUCE, "pytorch")}{
    replica("Worker", 1, ALLREDUCE, "pytorch")
}
---
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {{name: tfconfig}}
spec:
  tfReplicaSpecs:{replica("Chief", 1, SHOW, "tensorflow", CHIEF)}{
    replica("Worker", 1, SHOW, "tensorflow", WORKER)
}
---
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {{name: jax}}
spec:
  jaxReplicaSpecs:{replica("Worker", 2, SHOW, "jax")}
---
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata: {{name: xgb}}
spec:
  xgbReplicaSpecs:{replica("Master", 1, SHOW, "xgboost")}{replica("Worker", 1, SHOW, "xgboost")}
---
apiVersion: kubeflow.org/v1
kind: PaddleJob
metadata: {{name: paddle}}
spec:
  paddleReplicaSpecs:{replica("Worker", 2, SHOW, "paddle")}
---
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata: {{name: mpi}}
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
            command: [mpirun, -np, "2", --allow-run-as-root, -x, PATH, -mca, pml, ob1]
            args: [python, /opt/app/show_env.py, --lr, "0.1"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
            {SMALL}
---{TRAINJOB}"""
KINDS = {
    "PyTorchJob": "allreduce",
    "TFJob": "tfconfig",
    "JAXJob": "jax",
    "XGBoostJob": "xgb",
    "PaddleJob": "paddle",
    "MPIJob": "mpi",
    "TrainJob": "trainjob",
}


def finished(client: LoomClient, kind: str, name: str, timeout: float = 180) -> dict[str, Any]:
    """The object once a Succeeded or Failed condition is true."""
    deadline = time.monotonic() + timeout
    while True:
        found = client.object(kind, name)
        true = {
            c["type"]
            for c in found.get("status", {}).get("conditions", [])
            if c["status"] == "True"
        }
        if true & {"Succeeded", "Failed"}:
            return found
        assert time.monotonic() < deadline, f"{kind} {name} never ended: {found.get('status')}"
        time.sleep(0.2)


def printed(client: LoomClient, job_id: str, prefix: str) -> dict[int, str]:
    """Each learner's line that starts with `prefix`, without it."""
    return {
        line["learner"]: line["line"].removeprefix(prefix)
        for line in client.all_logs(job_id)
        if line["line"].startswith(prefix)
    }


def test_every_training_kind_runs_to_success(tenant: LoomClient) -> None:
    """One file of seven kinds is applied with the code; each kind's job runs to Succeeded, its
    replicaStatuses count its learners, and each learner got its operator's variables."""
    applied = tenant.apply(JOBS, zip_folder(CODE))
    assert {o["kind"]: o["action"] for o in applied} == dict.fromkeys(KINDS, "created")
    notes = {n["why"] for o in applied for n in o["notes"]}
    assert any("the code's allreduce.py runs in its place" in n for n in notes)
    assert any("mpirun is not run" in n for n in notes)
    jobs = {o["kind"]: o["refs"]["job"] for o in applied}
    shown = {kind: finished(tenant, kind, name) for kind, name in KINDS.items()}
    for kind, found in shown.items():
        conditions = {c["type"]: c for c in found["status"]["conditions"]}
        assert conditions["Succeeded"]["status"] == "True", (kind, found["status"])
        assert conditions["Created"]["reason"] == f"{kind}Created"
        assert found["metadata"]["annotations"]["loom.dev/job"] == jobs[kind]
    assert shown["PyTorchJob"]["status"]["replicaStatuses"] == {
        "Master": {"succeeded": 1},
        "Worker": {"succeeded": 1},
    }

    sums = printed(tenant, jobs["PyTorchJob"], "RESULT ")
    assert sorted(sums) == [1, 2] and all("world=2 sum=3" in text for text in sums.values())

    tf = {n: json.loads(t) for n, t in printed(tenant, jobs["TFJob"], "ENV ").items()}
    chief, worker = json.loads(tf[1]["TF_CONFIG"]), json.loads(tf[2]["TF_CONFIG"])
    assert chief["task"] == {"type": "chief", "index": 0} and tf[1]["ROLE"] == "chief"
    assert worker["task"] == {"type": "worker", "index": 0} and tf[2]["ROLE"] == "worker"
    assert chief["cluster"] == worker["cluster"]
    assert sorted(chief["cluster"]) == ["chief", "worker"]
    assert len(chief["cluster"]["chief"]) == len(chief["cluster"]["worker"]) == 1
    assert chief["cluster"]["chief"] != chief["cluster"]["worker"]

    jax = {n: json.loads(t) for n, t in printed(tenant, jobs["JAXJob"], "ENV ").items()}
    assert [jax[n]["PROCESS_ID"] for n in (1, 2)] == ["0", "1"]
    assert jax[1]["NUM_PROCESSES"] == "2" and jax[1]["COORDINATOR_PORT"]
    xgb = {n: json.loads(t) for n, t in printed(tenant, jobs["XGBoostJob"], "ENV ").items()}
    assert [xgb[n]["RANK"] for n in (1, 2)] == ["0", "1"] and xgb[2]["WORLD_SIZE"] == "2"
    paddle = {n: json.loads(t) for n, t in printed(tenant, jobs["PaddleJob"], "ENV ").items()}
    assert paddle[1]["PADDLE_NNODES"] == "2" and paddle[1]["PADDLE_JOB_ID"] == "paddle"
    mpi = {n: json.loads(t) for n, t in printed(tenant, jobs["MPIJob"], "ENV ").items()}
    assert [mpi[n]["OMPI_COMM_WORLD_RANK"] for n in (1, 2)] == ["0", "1"]
    assert mpi[1]["argv"] == ["--lr", "0.1"]
    train = {n: json.loads(t) for n, t in printed(tenant, jobs["TrainJob"], "ENV ").items()}
    assert [train[n]["PET_NODE_RANK"] for n in (1, 2)] == ["0", "1"]
    assert train[1]["PET_NNODES"] == "2" and train[1]["PET_MASTER_PORT"]


def test_refusals_name_the_field(tenant: LoomClient) -> None:
    """What cannot run is refused when applied, naming the field: an unknown replica type, a
    container without a command (its image's entrypoint is unknown here), a hostPath volume,
    an elastic policy, an unknown TrainJob runtime; and a changed spec of an existing job."""
    base = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: bad}\nspec:\n"
    cases = {
        "spec.pytorchReplicaSpecs.Chief": "  pytorchReplicaSpecs:"
        + replica("Chief", 1, SHOW, "pytorch"),
        "containers[0].command": "  pytorchReplicaSpecs:" + replica("Master", 1, "[]", "pytorch"),
        "spec.elasticPolicy": "  elasticPolicy: {minReplicas: 1}\n  pytorchReplicaSpecs:"
        + replica("Master", 1, SHOW, "pytorch"),
        "volumes[0].hostPath": "  pytorchReplicaSpecs:"
        + replica("Master", 1, SHOW, "pytorch").replace(
            "          containers:",
            "          volumes: [{name: d, hostPath: {path: /etc}}]\n          containers:",
        ),
    }
    for field, body in cases.items():
        with pytest.raises(ClientError) as refused:
            tenant.apply(base + body)
        assert refused.value.status == 400 and field in refused.value.message, refused.value.message
    trainjob = TRAINJOB.replace("torch-distributed", "torchtune-llama")
    with pytest.raises(ClientError, match=r"spec\.runtimeRef\.name: no runtime 'torchtune-llama'"):
        tenant.apply(trainjob)
    good = (
        base
        + "  runPolicy: {suspend: true}\n  pytorchReplicaSpecs:"
        + replica("Master", 1, SHOW, "pytorch")
    )
    (made,) = tenant.apply(good, zip_folder(CODE))
    suspended = tenant.object("pytorchjob", "bad")["status"]["conditions"]
    assert suspended[-1]["type"] == "Suspended" and suspended[-1]["status"] == "True"
    with pytest.raises(ClientError) as changed:
        tenant.apply(good.replace("show_env.py", "allreduce.py"))
    assert changed.value.status == 409 and "delete it first" in changed.value.message
    (resumed,) = tenant.apply(good.replace("suspend: true", "suspend: false"))
    assert resumed["action"] == "configured"
    assert finished(tenant, "pytorchjob", "bad")["status"]["replicaStatuses"] == {
        "Master": {"succeeded": 1}
    }
    (gone,) = tenant.delete_documents(good)
    assert gone["action"] == "deleted"
    with pytest.raises(ClientError, match="no job"):
        tenant.job(made["refs"]["job"])
