"""Serving in the browser: a registered model deployed from its page, and a prediction asked
of the deployment through its "Try it" form; a deployment's drift charted on its page, and a
model version's factsheet page. The drift windows and an evaluation are seeded in the
platform's store, as the supervisor and an evaluation job would write them: no detector runs
(its environment takes minutes to build; tests/monitoring runs one)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from loom.client import LoomClient
from loom.store.db import Database
from loom.store.tables import Deployment, DriftWindow, Model, ModelEvaluation
from tests.conftest import Server, held_out_digits, register, v2_request
from tests.ui.browser import (
    audit,
    fact,
    nothing_serious,
    row_of,
    section,
    shoot,
    shown_state,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def test_register_deploy_try_a_prediction(
    page: Page, platform: Server, client: LoomClient, model_zip: bytes
) -> None:
    """Models → digits → Deploy opens the new deployment's page, which turns ready and
    answers a V2 request for one 8×8 image with the model's ten logits."""
    register(client, model_zip)
    sign_in(page, platform.admin_token, "#/models")
    expect(page.get_by_role("heading", name="Models", level=1)).to_be_visible()
    shoot(page, "models-registered")
    page.get_by_role("link", name="digits", exact=True).click()

    expect(page.get_by_role("heading", name="digits", level=1)).to_be_visible()
    version = row_of(page, "v1")
    version.get_by_label("Deployment name").fill("ui-digits")
    shoot(page, "model-deploy")
    version.get_by_role("button", name="Deploy").click()

    expect(page).to_have_url(f"{platform.url}/ui/#/deployments/ui-digits")
    expect(page.get_by_role("heading", name="ui-digits", level=1)).to_be_visible()
    expect(shown_state(page)).to_contain_text("ready", timeout=120_000)
    images, _labels = held_out_digits()
    request = v2_request(images[:1, None])  # one image: [1, 1, 8, 8]
    assert request["inputs"][0]["shape"] == [1, 1, 8, 8]
    page.get_by_label("Request (V2 JSON)").fill(json.dumps(request))
    page.get_by_role("button", name="Send").click()

    response = page.get_by_label("Response")
    expect(response).to_contain_text('"outputs"', timeout=60_000)
    answer = json.loads(response.inner_text())
    [logits] = answer["outputs"]
    assert (logits["name"], logits["shape"], len(logits["data"])) == ("logits", [1, 10], 10)
    assert client.deployment("ui-digits")["model"] == "digits"
    traffic = page.get_by_label("Traffic, the last 2 seconds")
    expect(traffic).to_contain_text("Request rate")
    expect(traffic).to_contain_text("Latency p99")
    expect(traffic.get_by_text("Mean latency, all time").locator("xpath=..")).to_contain_text(" ms")
    shoot(page, "deployment-answer")

    page.get_by_role("navigation").get_by_role("link", name="Deployments").click()
    expect(page.get_by_role("heading", name="Deployments", level=1)).to_be_visible()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="ui-digits"))
    expect(row).to_contain_text("ready")
    shoot(page, "deployments-one")


# Three windows a minute apart: quiet, quiet, then feature c drifted with 3 outliers.
WINDOWS = [(False, 0.06, 0.41, 0, []), (False, 0.08, 0.22, 1, []), (True, 0.43, 1e-9, 3, ["c"])]
FAIRNESS = {"disparate_impact": 0.83, "statistical_parity_difference": -0.07}


def seed(db: Database, deployment: str) -> None:
    """The deployment's drift windows (as the supervisor takes them in from its gateway) and a
    fairness evaluation of the version it serves (as an evaluation job records it)."""
    start = time.time() - 600
    with db.session() as session:
        row = session.scalars(select(Deployment).where(Deployment.name == deployment)).one()
        for n, (drift, score, p_value, outliers, features) in enumerate(WINDOWS):
            session.add(
                DriftWindow(
                    deployment_id=row.id,
                    window_key=f"w{n}",
                    owner_id=row.owner_id,
                    deployment=row.name,
                    model_name=row.model_name,
                    model_version=row.model_version,
                    at=start + 60 * (n + 1),
                    since=start + 60 * n,
                    drift=drift,
                    score=score,
                    p_value=p_value,
                    size=200,
                    outliers=outliers,
                    features=features,
                    detail={},
                )
            )
        model = session.scalars(select(Model).where(Model.name == row.model_name)).one()
        session.add(
            ModelEvaluation(
                id=uuid.uuid4().hex,
                model_id=model.id,
                version=row.model_version,
                kind="fairness",
                job_id="evaluate-job",
                lineage=None,
                results=FAIRNESS,
                created_at=time.time(),
            )
        )


def test_drift_chart_and_factsheet(
    open_page: Callable[..., Page], platform: Server, client: LoomClient, model_zip: bytes
) -> None:
    """The deployment's Monitoring section says the last window drifted in c, draws the chart
    and lists the three windows; its form refuses drift for a version without reference data
    (the server's word) and a window too small (the page's), and turns payload logging on; the
    Factsheet link of digits-drift v1 opens its factsheet, which
    names the deployment serving it, the fairness results, 1 of 3 windows drifted, and
    downloads as Markdown; axe-core finds nothing serious on either page."""
    register(client, model_zip, "digits-drift")
    client.deploy("ui-drift", "digits-drift", 1, min_replicas=0)  # no replica: nothing to wait for
    seed(Database(platform.database_url), "ui-drift")

    page = open_page(bypass_csp=True)  # axe-core goes in as an inline script
    found: dict[str, list[str]] = {}
    sign_in(page, platform.admin_token, "#/deployments/ui-drift")
    monitoring = section(page, "Monitoring")
    expect(monitoring.get_by_text("Drifted: c (p-value 1.000e-9).")).to_be_visible()
    expect(fact(monitoring, "Score")).to_have_text("0.43")
    chart = monitoring.get_by_role("img", name="Drift of ui-drift over time", exact=False)
    expect(chart.locator("canvas").first).to_be_visible()
    windows = monitoring.locator("tbody tr")
    expect(windows).to_have_count(3)
    expect(windows.first).to_contain_text("yes")
    expect(windows.first).to_contain_text("c")
    shoot(page, "deployment-drift")
    audit(page, "deployment-drift", found)

    drift_box = monitoring.get_by_role("checkbox", name="Drift")
    drift_box.check()
    monitoring.get_by_role("button", name="Save monitoring").click()
    expect(monitoring.get_by_role("alert")).to_contain_text("save_reference")  # no reference
    expect(drift_box).to_have_attribute("aria-invalid", "true")
    drift_box.uncheck()
    window = monitoring.get_by_label("Window (requests)")
    window.fill("5")
    monitoring.get_by_role("button", name="Save monitoring").click()
    expect(monitoring.get_by_role("alert")).to_contain_text("Window: a whole number")
    window.fill("200")
    monitoring.get_by_label("Payloads kept (%)").fill("10")
    monitoring.get_by_role("button", name="Save monitoring").click()
    expect(monitoring.get_by_role("status")).to_have_text("Saved.")
    expect(monitoring).to_contain_text("in windows of 200 requests; 10% of payloads kept")
    assert client.deployment("ui-drift")["monitoring"]["payloads"]["rate"] == 0.1

    page.get_by_role("link", name="digits-drift", exact=True).click()
    row_of(page, "v1").get_by_role("link", name="Factsheet of version 1").click()
    expect(page).to_have_url(f"{platform.url}/ui/#/models/digits-drift/versions/1")
    expect(page.get_by_role("heading", name="digits-drift v1", level=1)).to_be_visible()
    expect(fact(page.locator("main"), "Served by")).to_have_text("ui-drift")
    job = client.model_version("digits-drift", 1)["provenance"]["job_id"]
    expect(fact(section(page, "Provenance"), "Job")).to_have_text(job)
    evaluations = section(page, "Evaluations")
    expect(evaluations.get_by_role("row").filter(has_text="disparate_impact")).to_contain_text(
        "0.83"
    )
    drift = section(page, "Drift in service")
    expect(drift.get_by_text("1 of 3 windows drifted")).to_be_visible()
    expect(drift.get_by_role("img", name="Drift of digits-drift v1", exact=False)).to_be_visible()
    shoot(page, "version-factsheet")
    audit(page, "version-factsheet", found)
    with page.expect_download() as download:
        page.get_by_role("link", name="Factsheet as Markdown").click()
    assert download.value.suggested_filename == "digits-drift-v1-factsheet.md"
    text = Path(download.value.path()).read_text()
    assert "# Factsheet: digits-drift version 1" in text and "1 of 3 windows drifted" in text
    nothing_serious(found)
