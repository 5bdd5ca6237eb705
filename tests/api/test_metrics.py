"""Evaluation metrics end to end: every collector with a real learner process, the queries,
the live stream and its resumption, and points logged from outside the job."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import httpx
import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Seat, Server, database_free, make_zip, manifest, wait_for_state

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "HALTED"}


def run(client: LoomClient, script: str, metrics_yaml: str = "") -> str:
    text = manifest("python job.py") + metrics_yaml
    job_id = client.submit(text, make_zip({"job.py": script}))
    job = wait_for_state(client, job_id, FINAL, timeout=120)
    assert job["state"] == "COMPLETED", job
    return job_id


def points(client: LoomClient, job_id: str) -> list[tuple[str, int | None, dict[str, float]]]:
    found = client.metrics(job_id, pagesize=10_000)["metrics"]
    return [(p["group"], p["step"], p["values"]) for p in found]


@database_free
def test_tensorboard_collector(seat: Seat) -> None:
    """Scalars written with torch.utils.tensorboard become one point per step, grouped by
    folder, picked up while the job runs."""
    script = (
        "import os, time\n"
        "from torch.utils.tensorboard import SummaryWriter\n"
        "for group in ('train', 'test'):\n"
        "    w = SummaryWriter(os.path.join(os.environ['JOB_STATE_DIR'], 'tb', group))\n"
        "    for step in range(1, 6):\n"
        "        w.add_scalar('loss', 1.0 / step, step)\n"
        "        w.add_scalar('accuracy', step / 10, step)\n"
        "        w.flush()\n"
        "    w.close()\n"
    )
    spec = "evaluation_metrics:\n  type: tensorboard\n  in: $JOB_STATE_DIR/tb\n"
    with seat.client() as client:
        job_id = run(client, script, spec)
        got = points(client, job_id)
    for group in ("train", "test"):
        mine = [(step, values) for g, step, values in got if g == group]
        assert [step for step, _ in mine] == [1, 2, 3, 4, 5]
        assert [round(v["loss"], 6) for _, v in mine] == [1.0, 0.5, 0.333333, 0.25, 0.2]
        assert [round(v["accuracy"], 6) for _, v in mine] == [0.1, 0.2, 0.3, 0.4, 0.5]


def test_regex_extractor_collector(seat: Seat) -> None:
    """Lines matched by FfDL's regex_extractor spec become points; other lines stay lines."""
    script = (
        "stamp = 'I0210 13:39:22.381027 27 solver.cpp:204]'\n"
        "for i in range(1, 4):\n"
        "    print(f'{stamp} Iteration {i * 100}, loss = {1 / i}')\n"
        "    print('Iteration garbage, loss = not-a-number')\n"
        "print('Test net output #0: accuracy = 0.9')\n"
    )
    spec = (
        "evaluation_metrics:\n"
        "  type: regex_extractor\n"
        "  linelookahead: 1\n"
        "  groups:\n"
        "    train:\n"
        "      regex: '%{GLOG_STAMP}.*Iteration (?P<iteration>\\d+), loss = %{FLOAT:loss}'\n"
        "      meta: {time: '$timestamp'}\n"
        "      scalars: {loss: {type: FLOAT, value: $loss}}\n"
        "      etimes: {iteration: {type: INT, value: $iteration}}\n"
        "    test:\n"
        "      regex: 'Test net output #0: accuracy = %{FLOAT:acc}'\n"
        "      values: {accuracy: {type: FLOAT, value: $acc}}\n"
    )
    with seat.client() as client:
        job_id = run(client, script, spec)
        got = points(client, job_id)
        lines = [x["line"] for x in client.logs(job_id)]
    assert got == [
        ("train", 100, {"loss": 1.0}),
        ("train", 200, {"loss": 0.5}),
        ("train", 300, {"loss": 1 / 3}),
        ("test", None, {"accuracy": 0.9}),
    ]
    assert len(lines) == 7
    assert lines.count("Iteration garbage, loss = not-a-number") == 3


def test_emetrics_file_collector(seat: Seat) -> None:
    """FfDL's emetrics JSON lines, written where the manifest says, become points."""
    script = (
        "import json, os\n"
        "folder = os.path.join(os.environ['JOB_STATE_DIR'], 'em')\n"
        "os.makedirs(folder, exist_ok=True)\n"
        "with open(os.path.join(folder, 'evaluation-metrics.txt'), 'w') as out:\n"
        "    for i in range(1, 4):\n"
        "        rec = {'meta': {'training_id': os.environ['TRAINING_ID'], 'rindex': i},\n"
        "               'grouplabel': 'test',\n"
        "               'etimes': {'iteration': {'type': 'INT', 'value': str(i)}},\n"
        "               'values': {'acc': {'type': 'FLOAT', 'value': str(i / 4)}}}\n"
        "        out.write(json.dumps(rec) + '\\n')\n"
        "    out.write('{broken\\n')\n"
    )
    spec = "evaluation_metrics:\n  type: emetrics_file\n  in: $JOB_STATE_DIR/em\n"
    with seat.client() as client:
        job_id = run(client, script, spec)
        assert points(client, job_id) == [
            ("test", 1, {"acc": 0.25}),
            ("test", 2, {"acc": 0.5}),
            ("test", 3, {"acc": 0.75}),
        ]


def test_katib_collector(seat: Seat) -> None:
    """Katib's `name=value` stdout lines become points for a job that names the format."""
    script = "for e in range(1, 4):\n    print(f'epoch={e} accuracy={e / 10} loss={1 / e}')\n"
    with seat.client() as client:
        job_id = run(client, script, "evaluation_metrics:\n  type: katib\n")
        assert points(client, job_id) == [
            ("default", 1, {"accuracy": 0.1, "loss": 1.0}),
            ("default", 2, {"accuracy": 0.2, "loss": 0.5}),
            ("default", 3, {"accuracy": 0.3, "loss": 1 / 3}),
        ]


def test_tracking_sdk(seat: Seat) -> None:
    """`tracking.log_metrics` inside a job is picked up with no collector configured."""
    script = (
        "from loom import tracking\n"
        "for step in range(1, 4):\n"
        "    tracking.log_metrics(step=step, group='train', loss=1 / step)\n"
        "    tracking.log_metrics(step=step, group='test', accuracy=step / 4, f1=0.5)\n"
    )
    with seat.client() as client:
        job_id = run(client, script)
        got = points(client, job_id)
        series = client.metrics(job_id, form="series")["series"]
        emetrics = client.metrics(job_id, form="emetrics", group="test", pagesize=1)["models"]
    assert [p for p in got if p[0] == "train"] == [
        ("train", 1, {"loss": 1.0}),
        ("train", 2, {"loss": 0.5}),
        ("train", 3, {"loss": 1 / 3}),
    ]
    assert series["test"]["accuracy"] == {"steps": [1, 2, 3], "values": [0.25, 0.5, 0.75]}
    assert emetrics[0]["grouplabel"] == "test"
    assert emetrics[0]["values"]["accuracy"] == {"type": "FLOAT", "value": "0.25"}


def test_queries_filter_and_page(seat: Seat) -> None:
    """Points page like log lines and filter by group, name and learner."""
    script = (
        "from loom import tracking\n"
        "for step in range(1, 11):\n"
        "    tracking.log_metrics(step=step, group='train', loss=step)\n"
        "    tracking.log_metrics(step=step, group='test', accuracy=step)\n"
    )
    with seat.client() as client:
        job_id = run(client, script)
        page = client.metrics(job_id, group="train", pos=3, pagesize=2)["metrics"]
        assert [p["step"] for p in page] == [3, 4]
        last = client.metrics(job_id, name="accuracy", pos=-1, pagesize=2)["metrics"]
        assert [(p["group"], p["step"]) for p in last] == [("test", 9), ("test", 10)]
        assert client.metrics(job_id, learner=2)["metrics"] == []
        assert client.metrics(job_id, form="series", name="loss")["series"].keys() == {"train"}


def test_bad_collector_spec_is_c101(seat: Seat) -> None:
    """A regex spec with an unknown macro or a dangling reference is refused, naming the field."""
    bad = (
        "evaluation_metrics:\n  type: regex_extractor\n  groups:\n    train:\n"
        "      regex: 'loss=%{FLOTE:loss}'\n      scalars: {loss: {type: FLOAT, value: $loss}}\n"
    )
    with seat.client() as client, pytest.raises(ClientError) as caught:
        client.submit(manifest("true") + bad, make_zip({"a": ""}))
    assert caught.value.status == 400
    assert caught.value.error_code == "C101"
    assert "evaluation_metrics.groups.train.regex" in caught.value.message


def test_follow_resumes_with_last_event_id(seat: Seat) -> None:
    """A stream cut in the middle and resumed with Last-Event-ID misses and repeats nothing."""
    script = (
        "import time\n"
        "from loom import tracking\n"
        "for i in range(1, 31):\n"
        "    print(f'line {i}', flush=True)\n"
        "    tracking.log_metrics(step=i, loss=i)\n"
        "    time.sleep(0.02)\n"
    )
    headers = {"Authorization": f"Bearer {seat.token}"}
    with seat.client() as client:
        job_id = client.submit(manifest("python job.py"), make_zip({"job.py": script}))
        seen: list[tuple[str, str]] = []
        last_id = None
        url = f"{seat.url}/v1/jobs/{job_id}/metrics?follow=true"
        with httpx.stream("GET", url, headers=headers, timeout=60) as response:
            for raw in response.iter_lines():
                if raw.startswith("id:"):
                    last_id = raw[3:].strip()
                if raw.startswith("data:"):
                    seen.append(("first", raw))
                if len(seen) == 10:
                    break
        assert last_id is not None
        with httpx.stream(
            "GET", url, headers={**headers, "Last-Event-ID": last_id}, timeout=60
        ) as response:
            kind = ""
            for raw in response.iter_lines():
                if raw.startswith("event:"):
                    kind = raw[6:].strip()
                if raw.startswith("data:"):
                    seen.append((kind, raw))
    events = [json.loads(raw[5:]) for _, raw in seen]
    lines = [e["line"] for e in events if "line" in e]
    steps = [e["step"] for e in events if "values" in e]
    assert lines == [f"line {i}" for i in range(1, 31)]
    assert steps == list(range(1, 31))
    assert seen[-1][0] == "end"


def test_points_from_outside_and_ownership(server: Server) -> None:
    """The owner can add points (idempotent on seq); another user sees none of them."""
    with server.client() as admin:
        job_id = admin.submit(manifest("true"), make_zip({"a": ""}))
        wait_for_state(admin, job_id, FINAL)
        batch = [{"seq": i, "group": "eval", "step": i, "values": {"f1": i / 10}} for i in range(5)]
        assert admin.log_metrics(job_id, batch) == 5
        admin.log_metrics(job_id, batch[2:])
        got = admin.metrics(job_id, group="eval")["metrics"]
        assert [p["step"] for p in got] == [0, 1, 2, 3, 4]
        assert {p["learner"] for p in got} == {0}
        other = admin.add_user("mallory")
    with LoomClient(server.url, other["token"]) as mallory:
        for call in (
            lambda: mallory.metrics(job_id),
            lambda: mallory.log_metrics(job_id, batch),
        ):
            with pytest.raises(ClientError) as caught:
                call()
            assert caught.value.status == 404


def test_params_tags_and_artifacts(seat: Seat, tmp_path: Path) -> None:
    """`log_params`, `set_tags` and `log_artifact` inside a job: the params and tags are shown
    with the job and kept in its model's provenance; a param keeps its first value (logging
    another raises), a tag its newest; the artifact comes with the results."""
    script = (
        "import os, pathlib\n"
        "from loom import tracking\n"
        "tracking.log_params({'lr': 0.01}, layers=3, optimizer='adam')\n"
        "tracking.log_param('lr', 0.01)  # the same value again: fine\n"
        "try:\n"
        "    tracking.log_param('lr', 0.5)\n"
        "except ValueError as exc:\n"
        "    print('refused:', exc)\n"
        "tracking.set_tags(dataset='digits-v1', note='first')\n"
        "tracking.set_tag('dataset', 'digits-v2')\n"
        "tracking.log_metrics(step=1, group='train', loss=0.5)\n"
        "pathlib.Path('confusion.txt').write_text('a confusion matrix')\n"
        "tracking.log_artifact('confusion.txt')\n"
        "model = pathlib.Path(os.environ['RESULT_DIR']) / 'model'\n"
        "model.mkdir(parents=True)\n"
        "(model / 'weights.bin').write_bytes(b'w')\n"
    )
    with seat.client() as client:
        text = manifest("python job.py", name="tracked")
        job_id = client.submit(text, make_zip({"job.py": script}))
        job = wait_for_state(client, job_id, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        lines = [x["line"] for x in client.logs(job_id, pagesize=1000)]
        shown = client.job(job_id)
        version = client.model_version("tracked", "latest")
        client.download(job_id, "results", tmp_path / "results.zip")
    assert any(x.startswith("refused: param 'lr' was already logged") for x in lines), lines
    assert shown["params"] == {"layers": "3", "lr": "0.01", "optimizer": "adam"}
    assert shown["tags"] == {"dataset": "digits-v2", "note": "first"}
    assert version["provenance"]["params"] == shown["params"]
    assert version["provenance"]["tags"] == shown["tags"]
    with zipfile.ZipFile(tmp_path / "results.zip") as results:
        assert results.read("artifacts/confusion.txt") == b"a confusion matrix"
