"""`loom.learner.pod`'s own steps: the credentials taken out of the environment, the rank and
gang from the pod's index and DNS names (or a TrainJob runtime's master), the spec moved under
the pod's scratch, and the termination message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loom.learner import pod


def test_the_credentials_leave_the_environment_as_they_are_read() -> None:
    environ = {pod.CREDENTIALS: json.dumps({"token": "t", "secrets": {"s": {"k": "v"}}})}
    assert pod.take_credentials(environ) == ("t", {"s": {"k": "v"}})
    assert pod.CREDENTIALS not in environ
    with pytest.raises(SystemExit, match="not started by Loom"):
        pod.take_credentials({})


def test_the_gang_is_the_pods_dns_names_or_the_runtimes_master() -> None:
    environ = {"LOOM_POD_HOSTS": "job-a1-{index}.job-a1"}
    gang = pod.gang(environ, 3)
    assert gang.hosts == ("job-a1-0.job-a1", "job-a1-1.job-a1", "job-a1-2.job-a1")
    assert (gang.host, gang.coordinator_port) == ("job-a1-0.job-a1", 29500)
    trainer = pod.gang({**environ, "PET_MASTER_ADDR": "m.svc", "PET_MASTER_PORT": "29400"}, 3)
    assert (trainer.host, trainer.coordinator_port) == ("m.svc", 29400)


def spec_folder(tmp_path: Path, framework: str) -> Path:
    folder = tmp_path / "specs"
    folder.mkdir()
    for n in (1, 2):
        spec = {
            "job_id": "training-x",
            "learner_id": n,
            "roots": {"jobs": "/platform/jobs"},
            "status_file": f"/platform/jobs/training-x/learner-{n}/status.json",
            "dirs": {"JOB_STATE_DIR": "/platform/jobs/training-x/state"},
            "env": {"GPU_COUNT": "2", "LEARNER_ID": str(n)},
            "gang": {"framework": framework},
        }
        (folder / f"spec-{n}.json").write_text(json.dumps(spec))
    return folder


def test_the_spec_is_this_ranks_moved_under_scratch_with_its_variables(tmp_path: Path) -> None:
    environ = {
        "JOB_COMPLETION_INDEX": "1",
        "LOOM_POD_SPECS": str(spec_folder(tmp_path, "horovod")),
        "LOOM_POD_SCRATCH": str(tmp_path / "scratch"),
        "LOOM_POD_HOSTS": "j-{index}.j",
        "LOOM_POD_LEARNERS": "2",
    }
    spec = pod.learner_spec(environ)
    assert spec["learner_id"] == 2
    assert spec["status_file"].startswith(str(tmp_path / "scratch" / "jobs"))
    assert spec["transfer"] == "api"
    env = spec["env"]
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("1", "2", "j-0.j")
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"  # the pod's own devices, numbered from 0
    hostfile = Path(spec["dirs"]["JOB_STATE_DIR"]) / "hostfile"
    assert hostfile.read_text() == "j-0.j slots=1\nj-1.j slots=1\n"


def test_the_termination_message_keeps_the_outcome_within_the_limit(tmp_path: Path) -> None:
    status, target = tmp_path / "status.json", tmp_path / "termination-log"
    status.write_text(json.dumps({"state": "FAILED", "exit_code": 3, "message": "x" * 10_000}))
    pod.termination_message(status, target)
    kept = json.loads(target.read_text())
    assert (kept["state"], kept["exit_code"]) == ("FAILED", 3)
    assert len(target.read_bytes()) <= pod.MESSAGE_LIMIT
    pod.termination_message(tmp_path / "missing.json", tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_the_process_can_make_itself_not_dumpable() -> None:
    import subprocess
    import sys

    code = "from loom.learner.pod import not_dumpable; import ctypes; print(not_dumpable())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
