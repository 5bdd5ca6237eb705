"""Experiments end to end, with real trial jobs on a real platform: every algorithm proposes
values inside the space, parallelTrialCount holds, Katib's ending rules, early stopping on live
metrics, halt and resume, kill -9 of the platform, the best model's alias, and bad specs."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import httpx
import pytest
import yaml

from loom.client import ClientError, LoomClient
from loom.domain.katib import ALGORITHMS
from loom.store.db import Database
from loom.store.tables import Job, Learner
from tests.conftest import Seat, Server, eventually, make_zip
from tests.hpo.trial_code import code, experiment

pytestmark = pytest.mark.integration


def args_of(client: LoomClient, job_id: str) -> dict[str, Any]:
    """What the trial's command was really given, as its code printed it."""
    for line in client.logs(job_id, pagesize=1000):
        if line["line"].startswith("args "):
            found: dict[str, Any] = json.loads(line["line"][5:])
            return found
    raise AssertionError(f"job {job_id} printed no args")


def inside(values: dict[str, Any]) -> None:
    lr, width, optimizer = float(values["lr"]), int(values["width"]), values["optimizer"]
    assert 0.001 <= lr <= 0.1
    assert math.isclose(round(lr / 0.001), lr / 0.001, abs_tol=1e-6)  # on the step
    assert 4 <= width <= 32
    assert optimizer in ("sgd", "adam", "rmsprop")


def test_every_algorithm_proposes_values_inside_the_space(seat: Seat) -> None:
    """Each of Katib's algorithms, by name, runs its trials as jobs whose commands got values
    inside the feasible space, on the step, from the list."""
    with seat.client() as client:
        for algorithm in ALGORITHMS:
            settings = {"random_state": "7"}
            if algorithm in ("tpe", "multivariate-tpe"):
                settings["n_startup_trials"] = "2"
            if algorithm == "bayesianoptimization":
                settings = {"random_state": "7", "n_initial_points": "2"}
            if algorithm == "pbt":  # Katib's smallest population
                settings |= {"n_population": "5", "truncation_threshold": "0.4"}
            made = client.create_experiment(
                experiment(
                    f"all-{algorithm}", algorithm, max_trials=4, parallel=2, settings=settings
                ),
                code(),
            )
            assert made["name"] == f"all-{algorithm}"
        for algorithm in ALGORITHMS:
            found = client.wait_experiment(f"all-{algorithm}", timeout_s=240)
            assert found["state"] == "SUCCEEDED", (algorithm, found["message"])
            trials = found["trial_list"]
            assert len(trials) == 4, algorithm
            for trial in trials:
                # hyperband stops a trial whose early reports trail the others': its job
                # (its values) is checked all the same
                stopped = algorithm == "hyperband" and trial["state"] == "EARLY_STOPPED"
                assert trial["state"] == "SUCCEEDED" or stopped, (algorithm, trial)
                inside(trial["parameters"])
                given = args_of(client, trial["job_id"])
                assert given["optimizer"] == trial["parameters"]["optimizer"]
                assert math.isclose(given["lr"], float(trial["parameters"]["lr"]))
                assert given["width"] == int(trial["parameters"]["width"])
                if not stopped:
                    assert trial["objective"] == pytest.approx(trial["metrics"]["accuracy"])
            points = {tuple(sorted(t["parameters"].items())) for t in trials}
            if algorithm == "grid":
                assert len(points) == 4  # a grid never proposes a point twice


def test_parallel_trial_count_is_never_exceeded(seat: Seat) -> None:
    with seat.client() as client:
        client.create_experiment(
            experiment("parallel", "random", max_trials=6, parallel=2, extra_args="--pause 0.3"),
            code(),
        )
        found = client.wait_experiment("parallel", timeout_s=180)
        assert found["state"] == "SUCCEEDED" and found["reason"] == "MaxTrialsReached"
        jobs = [client.job(t["job_id"]) for t in found["trial_list"]]
    spans = [(j["started_at"], j["finished_at"]) for j in jobs]
    for start, _ in spans:  # at any trial's start, at most 2 trials had started and not ended
        at_once = sum(1 for s, e in spans if s <= start < e)
        assert at_once <= 2
    assert len(jobs) == 6 and all(j["state"] == "COMPLETED" for j in jobs)


def test_max_failed_trial_count_fails_the_experiment(seat: Seat) -> None:
    """Katib's rule: more failed trials than maxFailedTrialCount fails the experiment."""
    with seat.client() as client:
        client.create_experiment(
            experiment(
                "failing", max_trials=10, parallel=1, extra_args="--fail yes", maxFailedTrialCount=2
            ),
            code(),
        )
        found = client.wait_experiment("failing", timeout_s=120)
    assert found["state"] == "FAILED"
    assert found["reason"] == "MaxFailedTrialsReached"
    assert found["trials_by_state"] == {"FAILED": 3}
    assert "3 trials failed, more than maxFailedTrialCount (2)" in found["message"]
    assert all("exit" in t["message"].lower() or t["message"] for t in found["trial_list"])


def test_median_stop_halts_a_clearly_worse_trial(seat: Seat) -> None:
    """Two good trials complete; the third's curve is far below theirs at every report, so
    Katib's median stop halts it: EARLY_STOPPED with the reason, its job HALTED, its metrics
    kept."""
    parameters = [
        {
            "name": "lr",
            "parameterType": "discrete",
            "feasibleSpace": {"list": ["0.01", "0.011", "0.00001"]},
        },
    ]
    with seat.client() as client:
        client.create_experiment(
            experiment(
                "median",
                "grid",
                max_trials=3,
                parallel=1,
                parameters=parameters,
                settings={"random_state": "5"},  # this seed walks the grid bad point last
                extra_args="--epochs 12 --pause 0.4",
                earlyStopping={
                    "algorithmName": "medianstop",
                    "algorithmSettings": [
                        {"name": "min_trials_required", "value": "2"},
                        {"name": "start_step", "value": "2"},
                    ],
                },
            ),
            code(),
        )
        found = client.wait_experiment("median", timeout_s=180)
        by_lr = {t["parameters"]["lr"]: t for t in found["trial_list"]}
        worse = by_lr["0.00001"]
        assert worse["number"] == 2
        assert worse["state"] == "EARLY_STOPPED", worse
        assert "stopped early by medianstop" in worse["message"]
        assert client.job(worse["job_id"])["state"] == "HALTED"
        kept = client.metrics(worse["job_id"])
        assert kept, "the stopped trial's metrics are kept"
        assert 2 <= worse["reports"] < 12
        good = [t for t in found["trial_list"] if t is not worse]
        assert all(t["state"] == "SUCCEEDED" and t["reports"] == 12 for t in good)


def test_goal_ends_it_and_the_best_model_gets_its_alias(seat: Seat) -> None:
    """The goal reached ends the experiment (GoalReached); the best trial's model version is
    aliased `best`, with the trial's parameters in its provenance."""
    with seat.client() as client:
        client.create_experiment(
            experiment(
                "goal",
                "random",
                max_trials=20,
                parallel=1,
                settings={"random_state": "3"},
                objective={"type": "maximize", "objectiveMetricName": "accuracy", "goal": 0.5},
            ),
            code(),
        )
        found = client.wait_experiment("goal", timeout_s=120)
        assert found["state"] == "SUCCEEDED" and found["reason"] == "GoalReached"
        best = found["best_trial"]
        assert best["objective"] >= 0.5
        model, _, version = found["best_model"].partition("@")
        aliased = client.model_version(model, "best")
        assert str(aliased["version"]) == version
        lineage = aliased["provenance"]["lineage"]
        assert lineage["experiment"] == "goal" and lineage["trial"] == best["number"]
        assert lineage["parameters"] == best["parameters"]
        trial = next(t for t in found["trial_list"] if t["number"] == best["number"])
        assert aliased["provenance"]["job_id"] == trial["job_id"]


def test_halt_then_resume_goes_on_where_it_was(seat: Seat) -> None:
    with seat.client() as client:
        client.create_experiment(
            experiment("pause", max_trials=4, parallel=2, extra_args="--epochs 8 --pause 0.4"),
            code(),
        )
        eventually(lambda: _running(client, "pause") >= 1, timeout=60)
        halted = client.halt_experiment("pause")
        assert halted["state"] == "HALTED"

        def held() -> bool:
            found = client.experiment("pause")
            jobs = [_job_state(client, t["job_id"]) for t in found["trial_list"]]
            return bool(jobs) and all(s in ("HALTED", "COMPLETED", None) for s in jobs)

        eventually(held, timeout=60)
        before = client.experiment("pause")
        time.sleep(3)  # nothing new is proposed while halted
        assert len(client.experiment("pause")["trial_list"]) == len(before["trial_list"])
        with pytest.raises(ClientError) as refused:
            client.halt_experiment("pause")
        assert refused.value.status == 409
        client.resume_experiment("pause")
        found = client.wait_experiment("pause", timeout_s=180)
    assert found["state"] == "SUCCEEDED"
    assert [t["state"] for t in found["trial_list"]] == ["SUCCEEDED"] * 4


def _job_state(client: LoomClient, job_id: str) -> str | None:
    """None for a trial whose job is not submitted yet."""
    try:
        return str(client.job(job_id)["state"])
    except ClientError as exc:
        assert exc.status == 404
        return None


def _running(client: LoomClient, name: str) -> int:
    found = client.experiment(name)
    return sum(_job_state(client, t["job_id"]) == "PROCESSING" for t in found["trial_list"])


def test_kill9_of_the_platform_mid_experiment(server: Server) -> None:
    """The experiment goes on after kill -9 and a restart: no trial lost, none run twice."""
    with server.client() as client:
        client.create_experiment(
            experiment("crash", max_trials=6, parallel=2, extra_args="--epochs 4 --pause 0.4"),
            code(),
        )
        eventually(lambda: len(client.experiment("crash")["trial_list"]) >= 3, timeout=60)
    server.kill9()
    server.start()
    with server.client() as client:
        found = client.wait_experiment("crash", timeout_s=180)
    assert found["state"] == "SUCCEEDED" and found["reason"] == "MaxTrialsReached"
    trials = found["trial_list"]
    assert [t["number"] for t in trials] == list(range(6))
    # a trial that did not succeed, said whole with its job's history: it failed twice in
    # clean-clone runs, and pytest cut the list of trials it printed before the one that failed
    keys = ("number", "state", "reason", "message", "job_id")
    failed = [{k: t.get(k) for k in keys} for t in trials if t["state"] != "SUCCEEDED"]
    if failed:
        with server.client() as client:
            for trial in failed:
                if trial["job_id"]:
                    job = client.job(str(trial["job_id"]))
                    trial["job"] = {k: job.get(k) for k in ("state", "error_code", "history")}
    assert not failed, "\n".join(json.dumps(t, default=str) for t in failed)
    db = Database(server.database_url)
    try:
        with db.session() as session:
            jobs = [
                j
                for j in session.query(Job).all()
                if (j.lineage or {}).get("experiment") == "crash"
            ]
            earlier = [
                (lr.job_id, lr.message)
                for j in jobs
                for lr in session.query(Learner).filter_by(job_id=j.id).all()
                if lr.attempt != j.attempt
            ]
    finally:
        db.close()
    assert len(jobs) == 6  # one job per trial
    assert {j.id for j in jobs} == {t["job_id"] for t in trials}
    # each ran once: a job the kill caught between its admission and its learner's start is
    # admitted again (attempt 2), but its first attempt never ran its code
    assert all(message.startswith("never started") for _, message in earlier), earlier


def test_bad_experiments_are_refused_with_the_field_named(server: Server) -> None:
    with server.client() as client:
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        bad = experiment("bad", "simulated-annealing")
        response = httpx.post(
            f"{server.url}/v1/experiments",
            headers=headers,
            files={"experiment": ("e.yml", bad), "model_definition": ("m.zip", code())},
        )
        assert response.status_code == 400, response.text
        assert "spec.algorithm.algorithmName" in response.text
        unknown = experiment("bad2", "tpe", settings={"n_startup": "3"})
        with pytest.raises(ClientError) as refused:
            client.create_experiment(unknown, code())
        assert refused.value.status == 400
        assert "n_startup" in refused.value.message
        client.create_experiment(experiment("twice", max_trials=1), code())
        with pytest.raises(ClientError) as twice:
            client.create_experiment(experiment("twice", max_trials=1), code())
        assert twice.value.status == 409
        with pytest.raises(ClientError) as missing:
            client.experiment("no-such-experiment")
        assert missing.value.status == 404
        assert [e["name"] for e in client.experiments()] == ["twice"]


def test_another_user_sees_none_of_it(server: Server) -> None:
    with server.client() as admin:
        admin.create_experiment(experiment("mine", max_trials=1), code())
        other = admin.add_user("someone")
    with server.client(other["token"]) as client:
        assert client.experiments() == []
        with pytest.raises(ClientError) as hidden:
            client.experiment("mine")
        assert hidden.value.status == 404
        with pytest.raises(ClientError) as refused:
            client.experiments(everyone=True)
        assert refused.value.status == 403
    with server.client() as admin:
        (seen,) = admin.experiments(owner="admin")
        assert seen["name"] == "mine" and seen["owner"] == "admin"
        assert [e["owner"] for e in admin.experiments(everyone=True)] == ["admin"]


MNIST = """
import argparse, random
p = argparse.ArgumentParser()
p.add_argument('--batch-size', type=int)
p.add_argument('--lr', type=float)
p.add_argument('--num-layers', type=int)
p.add_argument('--optimizer')
a = p.parse_args()
assert 0.01 <= a.lr <= 0.03 and 2 <= a.num_layers <= 5 and a.optimizer in ('sgd', 'adam', 'ftrl')
for epoch in range(1, 4):
    train = 0.8 + 0.05 * epoch - abs(a.lr - 0.02)
    print(f'Epoch[{epoch}] Train-accuracy={train:.4f}')
    print(f'Epoch[{epoch}] Validation-accuracy={train - 0.02:.4f}')
"""


def test_katibs_random_example_runs(seat: Seat) -> None:
    """Katib's random-search example, its Kubernetes Job replaced by a Loom manifest, is
    accepted (with a note for the Kubernetes-only field) and runs: Katib's metric names with
    their dashes are read from the trials' stdout."""
    from tests.domain.test_katib_spec import document

    doc = document()
    doc["spec"]["maxTrialCount"] = 3
    with seat.client() as client:
        made = client.create_experiment(yaml.safe_dump(doc), make_zip({"mnist.py": MNIST}))
        assert any("primaryContainerName" in w for w in made["warnings"])
        found = client.wait_experiment("random", timeout_s=120)
    assert found["state"] == "SUCCEEDED", found["message"]
    for trial in found["trial_list"]:
        assert trial["state"] == "SUCCEEDED", trial
        assert set(trial["metrics"]) == {"Validation-accuracy", "Train-accuracy"}
        assert trial["objective"] == trial["metrics"]["Validation-accuracy"]


REPORTS = """
import argparse, json, os
p = argparse.ArgumentParser()
p.add_argument('--lr', type=float)
a = p.parse_args()
score = 1 - abs(a.lr - 0.05)
path = os.path.join(os.environ['RESULT_DIR'], 'metrics.json')
for epoch in (1, 2):
    print(f'epoch {epoch} | score: {score * epoch / 2:.4f}', flush=True)
    with open(path, 'a') as f:
        record = {'timestamp': 'now', 'epoch': epoch, 'score': str(score * epoch / 2)}
        f.write(json.dumps(record) + '\\n')
"""


@pytest.mark.parametrize(
    "collector",
    [
        {"source": {"filter": {"metricsFormat": [r"(score):\s*([\d.]+)"]}}},
        {
            "collector": {"kind": "File"},
            "source": {"fileSystemPath": {"path": "$RESULT_DIR/metrics.json", "format": "JSON"}},
        },
    ],
    ids=["stdout-filter", "json-file"],
)
def test_katibs_metrics_collectors(seat: Seat, collector: dict[str, Any]) -> None:
    """The objective from Katib's StdOut collector with a custom filter, and from its File
    collector reading JSON lines."""
    parameters = [
        {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}}
    ]
    text = experiment(
        "collect", max_trials=2, parameters=parameters, metricsCollectorSpec=collector
    )
    doc = yaml.safe_load(text)
    doc["spec"]["objective"] = {"type": "maximize", "objectiveMetricName": "score"}
    doc["spec"]["trialTemplate"]["trialSpec"]["framework"]["command"] = (
        "python reports.py --lr ${trialParameters.lr}"
    )
    with seat.client() as client:
        client.create_experiment(yaml.safe_dump(doc), make_zip({"reports.py": REPORTS}))
        found = client.wait_experiment("collect", timeout_s=120)
    assert found["state"] == "SUCCEEDED", found["message"]
    for trial in found["trial_list"]:
        expected = 1 - abs(float(trial["parameters"]["lr"]) - 0.05)
        assert trial["objective"] == pytest.approx(expected, abs=1e-3)
        assert trial["reports"] == 2
