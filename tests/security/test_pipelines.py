"""Pipelines built to break the driver: a condition nested thousands deep, and a step whose
outputs.json is nested thousands deep. The first is refused at submission (400, the field
named); the second fails its step and its run with the reason, the driver goes on with other
runs, and a halt still halts."""

from __future__ import annotations

from typing import Any

import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import Server, eventually, make_zip

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEEP_OUTPUTS = """
import os
with open(os.path.join(os.environ["RESULT_DIR"], "outputs.json"), "w") as out:
    out.write("[" * 30_000 + "]" * 30_000)
"""
SLEEP = "import time; print('started', flush=True); time.sleep(300)\n"


def step(name: str, command: str, **more: Any) -> dict[str, Any]:
    manifest = {"name": f"p-{name}", "framework": {"name": "python", "command": command}}
    return {"name": name, "kind": "job", "manifest": manifest, **more}


@pytest.mark.parametrize(
    "nested", ["not " * 5000 + "true", "not " * 400 + "true", "(" * 300 + "1" + ")" * 300]
)
def test_a_deeply_nested_condition_is_refused_at_submission(
    tenant: LoomClient, nested: str
) -> None:
    """A condition nested far deeper than any condition needs is a 400 naming the step's
    `when`, never a 500 or a run the driver chokes on."""
    pipeline = {"name": "deep", "steps": [step("a", "true", when=nested)]}
    with pytest.raises(ClientError) as refused:
        tenant.run_pipeline(pipeline, make_zip({"x": ""}))
    assert refused.value.status == 400, refused.value
    assert "steps[0].when" in refused.value.message
    assert tenant.pipeline_runs() == []


def test_deep_outputs_fail_their_step_and_a_halt_still_halts(
    tenant: LoomClient, shared_server: Server
) -> None:
    """A step that leaves outputs.json nested 30,000 deep fails with the reason (and the step
    that reads it is skipped); a run halted while its step runs halts its job; the driver logs
    no failed pass over either."""
    pipeline = {
        "name": "deep-outputs",
        "steps": [
            step("a", "python deep.py"),
            step("b", "true", when="${{ steps.a.outputs.values.x }} == 1"),
        ],
    }
    code = make_zip({"deep.py": DEEP_OUTPUTS, "sleep.py": SLEEP})
    bad = tenant.run_pipeline(pipeline, code)["id"]
    slow = tenant.run_pipeline({"name": "slow", "steps": [step("s", "python sleep.py")]}, code)[
        "id"
    ]
    ended = tenant.wait_pipeline_run(bad, timeout_s=180)
    assert ended["state"] == "FAILED", ended
    states = {s["name"]: (s["state"], s["message"]) for s in ended["steps"]}
    assert states["a"][0] == "FAILED" and "outputs.json is nested" in states["a"][1], states
    assert states["b"][0] == "SKIPPED", states

    def slow_running() -> bool:
        run = tenant.pipeline_run(slow)
        return any(s["state"] == "RUNNING" for s in run["steps"])

    eventually(slow_running, 120)
    tenant.halt_pipeline_run(slow)
    assert tenant.wait_pipeline_run(slow, timeout_s=120)["state"] == "HALTED"

    def stopped() -> bool:  # the run is HALTED at once; its step once its job has stopped
        return all(s["state"] == "HALTED" for s in tenant.pipeline_run(slow)["steps"])

    eventually(stopped, 120)
    assert "moving" not in shared_server.log.read_text()  # no pass over a run failed
