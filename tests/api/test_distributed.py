"""Distributed learners: framework environments, DDP, GPUs, scheduling under load, quotas."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from loom.client import LoomClient
from loom.client.archive import zip_folder
from tests.conftest import ROOT, Server, database_free, make_zip, manifest, wait_for_state

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "HALTED"}


def ok_lines(client: LoomClient, job_id: str) -> list[str]:
    return [x["line"] for x in client.logs(job_id, pagesize=10_000)]


ENV_CHECK = (
    "import json, os\n"
    "rank = int(os.environ['LEARNER_ID']) - 1\n"
    "{check}\n"
    "print(f'learner {{rank}} ok')\n"
)


def run_check(server: Server, framework: str, check: str, learners: int = 2, **kw: object) -> None:
    script = ENV_CHECK.format(check=check)
    text = manifest("python check.py", learners=learners, **kw).replace(
        "name: python", f"name: {framework}"
    )
    with server.client() as client:
        job_id = client.submit(text, make_zip({"check.py": script}))
        job = wait_for_state(client, job_id, FINAL)
        assert job["state"] == "COMPLETED", job
        lines = sorted(ok_lines(client, job_id))
    assert lines == [f"learner {r} ok" for r in range(learners)]


def test_tensorflow_learners_see_tf_config(server: Server) -> None:
    """A TensorFlow-style script finds a TF_CONFIG naming every worker and its own index."""
    check = (
        "c = json.loads(os.environ['TF_CONFIG'])\n"
        "workers = c['cluster']['worker']\n"
        "assert len(workers) == 2 and len(set(workers)) == 2, c\n"
        "assert c['task'] == {'type': 'worker', 'index': rank}, c\n"
    )
    run_check(server, "tensorflow", check, environment="{install_framework: false}")


def test_tensorflow_parameter_servers(server: Server) -> None:
    """Asked for one parameter server, the first learner is `ps` and the others workers."""
    check = (
        "c = json.loads(os.environ['TF_CONFIG'])\n"
        "assert len(c['cluster']['ps']) == 1 and len(c['cluster']['worker']) == 2, c\n"
        "ps = {'type': 'ps', 'index': 0}\n"
        "want = ps if rank == 0 else {'type': 'worker', 'index': rank - 1}\n"
        "assert c['task'] == want, c\n"
    )
    run_check(
        server,
        "tensorflow",
        check,
        learners=3,
        framework_options="{parameter_servers: 1}",
        environment="{install_framework: false}",
    )


def test_jax_learners_see_their_variables(server: Server) -> None:
    """A JAX-style script finds the coordinator, the process count and its own id."""
    check = (
        "host, port = os.environ['JAX_COORDINATOR_ADDRESS'].rsplit(':', 1)\n"
        "assert host == '127.0.0.1' and int(port) > 0\n"
        "assert os.environ['JAX_NUM_PROCESSES'] == '2'\n"
        "assert os.environ['JAX_PROCESS_ID'] == str(rank)\n"
    )
    run_check(server, "jax", check, environment="{install_framework: false}")


def test_horovod_learners_share_a_hostfile(server: Server) -> None:
    """Horovod/MPI learners get their ranks and a hostfile with a slot for each."""
    check = (
        "assert open(os.environ['HOROVOD_HOSTFILE']).read() == '127.0.0.1 slots=2\\n'\n"
        "assert os.environ['HOROVOD_RANK'] == str(rank)\n"
    )
    run_check(server, "horovod", check)


@pytest.mark.slow
@database_free
def test_ddp_digits_two_learners_train_one_model(server: Server) -> None:
    """The digits example with 2 DDP learners: both ranks train every epoch on their shard, end
    with the same weights (gradients were averaged, not trained apart), and the model is accurate.
    Nothing is compared with another run: a CPU's floating point moves one run's accuracy."""
    example = ROOT / "examples" / "digits-pytorch"
    text = (example / "manifest.yml").read_text()
    assert re.search(r"^learners: 2", text, flags=re.M)
    epochs = 8  # the mechanism, not the best accuracy: 8 epochs are well past the floor
    text = text.replace("--epochs 15", f"--epochs {epochs}")
    code = make_zip({"train.py": (example / "train.py").read_text()})
    with server.client() as client:
        job_id = client.submit(text, code)
        job = wait_for_state(client, job_id, FINAL, timeout=240)
        assert job["state"] == "COMPLETED", job
        lines = ok_lines(client, job_id)
        trained = {x["learner"] for x in client.logs(job_id, pagesize=10_000)}
    assert trained == {1, 2}
    for rank in range(2):
        assert any(x.startswith(f"rank {rank} epoch {epochs}/{epochs}") for x in lines)
        assert any(x.startswith(f"rank {rank}/2: training on") for x in lines)
    digests = {x.split()[-1] for x in lines if "weights digest" in x}
    assert len(digests) == 1, f"the ranks' weights differ: {digests}"
    found = [float(x.split(": ")[1]) for x in lines if x.startswith("test accuracy:")]
    assert found[0] >= 0.9


@database_free
def test_gpus_are_assigned_distinct_devices(tmp_path: Path) -> None:
    """On a platform with 4 GPUs, a 2-learner job of 1 GPU each and another 2-GPU job see
    distinct devices through CUDA_VISIBLE_DEVICES, and GPU_COUNT matches."""
    srv = Server(tmp_path / "home", LOOM_GPUS="4").start()
    script = (
        "import os, time\n"
        "print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPU_COUNT'], flush=True)\n"
        "time.sleep(1.5)\n"
    )
    try:
        with srv.client() as client:
            first = client.submit(
                manifest("python g.py", learners=2, gpus=1), make_zip({"g.py": script})
            )
            second = client.submit(manifest("python g.py", gpus=2), make_zip({"g.py": script}))
            third = client.submit(manifest("python g.py", gpus=1), make_zip({"g.py": script}))
            wait_for_state(client, second, {"PROCESSING", *FINAL})
            assert client.job(third)["queue_reason"] == "needs 1 GPUs, 0 free"
            seen = []
            for job_id in (first, second, third):
                wait_for_state(client, job_id, FINAL, timeout=60)
                seen.append([x["line"].split() for x in client.logs(job_id)])
    finally:
        srv.stop()
    running_together = [dev for lines in seen[:2] for dev, _ in lines]
    ids = [d for devs in running_together for d in devs.split(",")]
    assert sorted(ids) == ["0", "1", "2", "3"]
    assert all(count == str(len(dev.split(","))) for lines in seen for dev, count in lines)


def held_intervals(job: dict[str, Any], cpus: float) -> list[tuple[float, float, float]]:
    """When each learner held its CPUs: from its admission to the moment it was known to end
    (what the scheduler counts; a gang's learners may end apart)."""
    stamp = lambda text: datetime.fromisoformat(text).timestamp()  # noqa: E731
    return [
        (stamp(lr["started_at"]), stamp(lr["finished_at"]), cpus) for lr in job["learner_status"]
    ]


@pytest.mark.slow
def test_fifty_jobs_by_three_users_never_oversubscribe(tmp_path: Path) -> None:
    """50 jobs from 3 users all finish, and at no moment do running jobs hold more CPUs than
    the platform has (checked from every job's recorded history)."""
    srv = Server(tmp_path / "home", LOOM_CPUS="2").start()
    try:
        with srv.client() as admin:
            tokens = [admin.add_user(f"user{i}")["token"] for i in range(3)]
        clients = [LoomClient(srv.url, t) for t in tokens]
        submitted = []
        for i in range(50):
            cpus, learners = [(0.5, 1), (1, 1), (0.5, 2), (1, 2)][i % 4]
            client = clients[i % 3]
            text = manifest(
                "python -c 'import time; time.sleep(0.3)'", cpus=cpus, learners=learners
            )
            submitted.append((client, client.submit(text, make_zip({"a": ""})), cpus))
        held = []
        for client, job_id, cpus in submitted:
            job = wait_for_state(client, job_id, FINAL, timeout=180)
            assert job["state"] == "COMPLETED", job
            held += held_intervals(job, cpus)
        for client in clients:
            client.close()
    finally:
        srv.stop()
    assert len(held) == sum(1 + (i % 4 >= 2) for i in range(50))
    for moment in sorted(start for start, _, _ in held):
        total = sum(cpus for start, end, cpus in held if start <= moment < end)
        assert total <= 2 + 1e-9, f"{total} CPUs held at {moment}"


def test_quota_holds_a_users_jobs_with_the_reason(server: Server) -> None:
    """With a one-CPU quota, a user's second job waits with the quota as its reason while
    another user's job runs."""
    with server.client() as admin:
        ann = admin.add_user("ann")["token"]
        bob = admin.add_user("bob")["token"]
        admin.set_quota("ann", cpus=1, gpus=None, jobs=None)
    with LoomClient(server.url, ann) as a, LoomClient(server.url, bob) as b:
        first = a.submit(manifest("sleep 3", cpus=1), make_zip({"a": ""}))
        second = a.submit(manifest("true", cpus=1), make_zip({"a": ""}))
        wait_for_state(a, first, {"PROCESSING"})
        other = b.submit(manifest("true", cpus=0.5), make_zip({"a": ""}))
        assert wait_for_state(b, other, FINAL)["state"] == "COMPLETED"
        waiting = a.job(second)
        assert waiting["state"] == "QUEUED"
        assert waiting["queue_reason"] == "quota: 1 of 1 CPUs in use by your running jobs"
        assert wait_for_state(a, second, FINAL, timeout=30)["state"] == "COMPLETED"


@database_free
def test_horovod_style_allreduce_keeps_the_ranks_equal(server: Server) -> None:
    """The all-reduce example, launched as Horovod would be: both ranks train on their own
    shard and end with the same weights, and a good accuracy."""
    example = ROOT / "examples" / "allreduce-horovod"
    with server.client() as client:
        job_id = client.submit((example / "manifest.yml").read_bytes(), zip_folder(example))
        job = wait_for_state(client, job_id, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        lines = ok_lines(client, job_id)
    digests = {x.split()[1]: x.split()[-1] for x in lines if " weights " in x}
    assert set(digests) == {"0:", "1:"} and len(set(digests.values())) == 1, lines
    accuracy = [float(x.split()[-1]) for x in lines if "test accuracy" in x]
    assert len(accuracy) == 2 and min(accuracy) > 0.85, lines
