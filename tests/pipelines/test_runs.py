"""Pipeline runs end to end, with real jobs on a real platform: fan-out and fan-in, conditions,
retries with the exit handler, caching, halt and retry, kill -9, and bad specs; schedules on a
cron and on new data in a host folder or an S3 prefix."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from loom.client import ClientError, LoomClient
from loom.store.db import Database
from loom.store.tables import Job, ModelVersion, PipelineSchedule
from tests.conftest import Seat, Server, eventually, make_zip
from tests.hpo.trial_code import TRAIN as TRIAL
from tests.hpo.trial_code import experiment as hpo_experiment

pytestmark = pytest.mark.integration

# Prints its width's accuracy as a metric, saves a model, and writes a small value.
TRAIN = """
import argparse, json, os, time
p = argparse.ArgumentParser()
p.add_argument('--width', type=int, default=8)
p.add_argument('--pause', type=float, default=0.0)
a = p.parse_args()
time.sleep(a.pause)
accuracy = 0.5 + a.width / 100
print(f'accuracy={accuracy:.3f}', flush=True)
result = os.environ['RESULT_DIR']
os.makedirs(os.path.join(result, 'model'), exist_ok=True)
with open(os.path.join(result, 'model', 'w.json'), 'w') as f:
    json.dump({'width': a.width}, f)
with open(os.path.join(result, 'outputs.json'), 'w') as f:
    json.dump({'width': a.width, 'note': 'trained'}, f)
"""
FAIL = "import sys; print('failing on purpose', flush=True); sys.exit(4)\n"


def code(**extra: str) -> bytes:
    return make_zip({"train.py": TRAIN, "fail.py": FAIL, **extra})


def job_step(name: str, width: Any, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "job",
        "manifest": {
            "name": f"p-{name}",
            "model_name": "pipe-model",
            "framework": {"name": "python", "command": f"python train.py --width {width}"},
            "evaluation_metrics": {"type": "katib"},
        },
        **more,
    }


def wait(client: LoomClient, run_id: str, timeout: float = 180) -> dict[str, Any]:
    found = client.wait_pipeline_run(run_id, timeout_s=timeout)
    return found


def jobs_of_run(server: Server, run_id: str) -> list[Job]:
    db = Database(server.database_url)
    try:
        with db.session() as session:
            return [j for j in session.query(Job).all() if (j.lineage or {}).get("run") == run_id]
    finally:
        db.close()


def steps(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in run["steps"]}


def test_fan_out_fan_in_select_and_a_condition(server: Server) -> None:
    """Three widths in parallel (two at a time), the best selected by its metric, a condition
    true and one false, outputs read by later steps."""
    pipeline = {
        "name": "fan",
        "parameters": {"widths": [8, 24, 16], "bar": 0.6},
        "steps": [
            {
                **job_step("train", "${{ item }}"),
                "for_each": "${{ parameters.widths }}",
                "parallelism": 2,
            },
            {"name": "pick", "kind": "select", "from": ["train"], "metric": "accuracy"},
            {
                "name": "good",
                "kind": "shell",
                "command": "echo chosen ${{ steps.pick.outputs.model }}",
                "when": "${{ steps.pick.outputs.metrics.accuracy }} >= ${{ parameters.bar }}",
            },
            {
                "name": "never",
                "kind": "shell",
                "command": "echo no",
                "when": "${{ steps.pick.outputs.metrics.accuracy }} > 2",
            },
            {"name": "after-never", "kind": "shell", "command": "echo no", "after": ["never"]},
        ],
    }
    with server.client() as client:
        made = client.run_pipeline(pipeline, code())
        run = wait(client, made["id"])
        assert run["state"] == "SUCCEEDED", run
        found = steps(run)
        train = found["train"]["tasks"]
        assert [t["item"] for t in train] == [8, 24, 16]
        assert all(t["state"] == "SUCCEEDED" for t in train)
        assert train[1]["outputs"]["values"] == {"width": 24, "note": "trained"}
        assert train[1]["outputs"]["metrics"]["accuracy"] == pytest.approx(0.74)
        pick = found["pick"]["tasks"][0]["outputs"]
        assert pick["model"] == train[1]["outputs"]["model"]
        assert found["good"]["state"] == "SUCCEEDED"
        assert found["never"]["state"] == "SKIPPED" and "is false" in found["never"]["message"]
        assert found["after-never"]["state"] == "SKIPPED"
        assert "never (skipped)" in found["after-never"]["message"]
        logs = [line["line"] for line in client.logs(found["good"]["tasks"][0]["job_id"])]
        assert f"chosen {pick['model']}" in logs
        # at most two of the fan-out ran at once
        spans = [(t["started_at"], t["finished_at"]) for t in train]
        for start, _ in spans:
            assert sum(s <= start < e for s, e in spans) <= 2
    db = Database(server.database_url)
    try:
        with db.session() as session:
            version = session.query(ModelVersion).filter_by(job_id=train[1]["job_id"]).one()
            assert version.lineage == {
                "kind": "pipeline",
                "pipeline": "fan",
                "run": made["id"],
                "step": "train",
                "index": 1,
            }
    finally:
        db.close()


def test_a_failing_step_is_retried_then_fails_with_the_exit_handler_run(seat: Seat) -> None:
    pipeline = {
        "name": "retrying",
        "on_exit": "report",
        "steps": [
            {
                "name": "flaky",
                "kind": "python",
                "file": "fail.py",
                "retry": {"limit": 2, "backoff_s": 0.5},
            },
            {"name": "later", "kind": "shell", "command": "echo never", "after": ["flaky"]},
            {"name": "report", "kind": "shell", "command": "echo run ${{ run.id }} over"},
        ],
    }
    with seat.client() as client:
        made = client.run_pipeline(pipeline, code())
        run = wait(client, made["id"])
    assert run["state"] == "FAILED" and "flaky" in run["message"]
    found = steps(run)
    flaky = found["flaky"]["tasks"][0]
    assert flaky["state"] == "FAILED" and flaky["attempt"] == 3
    assert "failed" in flaky["message"]
    assert found["later"]["state"] == "SKIPPED" and "flaky (failed)" in found["later"]["message"]
    assert found["report"]["state"] == "SUCCEEDED"
    jobs = jobs_of_run(seat, made["id"])
    assert sorted(j.lineage["step"] for j in jobs) == ["flaky", "flaky", "flaky", "report"]


def test_caching_hits_and_misses(seat: Seat) -> None:
    """A second run with the same inputs reuses every job step; a new parameter or new code
    misses the steps they reach; `cache: false` always runs."""
    pipeline = {
        "name": "cached",
        "parameters": {"width": 8},
        "steps": [
            job_step("train", "${{ parameters.width }}"),
            {"name": "fresh", "kind": "shell", "command": "echo hi", "cache": False},
            {
                "name": "use",
                "kind": "shell",
                "command": "echo ${{ steps.train.outputs.values.width }}",
            },
            {
                "name": "read",
                "kind": "shell",
                "command": "cat inputs/trained/outputs.json inputs/trained/model/w.json",
                "inputs": {"trained": "${{ steps.train.outputs.job_id }}"},
            },
            {
                "name": "steal",
                "kind": "shell",
                "command": "echo",
                "inputs": {"other": "training-nosuchjob"},
            },
        ],
    }
    with seat.client() as client:
        first = wait(client, client.run_pipeline(pipeline, code())["id"])
        second = wait(client, client.run_pipeline(pipeline, code())["id"])
        other = wait(client, client.run_pipeline(pipeline, code(), {"width": 16})["id"])
        changed = wait(client, client.run_pipeline(pipeline, code(extra="# new\n"))["id"])
    assert [r["state"] for r in (first, second, other, changed)] == ["FAILED"] * 4
    assert first["cached"] == 0
    steal = steps(first)["steal"]["tasks"][0]
    assert "inputs.other: you have no job 'training-nosuchjob'" in steal["message"]
    with seat.client() as client:
        read = steps(first)["read"]["tasks"][0]["job_id"]
        lines = [line["line"] for line in client.logs(read)]
    assert '{"width": 8, "note": "trained"}{"width": 8}' in "".join(lines)
    states = {name: s["state"] for name, s in steps(second).items()}
    assert states == {
        "train": "CACHED",
        "fresh": "SUCCEEDED",
        "use": "CACHED",
        "read": "CACHED",
        "steal": "FAILED",
    }
    train = steps(second)["train"]["tasks"][0]
    assert train["outputs"]["cached_from"]["run"] == first["id"]
    assert train["job_id"] == steps(first)["train"]["tasks"][0]["job_id"]
    assert {n: s["state"] for n, s in steps(other).items()}["train"] == "SUCCEEDED"
    assert {n: s["state"] for n, s in steps(changed).items()}["train"] == "SUCCEEDED"


def test_halt_then_retry_runs_only_what_did_not_finish(seat: Seat) -> None:
    pipeline = {
        "name": "halting",
        "steps": [
            job_step("quick", 8),
            job_step("slow", 16, after=["quick"]),
            {"name": "end", "kind": "shell", "command": "echo end", "after": ["slow"]},
        ],
    }
    pipeline["steps"][1]["manifest"]["framework"]["command"] += " --pause 30"
    with seat.client() as client:
        made = client.run_pipeline(pipeline, code())

        def slow_running() -> bool:
            task = steps(client.pipeline_run(made["id"]))["slow"]["tasks"]
            return bool(task) and task[0]["state"] == "RUNNING" and task[0]["job_id"] is not None

        eventually(slow_running, timeout=60)
        client.halt_pipeline_run(made["id"])
        halted = wait(client, made["id"], 60)
        eventually(lambda: client.pipeline_run(made["id"])["finished_at"] is not None, 30)
        assert halted["state"] == "HALTED"
        quick_job = steps(halted)["quick"]["tasks"][0]["job_id"]
        with pytest.raises(ClientError) as refused:
            client.halt_pipeline_run(made["id"])
        assert refused.value.status == 409
        pipeline_fast = client.pipeline_run(made["id"])
        assert steps(pipeline_fast)["end"]["state"] == "WAITING"
        client.retry_pipeline_run(made["id"])
        # the slow step now runs its 30 s: halt is proven, let the retry finish quickly
        done = wait(client, made["id"], 120)
    assert done["state"] == "SUCCEEDED"
    assert steps(done)["quick"]["tasks"][0]["job_id"] == quick_job  # kept, not run again
    assert steps(done)["slow"]["state"] == "SUCCEEDED"


def test_a_fan_out_cut_short_by_a_halt_is_retried(seat: Seat) -> None:
    """Halted while a fan-out has items not yet started, the step is neither done nor failed:
    one retry runs the items left, and the run succeeds (it ended HALTED again before)."""
    pipeline = {
        "name": "cut-short",
        "steps": [
            {"name": "fan", "kind": "shell", "command": "sleep 2; echo ${{ item }}",
             "for_each": [1, 2, 3], "parallelism": 1},
            {"name": "end", "kind": "shell", "command": "echo end", "after": ["fan"]},
        ],
    }  # fmt: skip
    with seat.client() as client:
        made = client.run_pipeline(pipeline, code())

        def first_item_running() -> bool:
            tasks = steps(client.pipeline_run(made["id"]))["fan"]["tasks"]
            return any(t["state"] == "RUNNING" and t["job_id"] for t in tasks)

        eventually(first_item_running, timeout=60)
        client.halt_pipeline_run(made["id"])
        halted = wait(client, made["id"], 60)
        assert halted["state"] == "HALTED"

        def stopped() -> bool:
            tasks = steps(client.pipeline_run(made["id"]))["fan"]["tasks"]
            return all(t["state"] != "RUNNING" for t in tasks)

        eventually(stopped, timeout=30)
        client.retry_pipeline_run(made["id"])
        done = wait(client, made["id"], 120)
    assert done["state"] == "SUCCEEDED", done["message"]
    fan = steps(done)["fan"]
    assert fan["state"] == "SUCCEEDED"
    assert sorted(t["state"] for t in fan["tasks"]) == ["SUCCEEDED"] * 3
    assert steps(done)["end"]["state"] == "SUCCEEDED"


def test_kill9_of_the_platform_mid_run(server: Server) -> None:
    """The run goes on after kill -9 and a restart; no step runs twice."""
    pipeline = {
        "name": "crash",
        "steps": [
            {
                **job_step("train", "${{ item }}"),
                "for_each": [8, 16, 24, 32],
                "parallelism": 2,
            },
            {"name": "pick", "kind": "select", "from": ["train"], "metric": "accuracy"},
        ],
    }
    pipeline["steps"][0]["manifest"]["framework"]["command"] += " --pause 2"
    with server.client() as client:
        made = client.run_pipeline(pipeline, code())
        eventually(
            lambda: any(
                t["job_id"] for t in steps(client.pipeline_run(made["id"]))["train"]["tasks"]
            ),
            timeout=60,
        )
    server.kill9()
    server.start()
    with server.client() as client:
        run = wait(client, made["id"], 180)
    assert run["state"] == "SUCCEEDED"
    tasks = steps(run)["train"]["tasks"]
    assert all(t["attempt"] == 1 and t["state"] == "SUCCEEDED" for t in tasks)
    jobs = jobs_of_run(server, made["id"])
    assert len(jobs) == 4 and {j.id for j in jobs} == {t["job_id"] for t in tasks}
    assert steps(run)["pick"]["tasks"][0]["outputs"]["model_version"] >= 1


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (
            {"steps": [{"name": "a", "kind": "shell", "command": "x", "after": ["a"]}]},
            "steps[0].after[0]",
            "itself",
        ),
        (
            {
                "steps": [
                    {"name": "a", "kind": "shell", "command": "x", "after": ["b"]},
                    {"name": "b", "kind": "shell", "command": "x", "after": ["a"]},
                ]
            },
            "steps[0].after",
            "a cycle: a → b → a",
        ),
        (
            {"steps": [{"name": "a", "kind": "shell", "command": "${{ steps.zz.outputs.x }}"}]},
            "steps[0].command",
            "'zz' is not a step",
        ),
        (
            {"steps": [{"name": "a", "kind": "train", "command": "x"}]},
            "steps[0].kind",
            "not one of",
        ),
        (
            {"steps": [{"name": "a", "kind": "shell", "command": "x", "when": "__import__('os')"}]},
            "steps[0].when",
            "Call is not allowed",
        ),
    ],
)
def test_bad_specs_are_refused_with_the_step_and_field_named(
    seat: Seat, change: dict[str, Any], field: str, words: str
) -> None:
    with seat.client() as client:
        with pytest.raises(ClientError) as refused:
            client.run_pipeline({"name": "bad", **change}, code())
        assert refused.value.status == 400
        assert str(refused.value).startswith(field + ":") or f"{field}:" in str(refused.value)
        assert words in str(refused.value)
        with pytest.raises(ClientError) as unknown:
            client.run_pipeline(
                {"name": "ok", "steps": [{"name": "a", "kind": "shell", "command": "x"}]},
                code(),
                {"nope": 1},
            )
        assert unknown.value.status == 400 and "parameters.nope" in str(unknown.value)
        assert client.pipeline_runs() == []


def test_another_user_sees_no_run(server: Server) -> None:
    with server.client() as client:
        made = client.run_pipeline(
            {"name": "mine", "steps": [{"name": "a", "kind": "shell", "command": "echo"}]}
        )
        token = client.add_user("bob")["token"]
    with server.client(token) as bob:
        assert bob.pipeline_runs() == []
        with pytest.raises(ClientError) as hidden:
            bob.pipeline_run(made["id"])
        assert hidden.value.status == 404


def _make_due(server: Server, name: str) -> None:
    db = Database(server.database_url)
    try:
        with db.session() as session:
            row = session.query(PipelineSchedule).filter_by(name=name).one()
            row.next_at = time.time() - 1
    finally:
        db.close()


def test_a_schedule_starts_a_run_when_its_time_comes(seat: Seat) -> None:
    """Due, it starts one run (marked with its name) and moves to its next time; paused, it
    starts none; deleted, its runs stay. A bad cron or a taken name is refused."""
    pipeline = {"name": "nightly", "steps": [{"name": "a", "kind": "shell", "command": "echo"}]}
    with seat.client() as client:
        # once a year: only `_make_due` makes it due while the test runs, whatever the clock
        made = client.schedule_pipeline(pipeline, "yearly", "0 0 1 1 *", code())
        found = client.pipeline_schedule("yearly")
        assert found["runs"] == 0 and found["enabled"] and found["next_run_at"] is not None
        assert made["cron"] == "0 0 1 1 *"
        _make_due(seat, "yearly")
        eventually(lambda: client.pipeline_schedule("yearly")["runs"] == 1, timeout=30)
        found = client.pipeline_schedule("yearly")
        run = wait(client, found["last_run_id"], 60)
        assert run["state"] == "SUCCEEDED" and run["schedule"] == "yearly"
        assert found["next_run_at"] > found["last_run_at"]
        paused = client.enable_pipeline_schedule("yearly", False)
        assert paused["enabled"] is False and paused["next_run_at"] is None
        _make_due(seat, "yearly")
        time.sleep(4)  # a few of the driver's passes
        assert client.pipeline_schedule("yearly")["runs"] == 1
        with pytest.raises(ClientError) as taken:
            client.schedule_pipeline(pipeline, "yearly", "@daily", code())
        assert taken.value.status == 409
        with pytest.raises(ClientError) as bad:
            client.schedule_pipeline(pipeline, "bad", "61 * * * *", code())
        assert bad.value.status == 400 and "minute '61'" in str(bad.value)
        client.delete_pipeline_schedule("yearly")
        assert client.pipeline_schedules() == []
        assert [r["id"] for r in client.pipeline_runs()] == [run["id"]]


def test_an_experiment_step_and_a_step_past_its_timeout(seat: Seat) -> None:
    """An experiment step runs a Katib search whose best model a select step takes; a job
    step running past its timeout is halted and fails, saying so."""
    document = yaml.safe_load(hpo_experiment("ignored", max_trials=2, parallel=2))
    pipeline = {
        "name": "searching",
        "steps": [
            {"name": "search", "kind": "experiment", "experiment": document},
            {"name": "pick", "kind": "select", "from": ["search"], "metric": "accuracy"},
            {
                "name": "slow",
                "kind": "shell",
                "command": "sleep 60",
                "timeout_s": 2,
            },
        ],
    }
    with seat.client() as client:
        made = client.run_pipeline(pipeline, make_zip({"train.py": TRIAL}))
        run = wait(client, made["id"], 240)
        found = steps(run)
        assert run["state"] == "FAILED" and run["message"] == "failed steps: slow"
        search = found["search"]["tasks"][0]
        assert search["state"] == "SUCCEEDED"
        experiment = client.experiment(search["job_id"])
        assert experiment["name"] == f"{made['id']}-search"
        assert experiment["state"] == "SUCCEEDED" and len(experiment["trial_list"]) == 2
        assert search["outputs"]["model"] == experiment["best_model"]
        assert found["pick"]["tasks"][0]["outputs"]["model"] == experiment["best_model"]
        slow = found["slow"]["tasks"][0]
        assert slow["state"] == "FAILED" and "timed out after 2 s" in slow["message"]
        assert client.job(slow["job_id"])["state"] == "HALTED"


# -- schedules that fire on new data (pipelines/triggers.py) ---------------------------------
INGEST = {
    "name": "ingest",
    "steps": [{"name": "hello", "kind": "shell", "command": "echo new data"}],
}


def polled(client: LoomClient, name: str, after: str | None) -> dict[str, Any]:
    """The schedule once its trigger has listed the prefix again since `after`."""
    seen: dict[str, Any] = {}

    def listed_again() -> bool:
        seen.update(client.pipeline_schedule(name))
        return bool(seen["trigger_checked_at"]) and seen["trigger_checked_at"] != after

    eventually(listed_again, timeout=60)
    return seen


def fires_once_on_new_data(
    client: LoomClient, url: str, add: Callable[[str], None], **more: Any
) -> dict[str, Any]:
    """Schedules the pipeline on new data under `url`; a listing with nothing new starts no
    run, `add("stray")` (outside the prefix, where the test puts it) none either; `add("new")`
    starts exactly one run, which says why. Returns the schedule."""
    add("before")  # there when the schedule is made: counted as seen
    trigger = {"new_data": {"url": url, "poll_s": 0, **more}}
    client.schedule_pipeline(INGEST, "on-data", "", trigger=trigger)
    made = client.pipeline_schedule("on-data")
    assert made["trigger"] == {"new_data": {"url": url, "poll_s": 0.0}}  # no credential shown
    add("stray")
    quiet = polled(client, "on-data", made["trigger_checked_at"])
    quiet = polled(client, "on-data", quiet["trigger_checked_at"])  # a whole listing after it
    assert quiet["runs"] == 0 and client.pipeline_runs("ingest") == []
    add("new")
    eventually(lambda: client.pipeline_runs("ingest"), timeout=60)
    fired = client.pipeline_schedule("on-data")
    assert fired["runs"] == 1, fired
    assert fired["triggered_by"].startswith(f"new data under {url}: ")
    assert fired["triggered_by"].endswith("new.csv"), fired["triggered_by"]
    again = polled(client, "on-data", fired["trigger_checked_at"])
    again = polled(client, "on-data", again["trigger_checked_at"])
    assert again["runs"] == 1 and len(client.pipeline_runs("ingest")) == 1  # seen: not again
    return fired


def test_a_new_file_in_a_host_folder_starts_a_run(seat: Seat) -> None:
    """A host folder under the platform's mount roots: a file written there starts a run; the
    files there before, and one written beside the folder, do not."""
    root = seat.home.parent / f"data-{uuid.uuid4().hex[:8]}"
    incoming = root / "incoming"
    incoming.mkdir(parents=True)

    def add(name: str) -> None:
        where = root if name == "stray" else incoming
        (where / f"{name}.csv").write_text("a,b\n1,2\n")

    with seat.client() as client:
        fires_once_on_new_data(client, str(incoming), add)


@pytest.mark.s3
def test_a_new_object_under_an_s3_prefix_starts_a_run(seat: Seat, s3: Any) -> None:
    """An S3 prefix read with the schedule's own credentials (sealed, never shown): an object
    put under it starts a run; one put under another prefix of the bucket does not."""
    bucket = f"trigger-{uuid.uuid4().hex[:8]}"
    store = s3.client()
    store.create_bucket(Bucket=bucket)

    def add(name: str) -> None:
        key = "other/stray.csv" if name == "stray" else f"incoming/{name}.csv"
        store.put_object(Bucket=bucket, Key=key, Body=b"a,b\n1,2\n")

    connection = {"endpoint_url": s3.endpoint, "access_key_id": s3.key,
                  "secret_access_key": s3.secret}  # fmt: skip
    with seat.client() as client:
        url = f"s3://{bucket}/incoming/"
        fired = fires_once_on_new_data(client, url, add, connection=connection)
    assert s3.secret not in str(fired)
