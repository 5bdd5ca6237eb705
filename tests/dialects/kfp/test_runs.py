"""KFP pipelines on a real platform, driven by the real `kfp.Client` (in its own venv): a run
waited on to SUCCEEDED, the same pipeline again from the cache with a failing retried step,
and the API's pipelines, versions, experiments, recurring runs and listings."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from loom.client import LoomClient
from tests.conftest import Server
from tests.venvs import kfp_python

pytestmark = pytest.mark.integration

_CLIENT = """
import json, sys, warnings
warnings.simplefilter("ignore")
import kfp
host, token, script = sys.argv[1], sys.argv[2], sys.argv[3]
client = kfp.Client(host=host, existing_token=token)
scope = {"client": client, "args": sys.argv[4:], "json": json}
exec(script, scope)
print(json.dumps(scope["answer"], default=str))
"""


def kfp_client(server: Server, token: str, script: str, *args: str) -> Any:
    """What `script` leaves in `answer`, run with `client`, a kfp.Client of the platform."""
    done = subprocess.run(
        [str(kfp_python()), "-c", _CLIENT, server.url, token, script, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def user(shared_server: Server, request: pytest.FixtureRequest) -> Iterator[tuple[LoomClient, str]]:
    """A user of the module's platform, with their token (kfp.Client's `existing_token`)."""
    with shared_server.client() as admin:
        token = admin.add_user(f"kfp-{request.node.name[:30]}")["token"]
    with shared_server.client(token) as client:
        yield client, token


def step_of(client: LoomClient, run: dict[str, Any], *path: str) -> dict[str, Any]:
    """A step by its names down the sub-runs (`exit-handler-1`, `train`)."""
    step: dict[str, Any] = {}
    for name in path:
        step = next(s for s in run["steps"] if s["name"] == name)
        runs = [t["run_id"] for t in step["tasks"] if t.get("run_id")]
        if runs:
            run = client.pipeline_run(runs[0])
    return step


def outputs_of(step: dict[str, Any]) -> dict[str, Any]:
    return dict(step["tasks"][0]["outputs"]["values"]["parameters"])


RUN = """
result = client.create_run_from_pipeline_package(
    args[0], arguments={"n": 3}, run_name="features", experiment_name="tests")
run = client.wait_for_run_completion(result.run_id, timeout=600, sleep_duration=1)
answer = {"run_id": run.run_id, "state": run.state, "experiment": run.experiment_id,
          "tasks": {t.display_name: t.state for t in run.run_details.task_details}}
"""


def test_kfp_client_runs_a_pipeline_then_its_cache_serves_a_failing_rerun(
    shared_server: Server, user: tuple[LoomClient, str], compiled: dict[str, str], tmp_path: Path
) -> None:
    """Through kfp.Client: an artifact between two components, a loop over an upstream list
    collected, If/Else, a nested pipeline and the exit handler, SUCCEEDED. Again through Loom's
    API with fail=true: every task comes from the cache but the retried one, which fails twice,
    and the exit handler, which sees its group FAILED."""
    client, token = user
    package = tmp_path / "features.yaml"
    package.write_text(compiled["features"])
    answer = kfp_client(shared_server, token, RUN, str(package))
    assert answer["state"] == "SUCCEEDED", answer
    assert answer["tasks"]["train"] == answer["tasks"]["square"] == "SUCCEEDED"
    assert answer["tasks"]["condition-5"] == "SKIPPED"

    first = client.pipeline_run(answer["run_id"])
    print("TIMING", first["duration_s"], [(s["name"], s["duration_s"]) for s in first["steps"]])
    assert outputs_of(step_of(client, first, "exit-handler-1", "total")) == {"Output": 14}
    verdict = step_of(
        client, first, "exit-handler-1", "condition-branches-3", "condition-4", "verdict"
    )
    assert outputs_of(verdict) == {"Output": "big:6.0"}
    assert (
        step_of(client, first, "exit-handler-1", "condition-branches-3", "condition-5")["state"]
        == "SKIPPED"
    )
    doubled = step_of(client, first, "exit-handler-1", "doubled")
    assert doubled["tasks"][0]["outputs"]["Output"] == 9
    train = step_of(client, first, "exit-handler-1", "train")["tasks"][0]["outputs"]
    assert train["metrics"]["accuracy"] == pytest.approx(0.53)
    assert (
        client.model_version("kfp-features-train", "latest")["provenance"]["job_id"]
        == train["job_id"]
    )
    assert outputs_of(step_of(client, first, "report")) == {"Output": "SUCCEEDED"}
    assert step_of(client, first, "exit-handler-1", "condition-6")["state"] == "SKIPPED"

    made = client.run_pipeline(compiled["features"], None, {"fail": True})
    second = client.wait_pipeline_run(made["id"], timeout_s=300)
    assert second["state"] == "FAILED"
    assert step_of(client, second, "exit-handler-1", "train")["state"] == "CACHED"
    assert step_of(client, second, "exit-handler-1", "for-loop-2", "square")["state"] == "CACHED"
    flaky = step_of(client, second, "exit-handler-1", "condition-6", "flaky")
    assert flaky["state"] == "FAILED" and flaky["tasks"][0]["attempt"] == 2
    assert "exit code" in flaky["message"] or "failed" in flaky["message"]
    assert outputs_of(step_of(client, second, "report")) == {"Output": "FAILED"}


CATALOG = """
from kfp_server_api.exceptions import ApiException
package, refused = args
pipeline = client.upload_pipeline(package, pipeline_name="container")
pid = pipeline.pipeline_id
client.upload_pipeline_version(package, pipeline_version_name="v2", pipeline_id=pid)
versions = client.list_pipeline_versions(pid, sort_by="created_at desc")
vid = versions.pipeline_versions[0].pipeline_version_id
spec = client.get_pipeline_version(pid, vid)
experiment = client.create_experiment("nightly")
runs = [client.run_pipeline(experiment.experiment_id, f"r{i}", pipeline_id=pid, version_id=vid,
                            params={"text": f"hi {i}"}) for i in range(2)]
done = [client.wait_for_run_completion(r.run_id, timeout=300, sleep_duration=1).state for r in runs]
page = client.list_runs(experiment_id=experiment.experiment_id, page_size=1, sort_by="display_name")
rest = client.list_runs(experiment_id=experiment.experiment_id, page_size=1, sort_by="display_name",
                        page_token=page.next_page_token)
named = client.list_runs(filter=json.dumps({"predicates": [
    {"operation": 1, "key": "display_name", "stringValue": "r1"}]}))
recurring = client.create_recurring_run(experiment.experiment_id, "every-night",
                                        cron_expression="0 0 3 * * *", pipeline_id=pid,
                                        version_id=vid)
client.disable_recurring_run(recurring.recurring_run_id)
disabled = client.get_recurring_run(recurring.recurring_run_id).status
try:
    client.upload_pipeline(refused, pipeline_name="refused")
    refusal = None
except ApiException as exc:
    refusal = [exc.status, json.loads(exc.body)]
answer = {
    "versions": [v.display_name for v in versions.pipeline_versions],
    "spec_name": spec.pipeline_spec["pipelineInfo"]["name"],
    "done": done, "first": [r.display_name for r in page.runs], "total": page.total_size,
    "second": [r.display_name for r in rest.runs], "named": [r.display_name for r in named.runs],
    "recurring": recurring.recurring_run_id, "status": recurring.status, "disabled": disabled,
    "refusal": refusal,
}
"""


def without_gpu(text: str) -> str:
    """The container pipeline without its accelerator: this machine may have no GPU."""
    document = yaml.safe_load(text)
    resources = document["deploymentSpec"]["executors"]["exec-write"]["container"]["resources"]
    resources.pop("accelerator")
    return yaml.safe_dump(document)


def test_kfp_client_keeps_pipelines_versions_experiments_and_recurring_runs(
    shared_server: Server, user: tuple[LoomClient, str], compiled: dict[str, str], tmp_path: Path
) -> None:
    """Upload, versions, runs of a version in an experiment, listings paged, sorted and
    filtered, a recurring run (a Loom schedule at 03:00 UTC) disabled; a pipeline Loom cannot
    run is refused at upload, naming the field."""
    client, token = user
    package = tmp_path / "container.yaml"
    package.write_text(without_gpu(compiled["container"]))
    refused = tmp_path / "refused.yaml"
    refused.write_text(
        compiled["container"]
        + "\n---\nplatforms:\n  kubernetes:\n    deploymentSpec:\n      executors:\n"
        + "        exec-write:\n          pvcMount: [{mountPath: /data}]\n"
    )
    answer = kfp_client(shared_server, token, CATALOG, str(package), str(refused))
    assert answer["versions"] == ["v2", "container"]
    assert answer["spec_name"] == "kfp-container"
    assert answer["done"] == ["SUCCEEDED", "SUCCEEDED"]
    assert (answer["first"], answer["second"], answer["total"]) == (["r0"], ["r1"], 2)
    assert answer["named"] == ["r1"]
    assert (answer["status"], answer["disabled"]) == ("ENABLED", "DISABLED")
    (schedule,) = client.pipeline_schedules()
    assert schedule["cron"] == "0 3 * * *" and schedule["enabled"] is False
    status, body = answer["refusal"]
    assert status == 400
    assert body["field"] == "platforms.kubernetes.deploymentSpec.executors.exec-write.pvcMount"


def test_loom_apply_runs_a_compiled_pipeline(
    user: tuple[LoomClient, str], compiled: dict[str, str]
) -> None:
    """A compiled pipeline given to `loom apply` (a file with no kind) is a PipelineRun of it:
    run once, shown by `loom get pipelineruns` with its tasks' states, and not again when the
    same file is applied again."""
    client, _token = user
    text = without_gpu(compiled["container"])
    (made,) = client.apply(text)
    assert (made["kind"], made["name"], made["action"]) == (
        "PipelineRun",
        "kfp-container",
        "created",
    )
    run = client.wait_pipeline_run(made["refs"]["pipeline_run"], timeout_s=300)
    assert run["state"] == "SUCCEEDED", run["message"]
    status = client.object("pipelineruns", "kfp-container")["status"]
    assert status["state"] == "SUCCEEDED" and status["tasks"] == [
        {"name": "write", "state": "SUCCEEDED"}
    ]
    assert client.apply(text)[0]["action"] == "unchanged"
