"""Floods by an ordinary user's job, and reads of a huge job: each is held to its budget, and
the platform keeps serving everyone else. Needs the sandbox (the MLflow endpoint lives in the
job's network); the reads need none."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest

from loom.client import LoomClient
from loom.store import metrics as metric_rows
from loom.store.db import Database
from tests.conftest import Server, make_zip, manifest, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
# Params of 6,000 characters, 100 a request, through the learner's own MLflow endpoint (as
# MLflow's client would send them), until refused or 300 MiB are sent.
FLOOD = """
import json, os, time, urllib.error, urllib.request
url, token = os.environ["MLFLOW_TRACKING_URI"], os.environ["MLFLOW_TRACKING_TOKEN"]
def post(route, body):
    request = urllib.request.Request(
        f"{url}/api/2.0/mlflow/{route}", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())
run = post("runs/create", {"experiment_id": "0"})["run"]["info"]["run_id"]
sent = 0
for batch in range(500):
    params = [{"key": f"p{batch}-{i}", "value": "v" * 6000} for i in range(100)]
    try:
        post("runs/log-batch", {"run_id": run, "params": params})
    except urllib.error.HTTPError as exc:
        print("REFUSED", exc.code, json.loads(exc.read())["error_code"], sent >> 20, flush=True)
        break
    sent += 600_000
print("SENT MiB", sent >> 20, flush=True)
"""


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("budgets") / "home").start()
    yield srv
    srv.stop()


def user(server: Server, name: str) -> tuple[LoomClient, str]:
    with server.client() as admin:
        token = str(admin.add_user(name)["token"])
    return server.client(token), token


def lines(client: LoomClient, job_id: str) -> list[str]:
    return [str(entry["line"]) for entry in client.logs(job_id, pagesize=10_000)]


class Watch:
    """While it runs: another user's calls timed, and a process's resident memory sampled."""

    def __init__(self, call: Callable[[], object], pid: int) -> None:
        self.call, self.pid = call, pid
        self.latencies: list[float] = []
        self.peak = self.base = psutil.Process(pid).memory_info().rss
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._time, self._rss)]

    def _time(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            self.call()
            self.latencies.append(time.perf_counter() - began)
            self._stop.wait(0.1)

    def _rss(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, psutil.Process(self.pid).memory_info().rss)

    def __enter__(self) -> Watch:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def said(self) -> str:
        slowest = max(self.latencies, default=0.0)
        median = statistics.median(self.latencies) if self.latencies else 0.0
        grown = (self.peak - self.base) / 2**20
        return (
            f"others' calls: median {median:.3f} s, slowest {slowest:.3f} s; RSS +{grown:.0f} MiB"
        )


def test_a_params_flood_is_refused_and_the_platform_keeps_its_lease(platform: Server) -> None:
    """A 256 MiB job pushes 6 KB params through its MLflow endpoint (into a run it started) as
    fast as it can: it is refused (413) once the job's budget for params and tags, which counts
    all its runs, is spent; the job's log says so, the store keeps no more than the budget, and
    the leader keeps its lease while another user's calls go on being answered."""
    (mallory, _), (alice, _) = user(platform, "mallory"), user(platform, "alice")
    with mallory, alice:
        job_id = mallory.submit(
            manifest("python flood.py", memory="256MiB"), make_zip({"flood.py": FLOOD})
        )
        server_pid = platform.process.pid if platform.process else 0
        with Watch(alice.jobs, server_pid) as watch:
            job = wait_for_state(mallory, job_id, FINAL, timeout=240)
        said = lines(mallory, job_id)
        print(watch.said())
        assert job["state"] == "COMPLETED", (job, said[-20:])
        refused = [x for x in said if x.startswith("REFUSED")]
        assert refused and refused[0].split()[1:3] == ["413", "RESOURCE_LIMIT_EXCEEDED"], said
        assert int(refused[0].split()[3]) <= 16  # MiB accepted before the refusal
        assert any("parameters and tags of this job were cut" in x for x in said), said[-5:]
        runs = mallory.job(job_id)["runs"]
        assert runs, "the flood's run is the job's"
        kept = sum(len(k) + len(v) for run in runs for k, v in run["params"].items())
        assert 0 < kept <= 16 * 2**20
        log = platform.log.read_text()
        assert "lost the lifecycle lease" not in log and "renewing the lifecycle lease" not in log


POINTS = 300_000  # the attack had 1,000,000 (see docs/security.md); the bound is the same


def test_parallel_series_reads_of_a_huge_job_stay_bounded(platform: Server) -> None:
    """Three parallel chart reads of a job with 300,000 points each answer within the points
    budget (every line reduced, its spike kept), and the API's memory grows by a small bounded
    amount, not with the job (it took ~1.7 GB a read of 1,000,000 points, ~500 MB of these)."""
    owner, token = user(platform, "bigjob")
    with owner:
        job_id = owner.submit(manifest("true"), make_zip({"a": ""}))
        assert wait_for_state(owner, job_id, FINAL)["state"] == "COMPLETED"
        fill(platform.database_url, job_id, POINTS)
        answers: list[dict[str, Any]] = []
        server_pid = platform.process.pid if platform.process else 0

        def read() -> None:
            with LoomClient(platform.url, token, timeout=600) as client:
                answers.append(client.metrics(job_id, form="series", points=1000))

        with Watch(lambda: owner.job(job_id), server_pid) as watch:
            readers = [threading.Thread(target=read) for _ in range(3)]
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join(timeout=600)
        print(watch.said())
        assert len(answers) == 3
        for answer in answers:
            line = answer["series"]["train"]["loss"]
            assert len(line["steps"]) <= 1000
            assert answer["downsampled"] == {"train/loss": POINTS, "train/accuracy": POINTS}
            assert max(line["values"]) == 1000.0  # the spike at step 177,777 is kept
        assert watch.peak - watch.base < 150 * 2**20, watch.said()


def fill(database_url: str, job_id: str, count: int) -> None:
    """The job's points, written straight into the store (the set-up, not the attack)."""
    db = Database(database_url)
    rows = [
        (job_id, 1, 1, seq, float(seq), "train", seq, None,
         f'{{"loss": {1000.0 if seq == 177_777 else 1.0 / seq}, "accuracy": {seq / count}}}',
         None)  # the job's own run
        for seq in range(1, count + 1)
    ]  # fmt: skip
    for start in range(0, count, 20_000):  # short transactions: the platform writes meanwhile
        with db.session() as session:
            metric_rows.insert_points(session, rows[start : start + 20_000])
    db.engine.dispose()


SPARSE = """
import os
os.makedirs(os.environ["RESULT_DIR"] + "/model", exist_ok=True)
with open(os.environ["RESULT_DIR"] + "/model/weights.bin", "wb") as out:
    out.truncate(5 << 30)  # 5 GiB that take no disk here, and all of it once copied
with open(os.environ["RESULT_DIR"] + "/model/config.json", "w") as out:
    out.write("{}")
print("wrote a sparse model", flush=True)
"""
FILL = """
import os
for i in range(6):
    with open(os.path.join(os.environ["RESULT_DIR"], f"part-{i}.bin"), "wb") as out:
        out.write(b"\\0" * (9 << 20))
print("wrote 54 MiB", flush=True)
"""


def test_a_sparse_model_is_not_registered_at_its_full_size(platform: Server) -> None:
    """A model of one 5 GiB sparse file is counted at its full size and refused at
    registration (LOOM_MAX_MODEL_MB, 4 GiB), so it never becomes 5 GiB in the artifact store;
    the job says why."""
    owner, _ = user(platform, "sparse")
    with owner:
        job_id = owner.submit(
            manifest("python sparse.py", name="sparse"), make_zip({"sparse.py": SPARSE})
        )
        job = wait_for_state(owner, job_id, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        assert "model was not registered" in job["status_message"], job["status_message"]
        assert "sparse files counted at their full size" in job["status_message"]
        assert owner.models() == []
        stored = sum(
            p.stat().st_blocks * 512
            for p in (platform.home / "artifacts").rglob("*")
            if p.is_file()
        )
        assert stored < 100 * 2**20


def test_a_job_over_its_storage_fails_with_c203(platform: Server) -> None:
    """A job that asks for 10 MB of storage and writes 54 MiB in files under 10 MB each does not
    complete: it fails with C203, naming its limit, even though it exits before the next look."""
    owner, _ = user(platform, "filler")
    with owner:
        job_id = owner.submit(
            manifest("python fill.py", storage="10MB"), make_zip({"fill.py": FILL})
        )
        job = wait_for_state(owner, job_id, FINAL, timeout=120)
        assert job["state"] == "FAILED", job
        assert job["error_code"] == "C203", job
        assert "storage limit" in job["status_message"]
