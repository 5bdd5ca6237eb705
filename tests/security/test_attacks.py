"""The attack suite: jobs of an ordinary user try to break out of their sandbox and fail, while
the job itself still completes normally. Needs the sandbox (root and bubblewrap)."""

from __future__ import annotations

import io
import json
import re
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import (
    Server,
    eventually,
    make_zip,
    manifest,
    processes_with,
    wait_for_state,
)
from tests.security.attacker import memory_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
ATTACKER = (Path(__file__).parent / "attacker.py").read_text()
SLEEPER = "import os, time\nprint('sleeping', flush=True)\ntime.sleep(120)\n"
SERVER_SECRET = "server-aws-secret-7f3a9c"
EXPECTED = {
    "admin-token",
    "database",
    "secret-key",
    "server-environ",
    "other-job-code",
    "other-job-spool",
    "other-job-spec",
    "secrets-in-processes",
    "server-environment",
    "create-admin",
    "hard-link",
    "write-outside-results",
}


def sandboxed(server: Server) -> bool:
    with server.client() as client:
        return bool(client.capacity()["isolation"]["confined"])


@pytest.fixture
def platform(tmp_path: Path) -> Any:
    # exec'd, not forked: a fork's /proc/PID/environ is pytest's, so an attack that reads the
    # platform's would find no secret there whatever the sandbox did
    srv = Server(tmp_path / "home", fork=False, AWS_SECRET_ACCESS_KEY=SERVER_SECRET).start()
    if not sandboxed(srv):
        srv.stop()
        pytest.skip("this machine cannot sandbox jobs (needs root and bubblewrap)")
    yield srv
    srv.stop()


def user_client(server: Server, name: str) -> LoomClient:
    with server.client() as admin:
        token = admin.add_user(name)["token"]
    return server.client(token)


def attacks_of(client: LoomClient, job_id: str) -> dict[str, str]:
    found = {}
    for entry in client.logs(job_id, pagesize=10_000):
        match = re.match(r"ATTACK (\S+): (\S+) \((.*)\)", entry["line"])
        if match:
            found[match[1]] = f"{match[2]} {match[3]}"
    return found


def parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def wait_line(client: LoomClient, job_id: str, text: str, timeout: float = 60) -> None:
    eventually(lambda: any(text in x["line"] for x in client.logs(job_id)), timeout)


def test_a_job_cannot_reach_the_platform_or_other_jobs(
    platform: Server, s3: Any, tmp_path: Path
) -> None:
    """An attacker's job fails at every attack (tokens, database, key, server environment,
    another job's files and secrets, making itself admin, links out of its results) and still
    completes; the spawner and other wrappers never hold the victim's secret."""
    victim_file = tmp_path / "victim.txt"
    victim_file.write_text("untouched")
    bucket = "victim-data"
    s3.client().create_bucket(Bucket=bucket)
    s3.client().put_object(Bucket=bucket, Key="x.csv", Body=b"1\n")
    store = (
        "data_stores:\n  - id: cos\n    type: s3_datastore\n"
        f"    training_data: {{container: {bucket}}}\n"
        f"    connection: {{auth_url: '{s3.endpoint}', user_name: '{s3.key}', "
        f"password: '{s3.secret}'}}\n"
    )
    alice, mallory = user_client(platform, "alice"), user_client(platform, "mallory")
    with alice, mallory:
        victim = alice.submit(
            manifest("python sleeper.py", name="victim") + store,
            make_zip({"sleeper.py": SLEEPER}),
        )
        wait_line(alice, victim, "sleeping")
        args = {
            "home": str(platform.home),
            "server_pid": platform.process.pid if platform.process else 0,
            "other": victim,
            "api": platform.url,
            "needles": [s3.secret, platform.admin_token, SERVER_SECRET],
            "victim": str(victim_file),
        }
        command = f"python attacker.py {json.dumps(args).encode().hex()}"
        attacker = mallory.submit(
            manifest(command, name="attacker", model_name="stolen"),
            make_zip({"attacker.py": ATTACKER}),
        )
        job = wait_for_state(mallory, attacker, FINAL, timeout=120)
        results = attacks_of(mallory, attacker)
        assert job["state"] == "COMPLETED", job
        assert set(results) == EXPECTED, results
        succeeded = {k: v for k, v in results.items() if not v.startswith("blocked")}
        assert not succeeded, succeeded

        # The links it planted were not followed when its results were stored or served.
        target = tmp_path / "results.zip"
        mallory.download(attacker, "results", target)
        with zipfile.ZipFile(io.BytesIO(target.read_bytes())) as archive:
            names = set(archive.namelist())
            log = archive.read("learner-1/training-log.txt").decode()
        assert not names & {"model/model.onnx", "shadow.txt", "hard-token"}, names
        assert "ATTACK admin-token" in log
        assert victim_file.read_text() == "untouched"
        assert not list(platform.home.glob(f"jobs/{attacker}/**/escaped.txt"))
        with pytest.raises(ClientError) as missing:
            mallory.model_version("stolen", "latest")
        assert missing.value.status == 404

        # The spawner (whose memory every wrapper inherits) never held the victim's secret,
        # nor the server's environment; the wrappers it forked are its children.
        server_pid = platform.process.pid if platform.process else 0
        spawners = [p for p in processes_with(b"loom.learner.spawner") if parent(p) == server_pid]
        assert len(spawners) == 1
        assert s3.secret.encode() not in memory_of(spawners[0], 256 << 20)
        assert SERVER_SECRET.encode() not in Path(f"/proc/{spawners[0]}/environ").read_bytes()
        alice.delete(victim)


def test_limits_hold_and_nothing_outlives_its_job(platform: Server) -> None:
    """A job is held to its cpus (kernel quota) and memory (a child over it is stopped), and a
    `setsid` child it leaves behind dies with it, as does one of a deleted job."""
    script = (
        "import multiprocessing, os, resource, subprocess, time\n"
        "def spin():\n"
        "    end = time.time() + 2.0\n"
        "    while time.time() < end: pass\n"
        "multiprocessing.Lock()  # POSIX semaphores work: /dev/shm is the learner's own\n"
        "procs = [multiprocessing.Process(target=spin) for _ in range(2)]\n"
        "start = time.time()\n"
        "[p.start() for p in procs]; [p.join() for p in procs]\n"
        "used = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print('cpu-share', (used.ru_utime + used.ru_stime) / (time.time() - start), flush=True)\n"
        "hog = subprocess.run(['python', '-c', 'x = bytearray(512 << 20); x[::4096] = "
        'b"1" * len(x[::4096])\'])\n'
        "print('hog-exit', hog.returncode, flush=True)\n"
        "subprocess.Popen(['setsid', 'python', '-c', 'import time; time.sleep(4242)'])\n"
        "time.sleep(0.5)\n"
        "print('left a child', flush=True)\n"
    )
    with platform.client() as client:
        job_id = client.submit(
            manifest("python limits.py", cpus=0.25, memory="192MiB"),
            make_zip({"limits.py": script}),
        )
        job = wait_for_state(client, job_id, FINAL, timeout=120)
        lines = [x["line"] for x in client.logs(job_id)]
        assert job["state"] == "COMPLETED", (job, lines)
        share = float(next(line for line in lines if line.startswith("cpu-share")).split()[1])
        assert share < 0.5, lines  # 2 spinning processes held to 0.25 of a core (not 2.0)
        assert "hog-exit -9" in lines, lines  # the kernel stopped the child at 192 MiB
        time.sleep(0.5)
        assert not processes_with(b"time.sleep(4242)")

        sleeper = client.submit(
            manifest("setsid python -c 'import time; time.sleep(4343)' & sleep 60"),
            make_zip({"a": ""}),
        )
        eventually(lambda: processes_with(b"time.sleep(4343)"), 30)
        client.delete(sleeper)
        eventually(lambda: not processes_with(b"time.sleep(4343)"), 20)


@pytest.mark.parametrize("path", ["/", "/etc", "{home}/..", "{home}/../../../etc"])
def test_host_folders_outside_the_allowed_roots_are_refused(platform: Server, path: str) -> None:
    """A host_mount data store outside LOOM_HOST_MOUNT_ROOTS, or with `..`, is a 400 naming
    the field; the job is never stored."""
    folder = path.format(home=platform.home)
    store = (
        "data_stores:\n  - id: disk\n    type: mount_volume\n"
        "    training_data: {container: data}\n"
        f"    connection: {{type: host_mount, path: '{folder}'}}\n"
    )
    with platform.client() as client:
        with pytest.raises(ClientError) as refused:
            client.submit(manifest("true") + store, make_zip({"a": ""}))
        assert refused.value.status == 400
        assert "host folder" in str(refused.value) or "'..'" in str(refused.value)
        assert client.jobs()["jobs"] == []


def test_learners_get_an_allow_listed_environment(platform: Server) -> None:
    """A learner sees its job's variables and the manifest's `environment.env`, never the
    server's own (here a fake AWS secret)."""
    command = "env | sort"
    extra = "environment:\n  env: {MY_FLAG: 'on'}\n"
    with platform.client() as client:
        job_id = client.submit(manifest(command) + extra, make_zip({"a": ""}))
        job = wait_for_state(client, job_id, FINAL)
        names = {x["line"].split("=", 1)[0]: x["line"] for x in client.logs(job_id)}
    assert job["state"] == "COMPLETED", job
    assert names["MY_FLAG"] == "MY_FLAG=on"
    assert "AWS_SECRET_ACCESS_KEY" not in names
    assert not [n for n in names if n.startswith("LOOM_")]
    assert {"DATA_DIR", "RESULT_DIR", "TRAINING_ID", "PATH", "HOME"} <= set(names)
