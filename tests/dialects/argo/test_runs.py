"""Argo Workflows written by hand, run on a real platform: a DAG with a script, withParam
over its output, withItems, output parameters, an artifact and an exit handler; a steps
template with a coin-flip condition and a DAG template of a WorkflowTemplate's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom.client import LoomClient
from tests.conftest import Server

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent


def steps(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in run["steps"]}


def values(step: dict[str, Any]) -> list[Any]:
    return [t["outputs"]["values"] for t in step["tasks"]]


def test_argo_workflows_run_to_their_ends(tenant: LoomClient, shared_server: Server) -> None:
    """Both workflows succeed; each task's result and output parameters are what Argo's would
    be, the artifact reached the task that reads it, the exit handler saw SUCCEEDED, and the
    tails branch was skipped."""
    dag = tenant.run_pipeline((HERE / "dag-workflow.yaml").read_text())
    coin = tenant.run_pipeline((HERE / "steps-workflow.yaml").read_text())
    assert any("alpine:3.20 is not pulled" in w for w in dag["warnings"])
    first = tenant.wait_pipeline_run(dag["id"], timeout_s=300)
    assert first["state"] == "SUCCEEDED", first["message"]
    found = steps(first)
    assert values(found["numbers"])[0]["result"] == [1, 2, 3]
    assert [v["result"] for v in values(found["square"])] == [1, 4, 9]
    assert [v["result"] for v in values(found["greet"])] == ["hello a", "hello b"]
    assert values(found["write"])[0]["parameters"] == {"size": 5}
    assert values(found["read"])[0]["result"] == "hello"
    assert values(found["big"])[0]["result"] == "size is 5"
    assert values(found["on-exit-goodbye"])[0]["result"] == "workflow ended SUCCEEDED"
    assert found["square"]["tasks"][0]["attempt"] == 1

    second = tenant.wait_pipeline_run(coin["id"], timeout_s=300)
    assert second["state"] == "SUCCEEDED", second["message"]
    found = steps(second)
    assert found["lost"]["state"] == "SKIPPED" and "is false" in found["lost"]["message"]
    assert found["won"]["tasks"][0]["outputs"]["said"] == "WON WITH HEADS"
    assert values(found["after"])[0]["result"] == "WON WITH HEADS"


def test_loom_apply_keeps_templates_runs_workflows_and_schedules_cron_workflows(
    tenant: LoomClient,
) -> None:
    """`loom apply`: a WorkflowTemplate is kept and a Workflow applied later runs a template of
    it; `loom get` shows Argo's status (phase, nodes with their outputs); a CronWorkflow is a
    Loom schedule, paused as it asks; deleting removes what they became."""
    template, workflow = (HERE / "steps-workflow.yaml").read_text().split("\n---\n")
    first = tenant.apply(template)
    assert first[0]["action"] == "created"
    named = workflow.replace("name: coin", "name: coin-applied")
    (made,) = tenant.apply(named)
    run_id = made["refs"]["pipeline_run"]
    assert tenant.wait_pipeline_run(run_id, timeout_s=300)["state"] == "SUCCEEDED"
    status = tenant.object("workflows", "coin-applied")["status"]
    assert status["phase"] == "Succeeded"
    after = status["nodes"]["coin-applied.after"]
    assert after["phase"] == "Succeeded" and after["outputs"]["result"] == "WON WITH HEADS"
    assert status["nodes"]["coin-applied.won.say"]["phase"] == "Succeeded"
    assert status["nodes"]["coin-applied.lost"]["phase"] == "Skipped"

    cron = (
        "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata: {name: nightly}\n"
        "spec:\n  schedule: '0 3 * * *'\n  suspend: true\n  workflowSpec:\n"
        "    workflowTemplateRef: {name: shared-runner}\n"
    )
    runner = (
        "apiVersion: argoproj.io/v1alpha1\nkind: WorkflowTemplate\n"
        "metadata: {name: shared-runner}\n"
        "spec:\n  entrypoint: go\n  templates:\n  - name: go\n"
        "    container: {image: alpine, command: [echo, hi]}\n"
    )
    applied = tenant.apply(runner + "---\n" + cron)
    assert [a["action"] for a in applied] == ["created", "created"]
    (schedule,) = tenant.pipeline_schedules()
    assert schedule["cron"] == "0 3 * * *" and schedule["enabled"] is False
    assert tenant.object("cronworkflows", "nightly")["status"]["phase"] == "Stopped"
    tenant.delete_object("cronworkflows", "nightly")
    assert tenant.pipeline_schedules() == []
