"""Serving in the browser: a registered model deployed from its page, and a prediction asked
of the deployment through its "Try it" form."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from loom.client import LoomClient
from tests.conftest import Server, held_out_digits, register, v2_request
from tests.ui.browser import row_of, shoot, shown_state, sign_in

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
