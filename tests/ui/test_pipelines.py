"""Pipelines in the browser: a run's graph and steps table followed live to the end, the same
run again served from the cache, the runs and schedules listed; and the pipeline pages checked
by axe-core."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from loom.client import LoomClient
from tests.conftest import Server
from tests.ui.browser import (
    JOB_MS,
    PHONE,
    audit,
    column,
    fits_a_phone,
    nothing_serious,
    row_of,
    shoot,
    shown_state,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.integration]

# prepare, then train (once per size) and evaluate beside it: seconds each, so it can be watched.
DAG: dict[str, Any] = {
    "name": "tiny-dag",
    "parameters": {"sizes": ["small", "large"]},
    "steps": [
        {"name": "prepare", "kind": "shell", "command": "sleep 4; echo prepared"},
        {
            "name": "train",
            "kind": "shell",
            "command": "sleep 2; echo trained ${{ item }}",
            "after": ["prepare"],
            "for_each": "${{ parameters.sizes }}",
        },
        {
            "name": "evaluate",
            "kind": "python",
            "script": "import time; time.sleep(2); print('evaluated')",
            "after": ["prepare"],
        },
    ],
}
STEPS = ["prepare", "train", "evaluate"]
# Fails at once: a failed run, which offers Retry.
BROKEN: dict[str, Any] = {
    "name": "tiny-broken",
    "steps": [
        {"name": "check", "kind": "shell", "command": "echo checking; exit 3"},
        {"name": "publish", "kind": "shell", "command": "echo never", "after": ["check"]},
    ],
}


def step_box(page: Page, step: str) -> Locator:
    """A step's box in the pipeline graph, found by the name written in it."""
    named = page.locator("text").filter(has_text=re.compile(f"^{re.escape(step)}$"))
    return page.get_by_role("img", name="Pipeline graph").locator("g").filter(has=named)


def said_in_box(
    page: Page, step: str, *lines: str | re.Pattern[str], timeout: float | None = None
) -> None:
    """The step's box shows its name, then these lines (its state, its details), in order."""
    expect(step_box(page, step).locator("text")).to_contain_text([step, *lines], timeout=timeout)


@pytest.fixture(scope="module")
def failed_run(platform: Server) -> str:
    """A run that failed at its first step, and a paused schedule, both the admin's."""
    with platform.client() as client:
        run_id = client.run_pipeline(BROKEN)["id"]
        client.schedule_pipeline(BROKEN, name="weekly-check", cron="0 3 * * 1", enabled=False)
        run = client.wait_pipeline_run(run_id, timeout_s=JOB_MS / 1000)
    assert run["state"] == "FAILED", run
    return str(run_id)


def test_a_pipelines_dag(
    page: Page, open_page: Callable[..., Page], platform: Server, client: LoomClient
) -> None:
    """A run's graph shows each step's name and its state as text, moving with no reload to
    SUCCEEDED, as its Steps table does; the same run again is all cached, said in both; the
    list shows both runs and a paused schedule."""
    sign_in(page, platform.admin_token)
    page.evaluate("window.stillThisPage = true")
    run_id = client.run_pipeline(DAG)["id"]
    page.goto(f"/ui/#/pipelines/{run_id}")

    expect(page.get_by_role("heading", name=f"tiny-dag · {run_id}", level=1)).to_be_visible()
    actions = page.get_by_role("group", name="Pipeline run actions")
    expect(actions.get_by_role("button")).to_have_text(["Halt", "Delete"])
    said_in_box(page, "prepare", "RUNNING")
    said_in_box(page, "train", "WAITING")
    said_in_box(page, "evaluate", "WAITING")
    shoot(page, "pipeline-running")
    for step in STEPS:
        said_in_box(page, step, "SUCCEEDED", timeout=JOB_MS)
    said_in_box(page, "train", "SUCCEEDED", re.compile("2/2 items"))
    expect(shown_state(page)).to_contain_text("SUCCEEDED")
    assert page.evaluate("window.stillThisPage"), "the page was loaded again"

    steps = page.get_by_role("region", name="Steps table")
    expect(steps.get_by_role("table", name="Steps")).to_be_visible()
    expect(steps.get_by_role("rowheader")).to_have_text(STEPS)
    for step in STEPS:
        expect(row_of(page, step)).to_contain_text("SUCCEEDED")
    assert column(steps, "Cached") == ["no"] * 3
    expect(row_of(page, "train")).to_contain_text("2 of 2 items done")
    expect(actions.get_by_role("button")).to_have_text(["Delete"])
    shoot(page, "pipeline")

    phone = open_page(viewport=PHONE, is_mobile=True, has_touch=True)
    sign_in(phone, platform.admin_token, f"#/pipelines/{run_id}")
    said_in_box(phone, "train", "SUCCEEDED")
    fits_a_phone(phone, "pipeline-phone")

    again = client.run_pipeline(DAG)["id"]
    assert client.wait_pipeline_run(again, timeout_s=JOB_MS / 1000)["state"] == "SUCCEEDED"
    page.goto(f"/ui/#/pipelines/{again}")
    expect(page.get_by_role("heading", name=f"tiny-dag · {again}", level=1)).to_be_visible()
    for step in STEPS:
        said_in_box(page, step, "CACHED", re.compile("cached$"))
    expect(steps.get_by_role("rowheader")).to_have_text(STEPS)
    assert column(steps, "Cached") == ["cached"] * 3
    shoot(page, "pipeline-cached")

    client.schedule_pipeline(DAG, name="nightly-dag", cron="0 3 * * *", enabled=False)
    page.get_by_role("banner").get_by_role("link", name="Pipelines", exact=True).click()
    expect(page.get_by_role("heading", name="Pipelines", level=1)).to_be_visible()
    runs = page.get_by_role("region", name="Pipeline runs table")
    expect(row_of(page, again)).to_contain_text("SUCCEEDED")
    expect(row_of(page, run_id)).to_contain_text("SUCCEEDED")
    assert column(runs, "Run")[:2] == [again, run_id]  # newest first
    assert column(runs, "Cached")[:2] == ["4", "0"]  # a task for each item of the fan-out
    schedules = page.get_by_role("region", name="Schedules table")
    expect(row_of(page, "nightly-dag")).to_contain_text("no (paused)")
    expect(schedules).to_contain_text("0 3 * * *")
    shoot(page, "pipelines")


def test_pipeline_pages_are_accessible(
    open_page: Callable[..., Page], platform: Server, failed_run: str
) -> None:
    """axe-core finds nothing serious or critical on the pipelines list, a failed run's page,
    or its retry dialog."""
    page = open_page(bypass_csp=True)  # axe-core goes in as an inline script
    found: dict[str, list[str]] = {}
    sign_in(page, platform.admin_token, "#/pipelines")
    expect(row_of(page, failed_run)).to_contain_text("FAILED")
    expect(row_of(page, "weekly-check")).to_contain_text("no (paused)")
    audit(page, "pipelines", found)
    page.goto(f"/ui/#/pipelines/{failed_run}")
    said_in_box(page, "check", "FAILED")
    said_in_box(page, "publish", "SKIPPED")
    audit(page, "pipeline", found)

    page.get_by_role("button", name="Retry", exact=True).click()
    dialog = page.get_by_role("dialog", name="Retry this pipeline run?")
    expect(dialog).to_be_visible()
    audit(page, "pipeline-retry-dialog", found)
    shoot(page, "pipeline-retry-dialog")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    nothing_serious(found)


# A DAG inside a step (what a KFP or Argo DAG becomes): one sub-run, which outputs a value.
NESTED: dict[str, Any] = {
    "name": "tiny-nested",
    "outputs": {"said": "${{ steps.inner.outputs.said }}"},
    "steps": [
        {
            "name": "inner",
            "kind": "pipeline",
            "pipeline": {
                "name": "tiny-inner",
                "outputs": {"said": "${{ steps.say.outputs.values.word }}"},
                "steps": [
                    {
                        "name": "say",
                        "kind": "shell",
                        "command": 'echo \'{"word": "hello"}\' > $RESULT_DIR/outputs.json',
                    }
                ],
            },
        }
    ],
}


def test_a_sub_run_is_linked_both_ways_with_its_outputs(
    page: Page, platform: Server, client: LoomClient
) -> None:
    """A pipeline step links to its sub-run, whose page links back to its parent and shows the
    value its step output; the parent shows the run's own outputs."""
    run_id = client.run_pipeline(NESTED)["id"]
    assert client.wait_pipeline_run(run_id, timeout_s=JOB_MS / 1000)["state"] == "SUCCEEDED"
    sign_in(page, platform.admin_token, f"#/pipelines/{run_id}")
    expect(page.get_by_role("heading", name=f"tiny-nested · {run_id}", level=1)).to_be_visible()
    expect(page.get_by_text('"said": "hello"')).to_be_visible()
    row_of(page, "inner").get_by_role("link", name=re.compile("^run ")).click()
    expect(page.get_by_role("heading", name=re.compile("^tiny-inner · "), level=1)).to_be_visible()
    expect(row_of(page, "say")).to_contain_text("word = hello")
    page.get_by_role("link", name=f"run {run_id}").click()
    expect(page.get_by_role("heading", name=f"tiny-nested · {run_id}", level=1)).to_be_visible()
