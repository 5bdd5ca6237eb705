"""The Ray launcher on a real two-node Ray cluster started here, each node with its own scratch
disk: gangs placed by Ray, a lost node, and a platform killed with -9 while learners run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import (
    ROOT,
    Server,
    database_free,
    eventually,
    make_zip,
    manifest,
    register,
    stop_deployments,
    wait_for_state,
)
from tests.launchers.ray_cluster import RayCluster

pytestmark = [pytest.mark.integration, pytest.mark.ray, pytest.mark.slow, database_free]
FINAL = {"COMPLETED", "FAILED", "HALTED"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    ray = RayCluster(tmp_path_factory.mktemp("ray")).start()
    yield ray
    ray.stop()


def on_ray(home: Path, cluster: RayCluster, **env: str) -> Server:
    # exec'd, not forked (tests/forked.py): Ray's client, in a fork of a process that has
    # imported Ray, never gets its job's learners started
    return Server(
        home,
        fork=False,
        LOOM_LAUNCHER="ray",
        LOOM_RAY_ADDRESS=cluster.address,
        LOOM_LEARNER_CHECKPOINT_SYNC_S="1",
        **env,
    ).start()


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory, cluster: RayCluster) -> Iterator[Server]:
    """One platform on the cluster for the tests that do not kill it."""
    server = on_ray(tmp_path_factory.mktemp("platform") / "home", cluster)
    yield server
    server.stop()
    stop_deployments(server.home)


def lines_of(client: LoomClient, job_id: str) -> list[dict[str, object]]:
    return client.logs(job_id, pagesize=10_000)


def test_capacity_is_the_clusters(platform: Server) -> None:
    """The scheduler's capacity is the cluster's: both nodes, each listed with what is free."""
    with platform.client() as client:
        found = client.capacity()
    assert found["launcher"] == "ray"
    assert (found["capacity"]["cpus"], found["capacity"]["gpus"]) == (4.0, 2)
    assert len(found["nodes"]) == 2
    assert all(node["alive"] and node["cpus"] == 2.0 for node in found["nodes"])


JOIN = (
    "import os, sys, ray\n"
    "print('token in my environment:', 'RAY_AUTH_TOKEN' in os.environ, flush=True)\n"
    "try:\n"
    "    ray.init(sys.argv[1], log_to_driver=False)\n"
    "    @ray.remote(num_cpus=0)\n"
    "    def whoami():\n"
    "        return os.getuid()\n"
    "    print('ran on the cluster as uid', ray.get(whoami.remote(), timeout=30), flush=True)\n"
    "except Exception as exc:\n"
    "    print('refused:', type(exc).__name__, flush=True)\n"
)


def test_a_learner_cannot_run_tasks_on_the_cluster(platform: Server, cluster: RayCluster) -> None:
    """A learner's sandbox shares the network, and Loom's Python has Ray: without the cluster's
    token (which its allow-listed environment does not hold) Ray refuses it, so it cannot run
    code on the nodes with Ray's rights, outside its sandbox. Without token authentication it
    could (a task ran as root), and the platform then serves one user only."""
    text = manifest(f"python join.py {cluster.client_address}", cpus=1)
    with platform.client() as client:
        job_id = client.submit(text, make_zip({"join.py": JOIN}))
        wait_for_state(client, job_id, FINAL, timeout=120)
        said = [str(x["line"]) for x in lines_of(client, job_id)]
        isolation = client.capacity()["isolation"]
    assert "token in my environment: False" in said, said
    assert any(line.startswith("refused:") for line in said), said
    assert not any(line.startswith("ran on the cluster") for line in said), said
    assert isolation["confined"] and not isolation["single_user"], said


def test_cpu_learners_are_started_by_each_nodes_agent(
    platform: Server, cluster: RayCluster
) -> None:
    """A gang without GPUs is started by one long-lived agent per node (no actor, so no Ray
    worker process, per learner): while two jobs' learners run on both nodes, the only named
    actors are the nodes' agents, one per node, and they are the same for the second job."""
    import loom

    text = manifest(
        "python wait.py", learners=2, cpus=1, framework_options="{placement: strict_spread}"
    )
    script = "import time\nprint('up', flush=True)\ntime.sleep(4)\n"
    seen = []
    with platform.client() as client:
        for _ in range(2):
            job_id = client.submit(text, make_zip({"wait.py": script}))
            eventually(lambda j=job_id: len(lines_of(client, j)) == 2, timeout=60)
            seen.append(sorted(cluster.named_actors()))
            assert wait_for_state(client, job_id, FINAL, timeout=60)["state"] == "COMPLETED"
    agents = [n for n in seen[0] if n.startswith(f"loom-agent-{loom.__version__}-")]
    assert len(agents) == 2 and seen[0] == agents, seen
    assert seen[1] == seen[0], seen


def test_a_changed_sandbox_gets_agents_of_its_own_and_ends_the_idle_others(
    tmp_path: Path, platform: Server, cluster: RayCluster
) -> None:
    """An agent confines learners with the sandbox of the platform that made it: a platform
    whose sandbox differs (here, its process limit) makes agents of its own on the nodes it
    uses, and the others, idle, are ended. Named after Loom's version alone, the old agents
    went on starting learners in the old sandbox."""
    text = manifest(
        "python up.py", learners=2, cpus=1, framework_options="{placement: strict_spread}"
    )
    code = make_zip({"up.py": "print('up', flush=True)\n"})

    def agents_after_a_job(server: Server) -> list[str]:
        with server.client() as client:
            job_id = client.submit(text, code)
            assert wait_for_state(client, job_id, FINAL, timeout=60)["state"] == "COMPLETED"
        return sorted(n for n in cluster.named_actors() if n.startswith("loom-agent-"))

    before = agents_after_a_job(platform)
    other = on_ray(tmp_path / "home", cluster, LOOM_SANDBOX_PIDS="4000")
    try:
        after = agents_after_a_job(other)
    finally:
        other.stop()
    assert len(before) == 2 and len(after) == 2 and not set(before) & set(after), (before, after)
    assert agents_after_a_job(platform) == before  # and back: the platform's own again


def test_a_retired_agent_ends_with_its_last_learner_unless_its_platform_takes_it_back(
    tmp_path: Path, platform: Server, cluster: RayCluster
) -> None:
    """Agents retired while they run learners are ended when the last of those is released;
    and a platform still running with the old sandbox, asking its agents by name, takes them
    back rather than being refused (each node has 2 CPUs: a long job and a short one fit)."""
    long = manifest(
        "python wait.py", learners=2, cpus=1, framework_options="{placement: strict_spread}"
    )
    waits = make_zip({"wait.py": "import time\nprint('up', flush=True)\ntime.sleep(600)\n"})
    short = manifest(
        "python up.py", learners=2, cpus=1, framework_options="{placement: strict_spread}"
    )
    ups = make_zip({"up.py": "print('up', flush=True)\n"})

    def agents() -> set[str]:
        return {n for n in cluster.named_actors() if n.startswith("loom-agent-")}

    def run_short(server: Server) -> None:
        with server.client() as client:
            job_id = client.submit(short, ups)
            assert wait_for_state(client, job_id, FINAL, timeout=60)["state"] == "COMPLETED"

    def start_long(client: LoomClient) -> str:
        job_id = client.submit(long, waits)
        eventually(lambda: len(lines_of(client, job_id)) == 2, timeout=60)
        return job_id

    other = on_ray(tmp_path / "home", cluster, LOOM_SANDBOX_PIDS="4000")
    try:
        with platform.client() as client:
            # retired while busy, ended with its last learner
            job_id = start_long(client)
            ours = agents()
            run_short(other)
            theirs = agents() - ours
            assert len(ours) == 2 and len(theirs) == 2, (ours, theirs)
            client.halt(job_id)
            eventually(lambda: agents() == theirs, timeout=60)
            # retired while busy, then asked again by its own platform: taken back
            job_id = start_long(client)
            ours = agents() - theirs
            assert len(ours) == 2 and not agents() & theirs
            run_short(other)
            run_short(platform)
            client.halt(job_id)
            assert wait_for_state(client, job_id, FINAL, timeout=60)["state"] == "HALTED"
            time.sleep(2)  # a release runs in the background: it must not end them
            assert ours <= agents()
    finally:
        other.stop()
        cluster.kill_named(sorted(agents() - ours))  # the other platform's, idle


def test_a_launch_that_finds_its_agents_being_ended_waits_for_their_successors(
    platform: Server, cluster: RayCluster
) -> None:
    """Another platform retired this one's idle agents and is about to end them (here a
    driver of the cluster, which ends them 2 s later) just as a job is launched: the launch
    waits for them to go and starts the job on their successors, rather than failing it."""
    text = manifest(
        "python up.py", learners=2, cpus=1, framework_options="{placement: strict_spread}"
    )
    code = make_zip({"up.py": "print('up', flush=True)\n"})
    with platform.client() as client:
        job_id = client.submit(text, code)
        assert wait_for_state(client, job_id, FINAL, timeout=60)["state"] == "COMPLETED"
        ours = sorted(n for n in cluster.named_actors() if n.startswith("loom-agent-"))
        assert len(ours) == 2, ours
        script = (
            f"import ray, time; ray.init(address={cluster.address!r}, namespace='loom', "
            "log_to_driver=False)\n"
            f"agents = [ray.get_actor(n) for n in {ours!r}]\n"
            "print('retired', *ray.get([a.retire.remote() for a in agents]), flush=True)\n"
            "time.sleep(2)\n"
            "for a in agents: ray.kill(a)\n"
        )
        driver = subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **cluster.env},
        )
        assert driver.stdout is not None
        assert driver.stdout.readline().split() == ["retired", "True", "True"]
        job_id = client.submit(text, code)
        job = wait_for_state(client, job_id, FINAL, timeout=60)
        assert driver.wait(timeout=30) == 0
        assert job["state"] == "COMPLETED", job
    assert sorted(n for n in cluster.named_actors() if n.startswith("loom-agent-")) == ours


def test_a_learner_sees_the_gpu_ray_gave_it(platform: Server) -> None:
    """Each learner's CUDA_VISIBLE_DEVICES is the GPU Ray gave its actor on its node (the
    nodes' one GPU is each node's device 0), not a number counted over the cluster."""
    script = "import os\nprint(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPU_COUNT'])\n"
    text = manifest(
        "python gpu.py", learners=2, cpus=1, gpus=1, framework_options="{placement: strict_spread}"
    )
    with platform.client() as client:
        job_id = client.submit(text, make_zip({"gpu.py": script}))
        assert wait_for_state(client, job_id, FINAL, timeout=60)["state"] == "COMPLETED"
        assert [x["line"] for x in lines_of(client, job_id)] == ["0 1", "0 1"]


def test_a_gang_no_nodes_can_hold_waits_with_the_reason(platform: Server) -> None:
    """Three learners one per node on a two-node cluster: the cluster's CPUs would do in all,
    but no placement can hold it. It is not started (to time out in Ray) nor failed (a node
    may be added): it waits, and says why."""
    text = manifest("true", learners=3, cpus=1, framework_options="{placement: strict_spread}")
    with platform.client() as client:
        job_id = client.submit(text, make_zip({"x.py": ""}))
        eventually(lambda: "needs 3 nodes" in (client.job(job_id)["queue_reason"] or ""))
        job = client.job(job_id)
        assert job["state"] == "QUEUED"
        assert job["queue_reason"] == (
            "waiting for the cluster to grow: no Ray cluster node set can hold it: placement "
            "strict_spread needs 3 nodes with 1 CPU, 0.2 GiB each; 2 have"
        )
        client.delete(job_id)


def test_ddp_digits_one_learner_per_node(platform: Server, cluster: RayCluster) -> None:
    """The digits example's DDP job with `placement: strict_spread`: one learner on each node
    (each in its own node's scratch folder), trained together, its model registered."""
    example = ROOT / "examples" / "digits-pytorch"
    text = (example / "manifest.yml").read_text().replace("--epochs 15", "--epochs 4")
    text = text.replace("python train.py", "python where.py && python train.py")
    text += "framework_options: {placement: strict_spread}\n"
    where = "import os\nprint('working in', os.getcwd(), flush=True)\n"
    code = make_zip({"train.py": (example / "train.py").read_text(), "where.py": where})
    with platform.client() as client:
        job_id = client.submit(text, code)
        job = wait_for_state(client, job_id, FINAL, timeout=240)
        assert job["state"] == "COMPLETED", job
        lines = [str(x["line"]) for x in lines_of(client, job_id)]
        for rank in (0, 1):
            assert any(x.startswith(f"rank {rank} epoch 4/4") for x in lines), lines
        folders = [x.split("working in ")[1] for x in lines if x.startswith("working in")]
        roots = {Path(f).relative_to(cluster.root).parts[0] for f in folders}
        assert roots == {"scratch-head", "scratch-worker"}
        assert not any(str(platform.home) in f for f in folders)
        assert client.model_version("digits-cnn")["provenance"]["job_id"] == job_id
        groups = {p["group"] for p in client.metrics(job_id, pagesize=10_000)["metrics"]}
        assert {"train", "test"} <= groups


TICKER = (
    "import os, sys, time\n"
    "for i in range(1, 41):\n"
    "    print(f'learner {os.environ[\"LEARNER_ID\"]} line {i}', flush=True)\n"
    "    time.sleep(0.2)\n"
)


def test_platform_killed_mid_job_reattaches(tmp_path: Path, cluster: RayCluster) -> None:
    """kill -9 of the platform while learners run on Ray: restarted, it finds them again (it
    does not start them twice) and the job completes with every line stored once."""
    server = on_ray(tmp_path / "home", cluster)
    try:
        with server.client() as client:
            job_id = client.submit(
                manifest("python tick.py", learners=2, cpus=1), make_zip({"tick.py": TICKER})
            )
            eventually(lambda: len(lines_of(client, job_id)) >= 4, timeout=60)
        server.kill9()
        time.sleep(2.0)
        server.start()
        with server.client() as client:
            job = wait_for_state(client, job_id, FINAL, timeout=120)
            assert job["state"] == "COMPLETED", job
            assert job["attempt"] == 1
            lines = [(x["learner"], x["line"]) for x in lines_of(client, job_id)]
        expected = {(n, f"learner {n} line {i}") for n in (1, 2) for i in range(1, 41)}
        assert sorted(lines) == sorted(expected)  # each once
    finally:
        server.stop()


def test_halt_resume_delete_and_an_environment(platform: Server, cluster: RayCluster) -> None:
    """On Ray as on one machine: a job in its own environment (built on each node, in that
    node's scratch folder) halts, resumes from its checkpoint, completes, and is deleted."""
    script = (
        "import os, time, tabulate\n"
        "from pathlib import Path\n"
        "ckpt = Path(os.environ['CHECKPOINT_DIR']) / f\"rank-{os.environ['RANK']}\"\n"
        "step = int(ckpt.read_text()) if ckpt.exists() else 0\n"
        "print(f'tabulate {tabulate.__version__} from {step}', flush=True)\n"
        "while step < 30:\n"
        "    step += 1\n"
        "    ckpt.write_text(str(step))\n"
        "    print(f'step {step}', flush=True)\n"
        "    time.sleep(0.3)\n"
    )
    text = manifest(
        "python envjob.py",
        learners=2,
        cpus=1,
        environment="{pip: [tabulate==0.8.10]}",
        framework_options="{placement: strict_spread}",
    )
    with platform.client() as client:
        job_id = client.submit(text, make_zip({"envjob.py": script}))
        eventually(lambda: "step 6" in [x["line"] for x in lines_of(client, job_id)], timeout=120)
        client.halt(job_id)
        assert wait_for_state(client, job_id, FINAL, timeout=60)["state"] == "HALTED"
        for node in ("head", "worker"):  # built on each node; the job's folders go (soon)
            assert list((cluster.scratch(node) / "environments").glob("*/loom-env.json"))
            eventually(lambda n=node: not (cluster.scratch(n) / "jobs" / job_id).exists())
        client.resume(job_id)
        job = wait_for_state(client, job_id, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        starts = [x["line"] for x in lines_of(client, job_id) if x["line"].startswith("tabulate")]
        assert starts[:2] == ["tabulate 0.8.10 from 0"] * 2
        assert all(int(line.split()[-1]) > 0 for line in starts[2:]) and len(starts) == 4
        client.delete(job_id)
        with pytest.raises(ClientError):
            client.job(job_id)


STEPPER = (
    "import os, time\n"
    "from pathlib import Path\n"
    "rank = os.environ['RANK']\n"
    "ckpt = Path(os.environ['CHECKPOINT_DIR']) / f'rank-{rank}'\n"
    "step = int(ckpt.read_text()) if ckpt.exists() else 0\n"
    "attempt = os.environ['TRAINING_ATTEMPT']\n"
    "print(f'rank {rank} attempt {attempt} from step {step} in {os.getcwd()}', flush=True)\n"
    "while step < 40:\n"
    "    step += 1\n"
    "    tmp = ckpt.with_suffix('.tmp')\n"
    "    tmp.write_text(str(step))\n"
    "    tmp.replace(ckpt)\n"
    "    print(f'rank {rank} step {step}', flush=True)\n"
    "    time.sleep(0.4)\n"
)


def test_lost_node_restarts_from_checkpoint(platform: Server, cluster: RayCluster) -> None:
    """A node lost mid-job: the gang stops, the attempt says which node was lost, and under
    OnFailure attempt 2 runs on the remaining node from attempt 1's checkpoints (the lost
    node's too, which reached the platform through its API)."""
    text = manifest(
        "python step.py",
        learners=2,
        cpus=1,
        restart_policy="OnFailure",
        max_restarts=2,
        framework_options="{placement: spread}",
    )
    try:
        with platform.client() as client:
            job_id = client.submit(text, make_zip({"step.py": STEPPER}))

            def stepped() -> bool:
                found = [str(x["line"]) for x in lines_of(client, job_id)]
                return all(f"rank {r} step 8" in found for r in (0, 1))

            eventually(stepped, timeout=90)
            # Both learners' checkpoints have reached the platform (the worker's through the API).
            held = platform.home / "jobs" / job_id / "checkpoints"
            eventually(lambda: all((held / f"rank-{r}").exists() for r in (0, 1)), timeout=30)
            sent = int((held / "rank-1").read_text())
            cluster.kill_worker()
            job = wait_for_state(client, job_id, FINAL, timeout=180)
            assert job["state"] == "COMPLETED", job
            assert job["attempt"] == 2, [x["line"] for x in lines_of(client, job_id)][:6]
            lost = [
                lr
                for lr in client.job(job_id)["learner_status"]
                if lr["attempt"] == 1 and "lost" in lr["message"]
            ]
            assert lost, job
            assert re.search(r"lost with its Ray node [\d.]+ \([0-9a-f]{12}\)", lost[0]["message"])
            resumed = [str(x["line"]) for x in lines_of(client, job_id)]
            for rank in (0, 1):
                start = next(x for x in resumed if x.startswith(f"rank {rank} attempt 2 from"))
                assert int(start.split()[6]) > 0, start  # not from the beginning
            resumed_at = [x for x in resumed if x.startswith("rank 1 attempt 2 from")]
            assert int(resumed_at[0].split()[6]) >= sent
    finally:
        cluster.wait_nodes(1)
        cluster.start_worker()


V2 = {"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32", "data": [0.5] * 64}]}


def test_deployment_replicas_on_both_nodes_survive_one(
    platform: Server, cluster: RayCluster, model_zip: bytes
) -> None:
    """A deployment's two replicas run one on each node (each with the model sent to it); with
    one node lost, the endpoint keeps answering from the other and gets its replica back."""
    import httpx

    try:
        with platform.client() as client:
            register(client, model_zip)
            client.deploy("spread", "digits", min_replicas=2, max_replicas=2)
            deadline = time.monotonic() + 120
            found = client.deployment("spread")
            while found["replicas"]["ready"] < 2:
                assert time.monotonic() < deadline, found
                time.sleep(0.2)
                found = client.deployment("spread")
            url = found["urls"]["v2_infer"]
            owner = {"Authorization": f"Bearer {platform.admin_token}"}
            assert httpx.post(url, json=V2, headers=owner).status_code == 200
            served = {
                node: list((cluster.scratch(node) / "serving").rglob("model/model.onnx"))
                for node in ("head", "worker")
            }
            assert all(served.values()), served
            cluster.kill_worker()
            answered = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                answered.append(httpx.post(url, json=V2, headers=owner, timeout=30).status_code)
                found = client.deployment("spread")
                if found["restarts"] >= 1 and found["replicas"]["ready"] == 2:
                    break
                time.sleep(0.2)
            assert found["replicas"]["ready"] == 2 and found["restarts"] >= 1, found
            assert set(answered) == {200}, answered
            client.delete_deployment("spread")
    finally:
        cluster.wait_nodes(1)
        cluster.start_worker()
