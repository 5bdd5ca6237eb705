"""Halt and resume from checkpoints, gang failures and restarts, memory limits."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from loom.client import LoomClient
from loom.store import users as user_rows
from loom.store.db import Database
from tests.conftest import (
    Seat,
    Server,
    database_free,
    eventually,
    make_zip,
    manifest,
    processes_with,
    wait_for_state,
)

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "HALTED"}

EPOCHS = (
    "import os, time\n"
    "rank = int(os.environ['RANK'])\n"
    "ckpt = os.path.join(os.environ['CHECKPOINT_DIR'], 'epoch.txt')\n"
    "start = int(open(ckpt).read()) if os.path.exists(ckpt) else 0\n"
    "pids = os.path.join(os.environ['JOB_STATE_DIR'], f'pid-{{rank}}')\n"
    "open(pids, 'w').write(str(os.getpid()))\n"
    "for epoch in range(start + 1, {epochs} + 1):\n"
    "    time.sleep({pause})\n"
    "    print(f'rank {{rank}} epoch {{epoch}}', flush=True)\n"
    "    if rank == 0:\n"
    "        open(ckpt + '.tmp', 'w').write(str(epoch))\n"
    "        os.replace(ckpt + '.tmp', ckpt)\n"
)


def epochs_job(client: LoomClient, epochs: int, pause: float, **fields: object) -> str:
    script = EPOCHS.format(epochs=epochs, pause=pause)
    return client.submit(manifest("python epochs.py", **fields), make_zip({"epochs.py": script}))


def lines_of(client: LoomClient, job_id: str) -> list[str]:
    return [x["line"] for x in client.logs(job_id, pagesize=10_000)]


def test_halt_then_resume_continues_from_the_checkpoint(seat: Seat) -> None:
    """Halt stops the learners within the grace period; resume starts them again with the same
    CHECKPOINT_DIR, and the epoch counter goes on rather than starting from 0."""
    with seat.client() as client:
        job_id = epochs_job(client, epochs=12, pause=0.25)
        while sum("epoch" in line for line in lines_of(client, job_id)) < 3:
            time.sleep(0.05)
        began = time.monotonic()
        client.halt(job_id)
        wait_for_state(client, job_id, {"HALTED"}, timeout=20)
        assert time.monotonic() - began < 10  # within the default grace of 10 s
        reached = int(lines_of(client, job_id)[-1].split()[-1])
        assert client.job(job_id)["finished_at"] is not None
        client.resume(job_id)
        assert client.job(job_id)["finished_at"] is None  # running again, not finished
        job = wait_for_state(client, job_id, FINAL, timeout=60)
        assert job["state"] == "COMPLETED", job
        assert job["attempt"] == 2
        second = [x["line"] for x in client.logs(job_id, pagesize=10_000) if x["attempt"] == 2]
    numbers = [int(line.split()[-1]) for line in second]
    assert numbers[0] > 1 and numbers[0] >= reached  # continued, not from epoch 1
    assert numbers[-1] == 12


def kill_learner(server: Server, job_id: str, rank: int) -> None:
    pid_file = server.home / "jobs" / job_id / "state" / f"pid-{rank}"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.6)
    os.kill(host_pid(job_id, rank), signal.SIGKILL)
    pid_file.unlink()


def host_pid(job_id: str, rank: int) -> int:
    """The host's pid of a learner's script (inside its sandbox it has a pid of its own)."""
    wanted = {f"TRAINING_ID={job_id}".encode(), f"RANK={rank}".encode()}
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes()
            environ = set((entry / "environ").read_bytes().split(b"\0"))
        except (OSError, ValueError):
            continue
        if b"epochs.py" in command and wanted <= environ:
            return int(entry.name)
    raise AssertionError(f"no learner of rank {rank} of {job_id} is running")


def test_killed_learner_restarts_the_gang(seat: Seat) -> None:
    """kill -9 of one learner of two under OnFailure: the other is stopped, the gang restarts
    from its checkpoint, and the job completes; each attempt is recorded."""
    with seat.client() as client:
        job_id = epochs_job(
            client, epochs=8, pause=0.2, learners=2, restart_policy="OnFailure", max_restarts=2
        )
        wait_for_state(client, job_id, {"PROCESSING"})
        kill_learner(seat, job_id, rank=1)
        job = wait_for_state(client, job_id, FINAL, timeout=90)
    assert job["state"] == "COMPLETED", job
    assert job["attempt"] == 2
    states = [e["state"] for e in job["history"]]
    assert states.count("PENDING") == 2
    first = [lr for lr in job["learner_status"] if lr["attempt"] == 1]
    assert {lr["learner"] for lr in first} == {1, 2}
    killed = next(lr for lr in first if lr["learner"] == 2)
    assert (killed["state"], killed["exit_code"]) == ("FAILED", 137)


def test_killed_learner_fails_the_job_under_never(seat: Seat) -> None:
    """Under Never, kill -9 of one learner fails the job, and the other learner is stopped
    within seconds instead of hanging."""
    with seat.client() as client:
        job_id = epochs_job(client, epochs=200, pause=0.2, learners=2)
        wait_for_state(client, job_id, {"PROCESSING"})
        kill_learner(seat, job_id, rank=1)
        job = wait_for_state(client, job_id, FINAL, timeout=30)
        assert job["state"] == "FAILED"
        assert job["error_code"] == "C201"
        assert "exit code 137" in job["status_message"]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            job = client.job(job_id)
            if all(lr["finished_at"] for lr in job["learner_status"]):
                break
            time.sleep(0.1)
    other = next(lr for lr in job["learner_status"] if lr["learner"] == 1)
    assert other["state"] in {"HALTED", "FAILED"}
    assert other["finished_at"] is not None


def test_exit_code_policy_does_not_retry_a_program_error(seat: Seat) -> None:
    """Under ExitCode, exit 3 is the program's own verdict: no restart."""
    with seat.client() as client:
        job_id = client.submit(
            manifest("exit 3", restart_policy="ExitCode", max_restarts=3), make_zip({"a": ""})
        )
        job = wait_for_state(client, job_id, FINAL, timeout=30)
    assert (job["state"], job["attempt"]) == ("FAILED", 1)
    assert "permanent" in job["status_message"]


@pytest.mark.parametrize("isolation", ["auto", "off"])
@database_free
def test_memory_hog_is_stopped_with_the_memory_error(tmp_path: Path, isolation: str) -> None:
    """A learner that grows past its manifest memory is stopped with C202 and a message that
    says so: by its cgroup in a sandbox, by the wrapper's own watch when unconfined (which
    `loom capacity` then says)."""
    hog = (
        "import time\n"
        "chunks = []\n"
        "for i in range(100):\n"
        "    chunks.append(bytearray(40 * 2**20))\n"
        "    print(f'{(i + 1) * 40} MiB', flush=True)\n"
        "    time.sleep(0.1)\n"
    )
    server = Server(tmp_path / "home", LOOM_ISOLATION=isolation).start()
    try:
        with server.client() as client:
            confined = client.capacity()["isolation"]["confined"]
            job_id = client.submit(
                manifest("python hog.py", memory="300MiB"), make_zip({"hog.py": hog})
            )
            job = wait_for_state(client, job_id, FINAL, timeout=60)
            printed = lines_of(client, job_id)
    finally:
        server.stop()
    if isolation == "off":
        assert not confined
    assert (job["state"], job["error_code"]) == ("FAILED", "C202")
    assert "memory limit of 300 MiB" in job["status_message"]
    assert int(printed[-1].split()[0]) < 600  # stopped soon after crossing the line


def test_resume_only_from_halted(seat: Seat, tmp_path: Path) -> None:
    """Resuming a job that is not halted is a 409 that says why."""
    from loom.client import ClientError

    with seat.client() as client:
        job_id = client.submit(manifest("true"), make_zip({"a": ""}))
        wait_for_state(client, job_id, FINAL)
        with pytest.raises(ClientError) as caught:
            client.resume(job_id)
    assert caught.value.status == 409
    assert "only a halted job resumes" in caught.value.message


def test_a_learner_whose_token_is_revoked_stops(server: Server) -> None:
    """Its attempt was superseded (a new leader started the job again) or the job is gone:
    nobody will hear from it again, so it stops rather than compute for nothing."""
    script = f"revoked_{time.time_ns()}.py"  # its name is how the test finds its process
    looper = "import time\nwhile True:\n    print('x', flush=True)\n    time.sleep(0.2)\n"
    with server.client() as client:
        job_id = client.submit(manifest(f"python {script}"), make_zip({script: looper}))
        wait_for_state(client, job_id, {"PROCESSING"})
        eventually(lambda: processes_with(script.encode()))
        db = Database(server.database_url)
        with db.session() as session:
            user_rows.revoke_job_tokens(session, job_id)
        db.close()
        eventually(lambda: not processes_with(script.encode()), timeout=30)
