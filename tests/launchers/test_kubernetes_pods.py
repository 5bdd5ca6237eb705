"""The Kubernetes launcher end to end, its pods emulated as processes on this machine
(`kube_emulator`): the objects it renders, the pod entry and Loom's wrapper are the real ones,
and the learners reach the platform only through its API (no shared disk)."""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Server, database_free, make_zip, manifest, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow, database_free]
FINAL = {"COMPLETED", "FAILED", "HALTED"}


@pytest.fixture(scope="module", params=["job", "trainjob"])
def platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A platform whose jobs become indexed Jobs, then one whose jobs become TrainJobs (their
    pods made from the TrainJob's trainer and runtime patch, as Trainer's JobSet would)."""
    home = tmp_path_factory.mktemp(f"kube-{request.param}") / "home"
    server = Server(
        home,
        module="tests.launchers.kube_emulator",
        LOOM_LEARNER_CHECKPOINT_SYNC_S="1",
        LOOM_KUBE_KIND=request.param,
    ).start()
    yield server
    server.stop()


def test_a_gang_runs_in_pods_with_its_rank_and_reports(platform: Server, tmp_path: Path) -> None:
    rank = (
        "import os\n"
        "print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], 'learner', "
        "os.environ['LEARNER_ID'])\n"
        "open(os.environ['RESULT_DIR'] + '/r.txt', 'w').write('done')\n"
    )
    with platform.client() as loom:
        job = loom.submit(manifest("python rank.py", learners=2), make_zip({"rank.py": rank}))
        done = wait_for_state(loom, job, FINAL, timeout=90)
        assert done["state"] == "COMPLETED", done
        text = "\n".join(str(line["line"]) for line in loom.logs(job, pagesize=1000))
        results = loom.download(job, "results", tmp_path / "results.zip")
    assert "rank 0 of 2 learner 1" in text
    assert "rank 1 of 2 learner 2" in text
    with zipfile.ZipFile(results) as got:  # uploaded by the pods' wrappers through the API
        assert [n for n in got.namelist() if n.endswith("r.txt")]


def test_a_failing_learner_fails_the_job_with_its_exit_code(platform: Server) -> None:
    with platform.client() as loom:
        job = loom.submit(manifest("exit 3"), make_zip({"x.py": ""}))
        done = wait_for_state(loom, job, FINAL, timeout=90)
    assert done["state"] == "FAILED"
    assert "exit code 3" in done["status_message"]


def test_halt_stops_the_pods_and_resume_goes_on_from_the_checkpoint(platform: Server) -> None:
    counter = (
        "import os, time\n"
        "path = os.path.join(os.environ['CHECKPOINT_DIR'], 'runs')\n"
        "runs = int(open(path).read()) if os.path.exists(path) else 0\n"
        "open(path, 'w').write(str(runs + 1))\n"
        "print('run', runs + 1, flush=True)\n"
        "time.sleep(0 if runs else 300)\n"
    )
    with platform.client() as loom:
        job = loom.submit(manifest("python count.py", learners=2), make_zip({"count.py": counter}))
        wait_for_state(loom, job, {"PROCESSING"}, timeout=90)
        time.sleep(3)  # the checkpoint is synced to the platform every second
        loom.halt(job)
        assert wait_for_state(loom, job, FINAL, timeout=60)["state"] == "HALTED"
        loom.resume(job)
        done = wait_for_state(loom, job, FINAL, timeout=90)
        text = "\n".join(str(line["line"]) for line in loom.logs(job, pagesize=1000))
    assert done["state"] == "COMPLETED", done
    assert "run 2" in text  # the new attempt's pods found the first one's checkpoint


@pytest.mark.skipif(os.geteuid() != 0, reason="as root, the pod drops every capability")
def test_user_code_cannot_read_the_credentials(platform: Server) -> None:
    """The token came in the pod's environment: the wrapper took it out and made itself
    non-dumpable, so the command (same uid, same container) finds it nowhere in /proc."""
    probe = (
        "import os\n"
        "found = 'LOOM_POD_CREDENTIALS' in os.environ\n"
        "readable = []\n"
        "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "    for part in ('environ', 'mem', 'cmdline'):\n"
        "        try:\n"
        "            data = open(f'/proc/{pid}/{part}', 'rb').read(1 << 20)\n"
        "        except OSError:\n"
        "            continue\n"
        "        if b'LOOM_POD_CREDENTIALS' in data or b'\"token\"' in data:\n"
        "            readable.append((pid, part))\n"
        "print('in my env:', found)\n"
        "print('found in:', readable)\n"
    )
    with platform.client() as loom:
        job = loom.submit(manifest("python probe.py"), make_zip({"probe.py": probe}))
        done = wait_for_state(loom, job, FINAL, timeout=90)
        text = "\n".join(str(line["line"]) for line in loom.logs(job, pagesize=1000))
    assert done["state"] == "COMPLETED", done
    assert "in my env: False" in text
    assert "found in: []" in text


def test_the_platform_home_is_not_the_pods(platform: Server) -> None:
    """The learners got their code over the API: nothing of theirs is under LOOM_HOME/jobs."""
    jobs = Path(platform.home) / "jobs"
    written = [p for p in jobs.rglob("*") if p.name in ("status.json", "spool.jsonl")]
    assert written == []
