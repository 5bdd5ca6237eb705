"""The REST API with the real server on loopback and real learner processes."""

from __future__ import annotations

import io
import json
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from loom.client import ClientError, LoomClient
from loom.client.archive import zip_folder
from tests.conftest import (
    ROOT,
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


def submit(
    client: LoomClient, command: str, files: dict[str, str] | None = None, **kw: object
) -> str:
    return client.submit(manifest(command, **kw), make_zip(files or {"noop.txt": ""}))


@pytest.mark.slow
@database_free  # a minute of training; the registry's rows on PostgreSQL: test_models, the fuzz
def test_digits_example_completes_with_accuracy_and_model(seat: Seat, tmp_path: Path) -> None:
    """The example trains as a platform job: COMPLETED, accuracy in its logs, model and its
    reference data in results."""
    example = ROOT / "examples" / "digits-pytorch"
    with seat.client() as client:
        job_id = client.submit((example / "manifest.yml").read_bytes(), zip_folder(example))
        job = wait_for_state(client, job_id, FINAL, timeout=180)
        assert job["state"] == "COMPLETED", job
        lines = [line["line"] for line in client.logs(job_id, pagesize=10_000)]
        accuracy = [float(x.split(": ")[1]) for x in lines if x.startswith("test accuracy:")]
        assert accuracy and accuracy[0] >= 0.95
        target = client.download(job_id, "results", tmp_path / "results.zip")
    names = zipfile.ZipFile(target).namelist()
    assert "model/digits_cnn.pt" in names
    assert "model/reference.npz" in names  # what a deployment of it is watched against
    assert "learner-1/training-log.txt" in names


def test_failing_command_reports_exit_code_and_last_lines(seat: Seat) -> None:
    """A command that exits non-zero ends FAILED C201 with its code and its last lines."""
    with seat.client() as client:
        job_id = submit(client, "echo preparing; echo 'disk on fire' >&2; exit 3")
        job = wait_for_state(client, job_id, FINAL)
    assert job["state"] == "FAILED"
    assert job["error_code"] == "C201"
    assert "exit code 3" in job["status_message"]
    assert "disk on fire" in job["status_message"]
    assert job["learner_status"][0]["exit_code"] == 3


def test_wait_listens_to_the_job_rather_than_asking_again(seat: Seat) -> None:
    """`LoomClient.wait` returns at the state asked for, then at the end, having read the job
    only when its state stream (`states=true&lines=false`: no log lines) said it changed: a
    few requests, not one per `poll_s`. A job that has ended returns at once, whatever was
    asked; a deadline passed is a ClientError."""
    chatty = "for i in $(seq 30); do echo line $i; sleep 0.1; done"
    sent: list[str] = []
    with seat.client() as client:
        client._http.event_hooks["request"].append(lambda r: sent.append(r.url.path))
        job_id = submit(client, chatty)
        sent.clear()
        running = client.wait({"id": job_id}, states={"PROCESSING"}, poll_s=0.05)
        done = client.wait(job_id, poll_s=0.05)
        asked = len(sent)
        again = client.wait({"id": job_id}, states={"PROCESSING"}, timeout=5)
        slow = submit(client, "sleep 60")
        with pytest.raises(ClientError, match=r"is still \w+ after 1 s"):
            client.wait(slow, timeout=1)
        client.halt(slow)
        other = submit(client, chatty)
        kinds = []
        params = {"follow": "true", "states": "true", "lines": "false"}
        auth = {"Authorization": f"Bearer {seat.token}"}
        url = f"{seat.url}/v1/jobs/{other}/logs"
        with httpx.stream("GET", url, params=params, headers=auth, timeout=60) as stream:
            kinds = [line[6:].strip() for line in stream.iter_lines() if line.startswith("event:")]
        lines = client.logs(other, pagesize=100)
    assert running["state"] == "PROCESSING"
    assert done["state"] == again["state"] == "COMPLETED"
    assert asked <= 8, sent  # polling every 0.05 s for 3 s would have been ~60
    assert set(kinds) == {"state", "end"} and kinds[-1] == "end", kinds
    assert len([x for x in lines if x["line"].startswith("line ")]) == 30


def test_learner_environment(seat: Seat) -> None:
    """The learner sees FfDL's variables, Loom's python, and none of the platform's secrets."""
    script = (
        "import json, os, sys\n"
        "keys = ['DATA_DIR','MODEL_DIR','RESULT_DIR','LOG_DIR','CHECKPOINT_DIR','JOB_STATE_DIR',"
        "'TRAINING_ID','LEARNER_ID','NUM_LEARNERS','GPU_COUNT','MASTER_ADDR','MASTER_PORT',"
        "'WORLD_SIZE','RANK']\n"
        "env = {k: os.environ.get(k) for k in keys}\n"
        "env['cwd'] = os.getcwd()\n"
        "env['python'] = sys.executable\n"
        "env['loom_vars'] = sorted(k for k in os.environ if k.startswith('LOOM_'))\n"
        "print(json.dumps(env))\n"
    )
    with seat.client() as client:
        job_id = submit(client, "python env.py", {"env.py": script})
        job = wait_for_state(client, job_id, FINAL)
        assert job["state"] == "COMPLETED", job
        env = json.loads(client.logs(job_id)[0]["line"])
    assert env["TRAINING_ID"] == job_id
    assert env["LEARNER_ID"] == "1"
    assert env["NUM_LEARNERS"] == "1"
    assert env["WORLD_SIZE"] == "1" and env["RANK"] == "0"
    assert Path(env["cwd"]).resolve() == Path(env["MODEL_DIR"]).resolve()
    assert Path(env["python"]).resolve() == Path(sys.executable).resolve()
    assert env["loom_vars"] == []
    for key in ("DATA_DIR", "RESULT_DIR", "CHECKPOINT_DIR", "LOG_DIR"):
        assert env[key].startswith(str(seat.home))


def test_admin_token_never_reaches_the_learner(tmp_path: Path) -> None:
    """With LOOM_ADMIN_TOKEN set for the server, the learner's environment does not hold it."""
    token = "admin-secret-5c1e9a07d3b24f68a0e7c2d91b4f3a65"  # strong enough to start
    srv = Server(tmp_path / "home", LOOM_ADMIN_TOKEN=token).start()
    try:
        with LoomClient(srv.url, token) as client:
            script = "import os\nprint(any('admin-secret' in v for v in os.environ.values()))\n"
            job_id = submit(client, "python probe.py", {"probe.py": script})
            wait_for_state(client, job_id, FINAL)
            assert [line["line"] for line in client.logs(job_id)] == ["False"]
            listing = json.dumps(client.job(job_id))
            assert token not in listing
    finally:
        srv.stop()


def test_completed_follows_the_learners_exit_not_a_poll(tmp_path: Path) -> None:
    """With the lifecycle's reconciling poll an hour apart, jobs still end as soon as their
    learner does: the wrapper's outcome report changes the state, in one transaction when there
    is no model, and with the registration just after when there is one."""
    srv = Server(tmp_path / "home", LOOM_WATCHDOG_INTERVAL_S="3600").start()
    try:
        with srv.client() as client:
            plain = submit(client, "echo done")
            trained = submit(client, "mkdir -p $RESULT_DIR/model && echo w > $RESULT_DIR/model/w")
            # Far less than the poll's hour: only the learners' reports can have ended them.
            jobs = {job_id: wait_for_state(client, job_id, FINAL) for job_id in (plain, trained)}
        assert {job["state"] for job in jobs.values()} == {"COMPLETED"}, jobs
        plain_states = [event["state"] for event in jobs[plain]["history"]]
        assert plain_states[-2:] == ["PROCESSING", "COMPLETED"], plain_states
        trained_states = [event["state"] for event in jobs[trained]["history"]]
        assert trained_states[-2:] == ["STORING", "COMPLETED"], trained_states
        assert "registered model version 1" in jobs[trained]["status_message"], jobs[trained]
    finally:
        srv.stop()


def test_log_paging_like_ffdl(seat: Seat) -> None:
    """pos is 1-based from the start, negative from the end; pagesize bounds the page."""
    with seat.client() as client:
        job_id = submit(client, "for i in $(seq 1 50); do echo line $i; done")
        wait_for_state(client, job_id, FINAL)
        texts = lambda **kw: [x["line"] for x in client.logs(job_id, **kw)]  # noqa: E731
        assert texts(pagesize=100) == [f"line {i}" for i in range(1, 51)]
        assert texts(pos=11, pagesize=5) == [f"line {i}" for i in range(11, 16)]
        assert texts(pos=-1, pagesize=3) == ["line 48", "line 49", "line 50"]
        assert texts(pos=-3, pagesize=2) == ["line 47", "line 48"]
        assert texts(since=str(int(time.time() * 1000) + 60_000)) == []
        tenth = client.logs(job_id, pos=10, pagesize=1)[0]
        assert texts(after=tenth["id"], pagesize=5) == [f"line {i}" for i in range(11, 16)]
        assert texts(after=client.logs(job_id, pos=-1, pagesize=1)[0]["id"]) == []
        with pytest.raises(ClientError) as both:
            client._request("GET", f"/v1/jobs/{job_id}/logs", params={"pos": 3, "after": 1})
        assert both.value.status == 400 and "after" in str(both.value)


def test_follow_streams_lines_live_and_ends_with_the_job(seat: Seat) -> None:
    """`follow=true` delivers every line in order, while the job runs, then an end event."""
    with seat.client() as client:
        job_id = submit(client, "for i in $(seq 1 20); do echo tick $i; sleep 0.05; done")
        events = list(client.follow(job_id))
    lines = [data["line"] for kind, data in events if kind == "line"]
    assert lines == [f"tick {i}" for i in range(1, 21)]
    assert events[-1] == ("end", {"job_id": job_id, "state": "COMPLETED"})


def test_halt_stops_a_running_job(seat: Seat) -> None:
    """PATCH halt stops every learner (process group included); the job ends HALTED."""
    with seat.client() as client:
        job_id = submit(client, "echo started; sleep 300 & wait")
        wait_for_state(client, job_id, {"PROCESSING"})
        while not client.logs(job_id):
            time.sleep(0.05)
        began = time.monotonic()
        client.halt(job_id)
        job = wait_for_state(client, job_id, FINAL, timeout=30)
        assert job["state"] == "HALTED"
        assert time.monotonic() - began < 12
        states = [e["state"] for e in job["history"]]
        assert states[-1] == "HALTED"


def test_halt_of_a_finished_job_is_a_conflict(seat: Seat) -> None:
    """Halting a completed job answers 409 and changes nothing."""
    with seat.client() as client:
        job_id = submit(client, "true")
        wait_for_state(client, job_id, FINAL)
        response = httpx.patch(
            f"{seat.url}/v1/jobs/{job_id}",
            json={"action": "halt"},
            headers={"Authorization": f"Bearer {seat.token}"},
        )
        assert response.status_code == 409
        assert client.job(job_id)["state"] == "COMPLETED"


def test_definition_and_delete(seat: Seat, tmp_path: Path) -> None:
    """The submitted code downloads byte for byte; DELETE removes the job and its logs."""
    code = make_zip({"main.py": "print('hi')"})
    with seat.client() as client:
        job_id = client.submit(manifest("python main.py"), code)
        wait_for_state(client, job_id, FINAL)
        saved = client.download(job_id, "definition", tmp_path / "def.zip")
        assert saved.read_bytes() == code
        client.delete(job_id)
        headers = {"Authorization": f"Bearer {seat.token}"}
        for path in ("", "/logs", "/metrics", "/definition", "/results"):
            assert (
                httpx.get(f"{seat.url}/v1/jobs/{job_id}{path}", headers=headers).status_code == 404
            )
    assert not (seat.home / "jobs" / job_id).exists()


def test_unsupported_data_store_fails_at_downloading(seat: Seat) -> None:
    """A store the platform cannot use yet fails the job with S302 naming the store."""
    stores = (
        "\ndata_stores:\n  - id: my-cos\n    type: swift_datastore\n"
        "    training_data: {container: d}\n"
        "    connection: {auth_url: 'http://swift.example', user_name: u, password: hunter2}\n"
    )
    with seat.client() as client:
        job_id = client.submit(manifest("true") + stores, make_zip({"a": ""}))
        job = wait_for_state(client, job_id, FINAL)
    assert (job["state"], job["error_code"]) == ("FAILED", "S302")
    assert "my-cos" in job["status_message"]
    assert "hunter2" not in json.dumps(job)
    # It failed before training: DOWNLOADING itself may be missing from the history, as the
    # learner's progress report can arrive after the watcher has read its outcome.
    states = [e["state"] for e in job["history"]]
    assert states[-1] == "FAILED" and "PROCESSING" not in states, states


def test_local_data_store_is_data_dir(server: Server, tmp_path: Path) -> None:
    """A host-mount store's training data folder is the learner's DATA_DIR; results are copied."""
    (tmp_path / "store" / "train").mkdir(parents=True)
    (tmp_path / "store" / "train" / "data.csv").write_text("1,2,3\n")
    stores = (
        f"\ndata_stores:\n  - id: disk\n    type: mount_volume\n"
        f"    training_data: {{container: train}}\n    training_results: {{container: out}}\n"
        f"    connection: {{type: host_mount, path: '{tmp_path / 'store'}'}}\n"
    )
    command = 'cat "$DATA_DIR/data.csv" && echo done > "$RESULT_DIR/out.txt"'
    with server.client() as client:
        job_id = client.submit(manifest(command) + stores, make_zip({"a": ""}))
        job = wait_for_state(client, job_id, FINAL)
        assert job["state"] == "COMPLETED", job
        assert client.logs(job_id)[0]["line"] == "1,2,3"
    assert (tmp_path / "store" / "out" / job_id / "out.txt").read_text() == "done\n"


def test_list_filters_and_pages(seat: Seat) -> None:
    """GET /v1/jobs pages newest first and filters by state."""
    with seat.client() as client:
        ids = [submit(client, "true") for _ in range(3)]
        failing = submit(client, "false")
        for job_id in [*ids, failing]:
            wait_for_state(client, job_id, FINAL)
        page = client.jobs(limit=2)
        assert page["total"] == 4 and page["total_exact"] and len(page["jobs"]) == 2
        assert page["jobs"][0]["id"] == failing
        failed = client.jobs(state=["FAILED"])
        assert [j["id"] for j in failed["jobs"]] == [failing]
        assert {j["id"] for j in client.jobs(state=["COMPLETED"])["jobs"]} == set(ids)
        second = client.jobs(limit=2, cursor=page["next_cursor"])
        assert [j["id"] for j in page["jobs"] + second["jobs"]] == [failing, *reversed(ids)]
        assert second["next_cursor"] is None and second["total"] == 4
        with pytest.raises(ClientError) as bad:
            client.jobs(cursor="not-a-cursor")
        assert bad.value.status == 400 and "cursor" in str(bad.value)


def test_results_zip_is_readable_while_empty(seat: Seat) -> None:
    """A job with no results still downloads a valid (empty) zip, not an error."""
    with seat.client() as client:
        job_id = submit(client, "true")
        wait_for_state(client, job_id, FINAL)
        response = httpx.get(
            f"{seat.url}/v1/jobs/{job_id}/results",
            headers={"Authorization": f"Bearer {seat.token}"},
        )
    assert response.status_code == 200
    assert "learner-1/training-log.txt" in zipfile.ZipFile(io.BytesIO(response.content)).namelist()


def test_health_and_openapi(seat: Seat) -> None:
    """/health answers without a token; /openapi.json documents the job endpoints, and it and
    /docs and /redoc answer only a signed-in caller (LOOM_DOCS_PUBLIC opens them)."""
    assert httpx.get(f"{seat.url}/health").json()["status"] == "ok"
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert httpx.get(f"{seat.url}{path}").status_code == 401, path
    signed_in = {"Authorization": f"Bearer {seat.token}"}
    assert "swagger" in httpx.get(f"{seat.url}/docs", headers=signed_in).text.lower()
    spec = httpx.get(f"{seat.url}/openapi.json", headers=signed_in).json()
    assert "/v1/jobs" in spec["paths"]
    assert "/v1/jobs/{job_id}/logs" in spec["paths"]


def test_leftover_background_process_does_not_hang_the_job(seat: Seat) -> None:
    """A command that leaves a process holding its output still completes, and the leftover
    is stopped with it."""
    with seat.client() as client:
        job_id = submit(client, "sleep 121.5 & echo done")
        job = wait_for_state(client, job_id, FINAL, timeout=30)
    assert job["state"] == "COMPLETED"
    assert not processes_with(b"121.5")


def test_delete_of_a_running_job_stops_its_processes(seat: Seat) -> None:
    """DELETE of a running job leaves none of its processes behind."""
    with seat.client() as client:
        job_id = submit(client, "sleep 301.5")
        wait_for_state(client, job_id, {"PROCESSING"})
        eventually(lambda: processes_with(b"301.5"))
        client.delete(job_id)
    eventually(lambda: not processes_with(b"301.5"))


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
