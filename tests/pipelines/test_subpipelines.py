"""Loom's own spec with what foreign DAGs brought to it, on a real platform: a sub-pipeline run
per item with its outputs collected, an artifact passed by job and path, typed values, an
alternative reference after a skipped step, a clean-up step that runs after a failure and reads
it, and a run deadline."""

from __future__ import annotations

from typing import Any

import pytest

from loom.client import LoomClient

pytestmark = pytest.mark.integration

SQUARE = (
    "import json, os\n"
    "given = json.load(open(os.environ['STEP_VALUES']))\n"
    "json.dump({'y': given['x'] ** 2}, open(os.environ['RESULT_DIR'] + '/outputs.json', 'w'))\n"
)
PASSES = {
    "name": "subs",
    "parameters": {"xs": [2, 3]},
    "outputs": {"squares": "${{ steps.each.outputs.square }}"},
    "steps": [
        {
            "name": "make",
            "kind": "shell",
            "command": "mkdir -p $RESULT_DIR/data && echo hi > $RESULT_DIR/data/f.txt",
        },
        {
            "name": "each",
            "kind": "pipeline",
            "for_each": "${{ parameters.xs }}",
            "parallelism": 1,
            "parameters": {"x": "${{ item }}"},
            "pipeline": {
                "name": "inner",
                "parameters": {"x": 0},
                "outputs": {"square": "${{ steps.sq.outputs.values.y }}"},
                "steps": [
                    {
                        "name": "sq",
                        "kind": "python",
                        "script": SQUARE,
                        "values": {"x": "${{ parameters.x }}"},
                    }
                ],
            },
        },
        {
            "name": "read",
            "kind": "shell",
            "command": 'test "$(cat inputs/data/f.txt)" = hi',
            "inputs": {"data": {"job_id": "${{ steps.make.outputs.job_id }}", "path": "data"}},
        },
        {"name": "never", "kind": "shell", "command": "true", "when": "1 > 2"},
        {
            "name": "either",
            "kind": "shell",
            "after": ["read"],
            "trigger": "none_failed",
            "command": "test ${{ steps.never.outputs.job_id || steps.make.outputs.job_id }} = "
            "${{ steps.make.outputs.job_id }}",
        },
    ],
}
FAILS = {
    "name": "fails",
    "steps": [
        {"name": "broken", "kind": "shell", "command": "exit 3"},
        {
            "name": "cleanup",
            "kind": "shell",
            "after": ["broken"],
            "trigger": "all_done",
            "command": 'echo \'{"saw": "${{ steps.broken.state }}"}\' > $RESULT_DIR/outputs.json',
        },
    ],
}
SLOW = {
    "name": "slow",
    "timeout_s": 10,  # room for its step to start on a loaded machine; then it is halted
    # told to stop, it takes two seconds to: the run is seen while its step stops
    "steps": [
        {
            "name": "nap",
            "kind": "shell",
            "command": "trap 'sleep 2; exit 143' TERM; sleep 120 & wait",
        }
    ],
}


def steps(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in run["steps"]}


def test_sub_pipelines_triggers_artifacts_and_deadlines(tenant: LoomClient) -> None:
    """The fan-out's sub-runs give [4, 9] as the run's output; the clean-up runs after the
    failure and sees FAILED; the run past its deadline ends FAILED, its step halted."""
    made = [tenant.run_pipeline(spec) for spec in (SLOW, PASSES, FAILS)]
    seen: list[str] = []
    slow = tenant.wait_pipeline_run(made[0]["id"], 240, 0.1, lambda r: seen.append(r["state"]))
    passes, fails = (tenant.wait_pipeline_run(m["id"], timeout_s=240) for m in made[1:])

    assert passes["state"] == "SUCCEEDED", passes["message"]
    assert passes["outputs"] == {"squares": [4, 9]}
    each = steps(passes)["each"]
    subs = [tenant.pipeline_run(t["run_id"]) for t in each["tasks"]]
    assert [s["parent_id"] for s in subs] == [passes["id"], passes["id"]]
    assert [s["parameters"] for s in subs] == [{"x": 2}, {"x": 3}]
    assert steps(passes)["never"]["state"] == "SKIPPED"
    assert steps(passes)["either"]["state"] == "SUCCEEDED"
    assert {r["id"] for r in tenant.pipeline_runs()} == {m["id"] for m in made}

    assert fails["state"] == "FAILED"
    cleanup = steps(fails)["cleanup"]
    assert cleanup["state"] == "SUCCEEDED"
    assert cleanup["tasks"][0]["outputs"]["values"] == {"saw": "FAILED"}

    assert slow["state"] == "FAILED" and slow["message"].startswith("timed out after 10 s")
    assert steps(slow)["nap"]["state"] == "HALTED"
    # FAILED from its deadline on, while its step stopped, then ended: never HALTED on the way
    assert seen[-1] == "FAILED" and "HALTED" not in seen, seen
    assert seen.count("FAILED") > 1 and slow["finished_at"] is not None
