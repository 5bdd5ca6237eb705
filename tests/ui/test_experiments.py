"""Experiments in the browser: a small search watched from its page as its trials fill the
table, its best trial and its two charts; and the experiment pages checked by axe-core."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, expect

from loom.client import LoomClient
from tests.conftest import Server, make_zip
from tests.ui.browser import (
    JOB_MS,
    PHONE,
    audit,
    column,
    fact,
    fits_a_phone,
    nothing_serious,
    row_of,
    section,
    shoot,
    shown_state,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.integration]

# Katib's default collector reads `name=value` lines from stdout: accuracy is 0.5 + lr.
TRIAL = (
    'python -c "import time; time.sleep({pause}); '
    "print('accuracy=%.3f' % (0.5 + ${{trialParameters.lr}}))\""
)
CODE = make_zip({"README.txt": "The trials' code is in their command.\n"})


def tiny_search(name: str, pause_s: float, **spec: Any) -> str:
    """A grid of four learning rates, 0.1 to 0.4, two trials at a time; each trial sleeps
    `pause_s` and prints its accuracy, so the best is lr 0.4 with 0.9."""
    document = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name},
        "spec": {
            "objective": {"type": "maximize", "objectiveMetricName": "accuracy"},
            "algorithm": {"algorithmName": "grid"},
            "parallelTrialCount": 2,
            "maxTrialCount": 4,
            "parameters": [
                {
                    "name": "lr",
                    "parameterType": "double",
                    "feasibleSpace": {"min": "0.1", "max": "0.4", "step": "0.1"},
                }
            ],
            "trialTemplate": {
                "trialParameters": [{"name": "lr", "reference": "lr"}],
                "trialSpec": {
                    "name": f"{name}-trial",
                    "cpus": 0.5,
                    "memory": "256MiB",
                    "framework": {"name": "python", "command": TRIAL.format(pause=pause_s)},
                },
            },
            **spec,
        },
    }
    return yaml.safe_dump(document, sort_keys=False)


@pytest.fixture(scope="module")
def ended(platform: Server) -> str:
    """A search that has ended and may resume with a larger budget (resumePolicy LongRunning)."""
    with platform.client() as client:
        client.create_experiment(tiny_search("tiny-ended", 0, resumePolicy="LongRunning"), CODE)
        found = client.wait_experiment("tiny-ended", timeout_s=JOB_MS / 1000, every_s=0.2)
    assert found["state"] == "SUCCEEDED", found
    return "tiny-ended"


def open_experiment(page: Page, name: str) -> None:
    """An ended experiment's page, once both its charts have drawn."""
    page.goto(f"/ui/#/experiments/{name}")
    expect(shown_state(page)).to_contain_text("SUCCEEDED")
    expect(page.get_by_test_id("objective-chart").locator("canvas")).to_be_visible()
    expect(page.get_by_test_id("parameters-chart").locator("canvas")).to_be_visible()


def test_an_experiments_trials(
    page: Page, open_page: Callable[..., Page], platform: Server, client: LoomClient
) -> None:
    """A search of four trials, two at a time, fills its trials table as they run, with no
    reload, until SUCCEEDED; its best trial has the table's highest objective, and both
    charts say what they draw."""
    sign_in(page, platform.admin_token)
    page.evaluate("window.stillThisPage = true")
    client.create_experiment(tiny_search("tiny-live", 3), CODE)
    page.get_by_role("banner").get_by_role("link", name="Experiments", exact=True).click()
    expect(page.get_by_role("heading", name="Experiments", level=1)).to_be_visible()
    expect(page.get_by_role("table", name="Your experiments, newest first")).to_be_visible()
    listed = row_of(page, "tiny-live")
    expect(listed).to_contain_text(re.compile("CREATED|RUNNING"))
    listed.get_by_role("link", name="tiny-live").click()

    expect(page).to_have_url(re.compile("#/experiments/tiny-live$"))
    expect(page.get_by_role("heading", name="tiny-live", level=1)).to_be_visible()
    actions = page.get_by_role("group", name="Experiment actions")
    expect(actions.get_by_role("button")).to_have_text(["Halt", "Delete"])
    trials = page.get_by_role("region", name="Trials table")
    # the last of two waves of 3 s trials is still to come
    expect(trials.get_by_role("row").filter(has_text="RUNNING").first).to_be_visible()
    expect(shown_state(page)).to_contain_text("RUNNING", timeout=1000)
    shoot(page, "experiment-running")

    expect(shown_state(page)).to_contain_text("SUCCEEDED", timeout=JOB_MS)
    rows = trials.locator("tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.filter(has_text="SUCCEEDED")).to_have_count(4)
    assert page.evaluate("window.stillThisPage"), "the page was loaded again"
    expect(page.get_by_role("table", name="Trials")).to_be_visible()
    expect(actions.get_by_role("button")).to_have_text(["Delete"])

    objectives = [cell.splitlines()[0] for cell in column(trials, "accuracy (objective)")]
    highest = max(objectives, key=float)
    assert float(highest) == pytest.approx(0.9), objectives  # lr 0.4's
    best = section(page, "Best trial")
    expect(fact(best, "accuracy (objective)")).to_have_text(highest)
    expect(fact(best, "Parameters")).to_have_text("lr 0.4")
    marked = trials.get_by_role("row").filter(has=page.get_by_role("rowheader", name="best"))
    expect(marked).to_contain_text("lr 0.4")
    assert client.experiment("tiny-live")["best_trial"]["objective"] == pytest.approx(0.9)

    expect(section(page, "Charts").get_by_role("img")).to_have_count(2)
    objective = page.get_by_role("img", name=re.compile("^Objective over trials"))
    expect(objective).to_have_accessible_name(re.compile("accuracy of 4 of 4 trials"))
    parameters = page.get_by_role("img", name=re.compile("^Parameters of the trials"))
    expect(parameters).to_have_accessible_name(
        re.compile("^Parameters of the trials: lr, accuracy")
    )
    for chart in (objective, parameters):
        expect(chart.locator("canvas")).to_be_visible()
    shoot(page, "experiment")

    phone = open_page(viewport=PHONE, is_mobile=True, has_touch=True)
    sign_in(phone, platform.admin_token)
    open_experiment(phone, "tiny-live")
    fits_a_phone(phone, "experiment-phone")

    page.get_by_role("banner").get_by_role("link", name="Experiments", exact=True).click()
    expect(listed).to_contain_text("SUCCEEDED")
    expect(listed.get_by_role("cell").nth(4)).to_contain_text("0.9")  # the best value
    shoot(page, "experiments")


def test_experiment_pages_are_accessible(
    open_page: Callable[..., Page], platform: Server, ended: str
) -> None:
    """axe-core finds nothing serious or critical on the experiments list, an experiment's
    page, or its resume dialog, which asks an ended search for a new trial budget."""
    page = open_page(bypass_csp=True)  # axe-core goes in as an inline script
    found: dict[str, list[str]] = {}
    sign_in(page, platform.admin_token, "#/experiments")
    expect(row_of(page, ended)).to_contain_text("SUCCEEDED")
    audit(page, "experiments", found)
    open_experiment(page, ended)
    audit(page, "experiment", found)

    page.get_by_role("button", name="Resume", exact=True).click()
    dialog = page.get_by_role("dialog", name="Resume this experiment?")
    expect(dialog.get_by_label("New trial budget")).to_have_value("8")
    audit(page, "experiment-resume-dialog", found)
    shoot(page, "experiment-resume-dialog")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    nothing_serious(found)
