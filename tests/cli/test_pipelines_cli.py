"""`loom pipelines` as a user types it, against a fake client that answers with the server's
JSON shapes: the run's DAG drawn as a tree, the run list, logs of a step's job, run -p, and
schedules; and the requests `PipelineCalls` makes of the schedules' routes."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from loom.cli import common
from loom.cli.main import app
from loom.cli.pipelines import depths, schedules_table
from loom.client import ClientError
from loom.client.pipelines import PipelineCalls

runner = CliRunner()


def task(index: int, item: Any, state: str, job_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "item": item,
        "state": state,
        "job_id": job_id,
        "attempt": 1,
        "cached": False,
        "message": "",
        "started_at": None,
        "finished_at": None,
        "duration_s": 3.1,
        "outputs": {},
        **extra,
    }


def step(
    name: str,
    kind: str,
    state: str | None,
    after: list[str],
    tasks: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "after": after,
        "state": state,
        "message": "",
        "cached": False,
        "started_at": None,
        "finished_at": None,
        "duration_s": 75.0,
        "exit_handler": False,
        "tasks": tasks,
        **extra,
    }


RUN: dict[str, Any] = {
    "id": "r-0001",
    "name": "digits-workflow",
    "state": "RUNNING",
    "message": "",
    "owner": "alice",
    "parameters": {"epochs": 3, "widths": [8, 16]},
    "created_at": "2026-03-01T10:00:00.123Z",
    "started_at": "2026-03-01T10:00:01.456Z",
    "finished_at": None,
    "duration_s": 12.3,
    "steps_total": 5,
    "steps_by_state": {"SUCCEEDED": 2, "RUNNING": 1, "WAITING": 2},
    "cached": 1,
    "steps": [
        step(
            "data",
            "python",
            "CACHED",
            [],
            [task(0, None, "CACHED", "j-data", cached=True)],
            cached=True,
        ),
        step(
            "train",
            "job",
            "RUNNING",
            ["data"],
            [
                task(0, 8, "SUCCEEDED", "j-train-0"),
                task(1, 16, "RUNNING", "j-train-1", attempt=2, message="out of memory"),
            ],
        ),
        step("pick", "select", "WAITING", ["train"], []),
        step("serve", "deploy", "WAITING", ["pick"], []),
        step("predict", "shell", "WAITING", ["serve", "data"], []),
        step("report", "shell", "WAITING", [], [], exit_handler=True),
    ],
}


SCHEDULE: dict[str, Any] = {
    "id": "s-0001",
    "name": "nightly",
    "pipeline": "digits-workflow",
    "cron": "0 3 * * *",
    "enabled": True,
    "parameters": {"epochs": 3},
    "next_run_at": "2026-03-02T03:00:00Z",
    "last_run_id": "r-0001",
    "last_run_at": "2026-03-01T03:00:00.012Z",
    "runs": 4,
    "created_at": "2026-02-25T09:00:00Z",
    "owner": "alice",
}
PAUSED: dict[str, Any] = SCHEDULE | {
    "id": "s-0002",
    "name": "weekly-eval",
    "cron": "@weekly",
    "enabled": False,
    "next_run_at": None,
    "last_run_id": None,
    "last_run_at": None,
    "runs": 0,
}


class FakeLoom:
    """What `LoomClient` answers, from `runs` (the run as it is each time it is looked at)."""

    def __init__(self, *runs: dict[str, Any]) -> None:
        self.runs = list(runs) or [RUN]
        self.calls: list[tuple[str, Any]] = []
        self.triggers: list[dict[str, Any] | None] = []

    def __enter__(self) -> FakeLoom:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def run_pipeline(self, pipeline: Any, code_zip: bytes | None, parameters: Any) -> Any:
        self.calls.append(("run", (pipeline, code_zip, parameters)))
        return {
            "id": "r-0001",
            "name": "digits-workflow",
            "location": "/v1/pipelines/runs/r-0001",
            "warnings": ["a note"],
        }

    def pipeline_runs(self, pipeline: str | None, owner: str | None, everyone: bool) -> Any:
        self.calls.append(("list", (pipeline, owner, everyone)))
        return [{k: v for k, v in r.items() if k != "steps"} for r in self.runs]

    def pipeline_run(self, run_id: str) -> dict[str, Any]:
        if run_id != "r-0001":
            raise ClientError(f"no pipeline run {run_id!r} (HTTP 404)", 404)
        return self.runs[-1]

    def wait_pipeline_run(
        self,
        run_id: str,
        timeout_s: float,
        poll_s: float,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        for each in self.runs:
            if on_change is not None:
                on_change(each)
        return self.runs[-1]

    def halt_pipeline_run(self, run_id: str) -> dict[str, Any]:
        self.calls.append(("halt", run_id))
        return {**self.runs[-1], "state": "HALTED"}

    def retry_pipeline_run(self, run_id: str) -> dict[str, Any]:
        self.calls.append(("retry", run_id))
        return {**self.runs[-1], "state": "RUNNING"}

    def delete_pipeline_run(self, run_id: str) -> None:
        self.calls.append(("delete", run_id))

    def schedule_pipeline(
        self,
        pipeline: Any,
        name: str,
        cron: str,
        code_zip: bytes | None = None,
        parameters: Any = None,
        enabled: bool = True,
        trigger: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        self.calls.append(("schedule", (pipeline, name, cron, code_zip, parameters, enabled)))
        self.triggers.append(trigger)
        if name == "taken":
            raise ClientError("a schedule 'taken' exists (HTTP 409)", 409)
        return {
            "id": "s-0001",
            "name": name,
            "cron": cron,
            "next_run_at": "2026-03-02T03:00:00Z" if enabled and cron else None,
            "location": "/v1/pipelines/schedules/s-0001",
        }

    def pipeline_schedules(self, owner: str | None, everyone: bool) -> list[dict[str, Any]]:
        self.calls.append(("schedules", (owner, everyone)))
        return [SCHEDULE, PAUSED]

    def _schedule(self, ref: str) -> dict[str, Any]:
        found = next((s for s in (SCHEDULE, PAUSED) if ref in (s["name"], s["id"])), None)
        if found is None:
            raise ClientError(f"no pipeline schedule {ref!r} (HTTP 404)", 404)
        return found

    def enable_pipeline_schedule(self, ref: str, enabled: bool) -> dict[str, Any]:
        self.calls.append(("enable", (ref, enabled)))
        found = self._schedule(ref)
        return found | {
            "enabled": enabled,
            "next_run_at": "2026-03-02T03:00:00Z" if enabled else None,
        }

    def delete_pipeline_schedule(self, ref: str) -> None:
        self.calls.append(("unschedule", ref))
        self._schedule(ref)

    def job(self, job_id: str) -> dict[str, Any]:
        return {"id": job_id, "learners": 1, "state": "COMPLETED"}

    def find_job(self, ref: str) -> dict[str, Any]:
        return self.job(ref)  # a step's job is named by its id

    def all_logs(self, job_id: str, **_: Any) -> list[dict[str, Any]]:
        self.calls.append(("logs", job_id))
        return [{"id": 1, "learner": 0, "line": f"a line of {job_id}"}]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLoom:
    made = FakeLoom()
    use(monkeypatch, made)
    return made


def use(monkeypatch: pytest.MonkeyPatch, made: FakeLoom) -> None:
    monkeypatch.setattr(common.LoomClient, "from_env", lambda: made)
    monkeypatch.setattr(common.console, "_width", 200)  # no squeezed columns
    monkeypatch.setattr(common.err, "_width", 200)


def pipelines(*args: str) -> Any:
    return runner.invoke(app, ["pipelines", *args])


def test_show_draws_the_dag_indented_by_depth_with_a_fan_outs_items(fake: FakeLoom) -> None:
    shown = pipelines("show", "r-0001")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert "digits-workflow r-0001: RUNNING" in shown.stdout

    def line(text: str) -> str:
        return next(x for x in lines if text in x)

    assert "│ data " in line("j-data") and "CACHED" in line("j-data")
    assert "cached" in line("j-data")
    assert "│   train " in line("│   train ")
    assert "│     └ [1] 16" in line("j-train-1") and "attempt 2: out of memory" in line("j-train-1")
    assert "└ [0] 8" in line("j-train-0") and "SUCCEEDED" in line("j-train-0")
    assert "│     pick " in line(" pick ")
    assert "│         predict " in line(" predict ")  # after serve: the longest path counts
    order = [
        n
        for x in lines
        for n in ("data", "train", "pick", "serve", "predict", "report")
        if f" {n} " in x
    ]
    assert order == ["data", "train", "pick", "serve", "predict", "report"]
    assert "report (on exit)" in shown.stdout  # the exit handler last
    assert "epochs=3" in shown.stdout and "1 running" in shown.stdout


def test_show_json_is_the_runs_json(fake: FakeLoom) -> None:
    shown = pipelines("show", "r-0001", "--json")
    assert json.loads(shown.stdout) == RUN


def test_depth_is_the_longest_path_from_a_root() -> None:
    steps = [
        {"name": "a", "after": []},
        {"name": "b", "after": ["a"]},
        {"name": "c", "after": ["a", "b", "gone"]},
        {"name": "x", "after": ["y"]},  # a cycle is drawn, not recursed
        {"name": "y", "after": ["x"]},
    ]
    assert depths(steps) == {"a": 0, "b": 1, "c": 2, "x": 1, "y": 0}


def test_show_watch_redraws_until_it_ends_and_fails_with_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed = copy.deepcopy(RUN) | {"state": "FAILED", "message": "step train failed"}
    use(monkeypatch, FakeLoom(RUN, failed))
    shown = pipelines("show", "r-0001", "-w")
    assert shown.exit_code == 1
    assert "r-0001: FAILED" in shown.stdout and "step train failed" in shown.stdout
    done = copy.deepcopy(RUN) | {"state": "SUCCEEDED"}
    use(monkeypatch, FakeLoom(RUN, done))
    assert pipelines("show", "r-0001", "-w").exit_code == 0


def test_list_counts_ended_steps_and_cached_ones(fake: FakeLoom) -> None:
    listed = pipelines("list", "--pipeline", "digits-workflow", "--all")
    assert listed.exit_code == 0, listed.output
    row = next(x for x in listed.stdout.splitlines() if "r-0001" in x)
    assert "digits-workflow" in row and "RUNNING" in row
    assert "2/5" in row and " 1 " in row
    assert "2026-03-01 10:00:01" in row and "12 s" in row
    assert ("list", ("digits-workflow", None, True)) in fake.calls


def test_run_sends_the_yaml_the_code_and_typed_parameters(fake: FakeLoom, tmp_path: Path) -> None:
    spec = tmp_path / "pipeline.yml"
    spec.write_text("name: p\nsteps: []\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    made = pipelines(
        "run", str(spec), str(code), "-p", "epochs=3", "-p", "widths=[8, 16]", "-p", "name=x=y"
    )
    assert made.exit_code == 0, made.output
    assert "Started run r-0001" in made.stdout and "a note" in made.stderr
    sent, code_zip, parameters = fake.calls[0][1]
    assert sent == spec.read_bytes()
    assert code_zip is not None and code_zip.startswith(b"PK")
    assert parameters == {"epochs": 3, "widths": [8, 16], "name": "x=y"}


def test_run_takes_a_python_files_pipeline(fake: FakeLoom, tmp_path: Path) -> None:
    source = tmp_path / "flow.py"
    source.write_text(
        "from loom.client.pipeline_dsl import Pipeline\n"
        "pipeline = Pipeline('from-python')\n"
        "pipeline.shell('hi', command='echo hi')\n"
    )
    made = pipelines("run", str(source), "-f")
    assert made.exit_code == 1  # followed: the fake's run never succeeds
    sent, code_zip, parameters = fake.calls[0][1]
    assert "name: from-python" in sent and code_zip is None and parameters is None
    assert "digits-workflow r-0001: RUNNING" in made.stdout  # the run drawn as it ended


def test_run_refuses_bad_input_before_sending(fake: FakeLoom, tmp_path: Path) -> None:
    spec = tmp_path / "pipeline.yml"
    spec.write_text("- just a list\n")
    assert pipelines("run", str(spec)).exit_code == 2
    spec.write_text("name: p\n")
    bad = pipelines("run", str(spec), "-p", "epochs")
    assert bad.exit_code == 2 and "name=value" in bad.stderr
    assert fake.calls == []


def test_logs_of_a_step_and_of_a_fan_outs_item(fake: FakeLoom) -> None:
    single = pipelines("logs", "r-0001", "data")
    assert single.exit_code == 0, single.output
    assert single.stdout == "a line of j-data\n"
    item = pipelines("logs", "r-0001", "train", "--index", "1")
    assert item.stdout == "a line of j-train-1\n"
    which = pipelines("logs", "r-0001", "train")
    assert which.exit_code == 1 and "--index" in which.stderr
    none = pipelines("logs", "r-0001", "pick")
    assert none.exit_code == 1 and "no job yet" in none.stderr
    missing = pipelines("logs", "r-0001", "nope")
    assert missing.exit_code == 1 and "no step 'nope'" in missing.stderr


def test_a_client_error_is_told_plainly(fake: FakeLoom) -> None:
    result = pipelines("show", "r-9999")
    assert result.exit_code == 1
    assert "no pipeline run 'r-9999'" in result.stderr
    assert "Traceback" not in result.output


def test_halt_retry_and_delete(fake: FakeLoom) -> None:
    assert "r-0001: HALTED" in pipelines("halt", "r-0001").stdout
    assert "r-0001: RUNNING" in pipelines("retry", "r-0001").stdout
    assert "Deleted pipeline run r-0001" in pipelines("delete", "r-0001").stdout
    assert [c for c in fake.calls] == [
        ("halt", "r-0001"),
        ("retry", "r-0001"),
        ("delete", "r-0001"),
    ]


def test_the_servers_depth_and_fan_out_are_used_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    run = copy.deepcopy(RUN)
    run["steps"] = [
        step(
            "one",
            "job",
            "SUCCEEDED",
            [],
            [task(0, {"lr": 0.1}, "SUCCEEDED", "j-one-0")],
            depth=3,
            fan_out=True,
        ),
        step("two", "shell", None, [], [], depth=0, fan_out=False),
    ]
    use(monkeypatch, FakeLoom(run))
    lines = pipelines("show", "r-0001").stdout.splitlines()
    assert any("│       one " in x for x in lines)
    assert any('└ [0] {"lr":0.1}' in x and "j-one-0" in x for x in lines)
    assert any("│ two " in x and "WAITING" in x for x in lines)


def test_list_shows_the_schedule_that_started_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    by_hand = copy.deepcopy(RUN) | {"id": "r-0002"}
    scheduled = copy.deepcopy(RUN) | {"schedule": "nightly"}
    use(monkeypatch, FakeLoom(scheduled, by_hand))
    listed = pipelines("list")
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert "SCHEDULE" in lines[1]
    assert "nightly" in next(x for x in lines if "r-0001" in x)
    assert "nightly" not in next(x for x in lines if "r-0002" in x)
    use(monkeypatch, FakeLoom(by_hand))
    assert "SCHEDULE" not in pipelines("list").stdout  # no column when no run has one


def test_schedule_sends_the_yaml_the_code_parameters_name_and_cron(
    fake: FakeLoom, tmp_path: Path
) -> None:
    spec = tmp_path / "pipeline.yml"
    spec.write_text("name: p\nsteps: []\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    made = pipelines(
        "schedule", str(spec), str(code), "--name", "nightly", "--cron", "0 3 * * *",
        "-p", "epochs=3",
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "Scheduled nightly (0 3 * * *): next run 2026-03-02 03:00:00 UTC" in made.stdout
    assert len(fake.calls) == 1
    sent, name, cron, code_zip, parameters, enabled = fake.calls[0][1]
    assert sent == spec.read_bytes() and (name, cron) == ("nightly", "0 3 * * *")
    assert code_zip is not None and code_zip.startswith(b"PK")
    assert parameters == {"epochs": 3} and enabled is True


def test_schedule_disabled_from_a_python_file_without_code(fake: FakeLoom, tmp_path: Path) -> None:
    source = tmp_path / "flow.py"
    source.write_text(
        "from loom.client.pipeline_dsl import Pipeline\n"
        "pipeline = Pipeline('from-python')\n"
        "pipeline.shell('hi', command='echo hi')\n"
    )
    made = pipelines("schedule", str(source), "--name", "n", "--cron", "@daily", "--disabled")
    assert made.exit_code == 0, made.output
    assert "paused" in made.stdout and "unpause" in made.stdout
    sent, name, cron, code_zip, parameters, enabled = fake.calls[0][1]
    assert "name: from-python" in sent and (name, cron) == ("n", "@daily")
    assert code_zip is None and parameters is None and enabled is False


def test_schedule_refuses_bad_input_before_sending(fake: FakeLoom, tmp_path: Path) -> None:
    spec = tmp_path / "pipeline.yml"
    spec.write_text("name: p\nsteps: []\n")
    for cron in ("0 3 * *", "", "@daily 3", "* * * * * *"):
        bad = pipelines("schedule", str(spec), "--name", "n", "--cron", cron)
        assert bad.exit_code == 2 and "--cron" in bad.stderr, (cron, bad.output)
    bad = pipelines("schedule", str(spec), "--name", "n", "--cron", "@daily", "-p", "epochs")
    assert bad.exit_code == 2 and "name=value" in bad.stderr
    assert pipelines("schedule", str(spec), "--cron", "@daily").exit_code == 2  # no --name
    assert pipelines("schedule", str(spec), "--name", "n").exit_code == 2  # no --cron
    spec.write_text("- just a list\n")
    assert pipelines("schedule", str(spec), "--name", "n", "--cron", "@daily").exit_code == 2
    assert fake.calls == []


def test_schedule_on_drift_or_on_new_data_without_a_cron(fake: FakeLoom, tmp_path: Path) -> None:
    """`--on-drift` and `--on-new-data` (with credentials from a file) send the trigger (no cron
    needed), the answer says what the schedule waits for (never the credentials), and two
    triggers at once, or credentials without a data trigger, are refused before anything is
    sent."""
    spec = tmp_path / "pipeline.yml"
    spec.write_text("name: p\nsteps: []\n")
    made = pipelines("schedule", str(spec), "--name", "retrain", "--on-drift", "digits",
                     "--cooldown", "600")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "Scheduled retrain: runs when deployment digits drifts" in made.stdout
    made = pipelines("schedule", str(spec), "--name", "ingest", "--cron", "@daily",
                     "--on-new-data", "s3://b/in/", "--poll", "30")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "runs when new data arrives under s3://b/in/" in made.stdout
    assert [call[1][2] for call in fake.calls] == ["", "@daily"]
    assert fake.triggers == [
        {"drift": {"deployment": "digits", "cooldown_s": 600.0}},
        {"new_data": {"url": "s3://b/in/", "poll_s": 30.0}},
    ]
    both = pipelines("schedule", str(spec), "--name", "n", "--on-drift", "d",
                     "--on-new-data", "s3://b/")  # fmt: skip
    assert both.exit_code == 2 and "one trigger a schedule" in both.stderr
    assert len(fake.calls) == 2
    secrets = tmp_path / "s3.yml"
    secrets.write_text("endpoint_url: http://s3:9000\naccess_key_id: AK\nsecret_access_key: SK\n")
    made = pipelines("schedule", str(spec), "--name", "s3", "--on-new-data", "s3://b/in/",
                     "--connection-file", str(secrets))  # fmt: skip
    assert made.exit_code == 0 and "SK" not in made.output, made.output
    given = {"endpoint_url": "http://s3:9000", "access_key_id": "AK", "secret_access_key": "SK"}
    assert fake.triggers[-1] == {
        "new_data": {"url": "s3://b/in/", "poll_s": 60.0, "connection": given}
    }
    alone = pipelines("schedule", str(spec), "--name", "n", "--cron", "@daily",
                      "--connection-file", str(secrets))  # fmt: skip
    assert alone.exit_code == 2 and "goes with --on-new-data" in alone.stderr
    secrets.write_text("- a list\n")
    bad = pipelines("schedule", str(spec), "--name", "n", "--on-new-data", "s3://b/",
                    "--connection-file", str(secrets))  # fmt: skip
    assert bad.exit_code == 2 and "a mapping" in bad.stderr
    assert len(fake.calls) == 3
    drift = SCHEDULE | {"cron": "", "trigger": {"drift": {"deployment": "digits"}}}
    shown = Console(width=200, record=True)
    shown.print(schedules_table([drift, PAUSED]))
    table = shown.export_text()
    assert "TRIGGER" in table and "runs when deployment digits drifts" in table


def test_schedule_tells_the_servers_refusal(fake: FakeLoom, tmp_path: Path) -> None:
    spec = tmp_path / "pipeline.yml"
    spec.write_text("name: p\nsteps: []\n")
    made = pipelines("schedule", str(spec), "--name", "taken", "--cron", "*/15 * * * *")
    assert made.exit_code == 1 and "a schedule 'taken' exists" in made.stderr
    assert "Traceback" not in made.output


def test_schedules_lists_next_and_last_runs(fake: FakeLoom) -> None:
    listed = pipelines("schedules")
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    nightly = next(x for x in lines if "nightly" in x)
    assert "digits-workflow" in nightly and "0 3 * * *" in nightly and "yes" in nightly
    assert "2026-03-02 03:00:00" in nightly and "r-0001 (2026-03-01 03:00:00)" in nightly
    assert nightly.rstrip(" │").endswith("4")
    weekly = next(x for x in lines if "weekly-eval" in x)
    assert "@weekly" in weekly and "paused" in weekly and "r-0" not in weekly
    assert "OWNER" not in listed.stdout  # one owner: no column
    assert "TRIGGER" not in listed.stdout  # no schedule has one: no column
    assert fake.calls == [("schedules", (None, False))]


def test_schedules_json_and_the_admins_options(fake: FakeLoom) -> None:
    shown = pipelines("schedules", "--all", "-o", "json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == [SCHEDULE, PAUSED]
    assert pipelines("schedules", "--owner", "bob").exit_code == 0
    assert fake.calls == [("schedules", (None, True)), ("schedules", ("bob", False))]
    both = pipelines("schedules", "--owner", "bob", "--all")
    assert both.exit_code == 2 and "not both" in both.stderr
    assert len(fake.calls) == 2


def test_pause_unpause_and_unschedule(fake: FakeLoom) -> None:
    paused = pipelines("pause", "nightly")
    assert paused.exit_code == 0 and "nightly: paused" in paused.stdout
    again = pipelines("unpause", "s-0001")
    assert again.exit_code == 0
    assert "nightly: enabled, next run 2026-03-02 03:00:00 UTC" in again.stdout
    gone = pipelines("unschedule", "nightly")
    assert gone.exit_code == 0 and "Deleted schedule nightly" in gone.stdout
    assert "runs it started stay" in gone.stdout
    assert fake.calls == [
        ("enable", ("nightly", False)),
        ("enable", ("s-0001", True)),
        ("unschedule", "nightly"),
    ]


def test_an_unknown_schedule_is_told_plainly(fake: FakeLoom) -> None:
    for command in ("pause", "unpause", "unschedule"):
        result = pipelines(command, "nope")
        assert result.exit_code == 1, command
        assert "no pipeline schedule 'nope'" in result.stderr
        assert "Traceback" not in result.output


class Recording(PipelineCalls):
    """`PipelineCalls` with the requests it makes written down, and `answer` answered."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[tuple[str, str, dict[str, Any]]] = []

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        self.requests.append((method, path, kwargs))
        return httpx.Response(200, json=self.answer)


def test_the_client_sends_a_schedule_as_a_run_is_sent_with_its_schedule_part() -> None:
    made = {"id": "s-0001", "name": "nightly", "cron": "@daily", "next_run_at": None}
    loom = Recording(made)
    spec = {"name": "p", "steps": []}
    assert loom.schedule_pipeline(spec, "nightly", "@daily", b"PK", {"a": 1}, False) == made
    loom.run_pipeline(spec, b"PK", {"a": 1})
    (method, path, sent), (_, run_path, run_sent) = loom.requests
    assert (method, path, run_path) == ("POST", "/v1/pipelines/schedules", "/v1/pipelines/runs")
    files = sent["files"]
    filename, text, kind = files.pop("schedule")
    assert json.loads(text) == {"name": "nightly", "cron": "@daily", "enabled": False}
    assert (filename, kind) == ("schedule.json", "application/json")
    assert files == run_sent["files"]  # the same parts as a run's
    assert files["pipeline"][1] == "name: p\nsteps: []\n"
    assert files["model_definition"][1] == b"PK"
    assert json.loads(files["parameters"][1]) == {"a": 1}
    bare = Recording(made)
    bare.schedule_pipeline("name: p\n", "n", "@daily")
    parts = bare.requests[0][2]["files"]
    assert set(parts) == {"pipeline", "schedule"}
    assert json.loads(parts["schedule"][1])["enabled"] is True


def test_the_client_lists_shows_enables_and_deletes_schedules() -> None:
    loom = Recording({"schedules": [SCHEDULE]})
    assert loom.pipeline_schedules() == [SCHEDULE]
    loom.pipeline_schedules(owner="bob")
    loom.pipeline_schedules(everyone=True)
    assert [(m, p, k["params"]) for m, p, k in loom.requests] == [
        ("GET", "/v1/pipelines/schedules", {}),
        ("GET", "/v1/pipelines/schedules", {"owner": "bob"}),
        ("GET", "/v1/pipelines/schedules", {"all": "true"}),
    ]
    one = Recording(SCHEDULE)
    assert one.pipeline_schedule("nightly") == SCHEDULE
    assert one.enable_pipeline_schedule("s-0001", False) == SCHEDULE
    one.enable_pipeline_schedule("a/b", True)
    assert one.delete_pipeline_schedule("nightly") is None
    assert one.requests == [
        ("GET", "/v1/pipelines/schedules/nightly", {}),
        ("PATCH", "/v1/pipelines/schedules/s-0001", {"json": {"enabled": False}}),
        ("PATCH", "/v1/pipelines/schedules/a%2Fb", {"json": {"enabled": True}}),
        ("DELETE", "/v1/pipelines/schedules/nightly", {}),
    ]
