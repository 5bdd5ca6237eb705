"""Every page: signing in and out, what another user may see of the admin's work, axe-core's
accessibility rules, and a phone's width."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect

from loom.client import LoomClient
from tests.conftest import Server, register
from tests.ui.browser import (
    NAV,
    PHONE,
    audit,
    fits_a_phone,
    nothing_serious,
    row_of,
    shoot,
    shown_state,
    sign_in,
)
from tests.ui.digits import run_digits

pytestmark = [pytest.mark.browser, pytest.mark.integration]

IDLE = ("ready", "scaled to zero")  # a deployment of no replicas until asked


@dataclass
class AdminWork:
    job_id: str
    model: str
    deployment: str


@pytest.fixture(scope="module")
def work(platform: Server, model_zip: bytes) -> AdminWork:
    """A completed run with metrics, a registered model and a deployment, all the admin's."""
    with platform.client() as client:
        job_id = run_digits(client, "digits-admin")
        register(client, model_zip)
        client.deploy("admin-digits", "digits", min_replicas=0)
        client.wait_deployment("admin-digits", states=IDLE)
    return AdminWork(job_id, "digits", "admin-digits")


def open_job(page: Page, job_id: str) -> None:
    """A job's page, once its charts have drawn."""
    page.goto(f"/ui/#/jobs/{job_id}")
    expect(page.get_by_role("log")).to_contain_text("test accuracy:")
    expect(page.locator("[data-testid=metric-chart] canvas").first).to_be_visible()


def test_signin(page: Page, platform: Server) -> None:
    """A refused token is said to be refused; the admin's shows their name and role and the
    navigation, the token kept only in an HttpOnly cookie (through a reload); signing out
    forgets it and shows the form again."""
    page.goto("/ui/")
    token = page.get_by_label("API token")
    expect(token).to_be_visible()
    token.fill("not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("That token was not accepted")
    expect(page.get_by_role("navigation")).to_have_count(0)
    shoot(page, "signin-refused")

    token.fill(platform.admin_token)
    page.get_by_role("button", name="Sign in").click()
    banner = page.get_by_role("banner")
    expect(banner).to_contain_text("admin · admin")
    for name in (*NAV, "Users"):
        expect(banner.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Jobs", level=1)).to_be_visible()
    # The token is in no storage a script of the page can read: only in an HttpOnly cookie.
    stored = page.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert platform.admin_token not in stored and platform.admin_token not in page.evaluate(
        "document.cookie"
    )
    cookies = page.context.cookies()
    session = next(c for c in cookies if c["name"] == "loom_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    page.reload()  # the session outlives a reload
    expect(page.get_by_role("heading", name="Jobs", level=1)).to_be_visible()

    banner = page.get_by_role("banner")
    banner.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API token")).to_be_visible()
    expect(page.get_by_role("navigation")).to_have_count(0)
    page.reload()
    expect(page.get_by_label("API token")).to_be_visible()
    assert not [c for c in page.context.cookies() if c["name"] == "loom_session"]


def test_another_user_sees_none_of_it(
    page: Page, platform: Server, client: LoomClient, work: AdminWork
) -> None:
    """Eve, a plain user, sees no admin job in her table, nothing of the admin's job at its
    address, and no models, factsheets or deployments."""
    eve = client.add_user("eve")["token"]
    sign_in(page, eve)
    expect(page.get_by_role("banner")).to_contain_text("eve · user")
    expect(page.get_by_text("No jobs match.")).to_be_visible()
    expect(page.get_by_role("link", name="digits-admin")).to_have_count(0)
    expect(page.get_by_label("Owner")).to_have_count(0)
    shoot(page, "eve-jobs")

    page.goto(f"/ui/#/jobs/{work.job_id}")
    expect(page.get_by_role("alert")).to_contain_text("not yours")
    expect(page.get_by_role("main")).not_to_contain_text("digits-admin")
    expect(page.get_by_role("log")).to_have_count(0)
    shoot(page, "eve-job-not-found")

    page.goto("/ui/#/models")
    expect(page.get_by_text("No models yet.")).to_be_visible()
    page.goto(f"/ui/#/models/{work.model}")
    expect(page.get_by_role("alert")).to_contain_text(f"There is no model {work.model}")
    page.goto(f"/ui/#/models/{work.model}/versions/1")  # its factsheet
    expect(page.get_by_role("alert")).to_contain_text(f"no model '{work.model}'")
    expect(page.get_by_role("main")).not_to_contain_text("Provenance")
    page.goto("/ui/#/deployments")
    expect(page.get_by_text("No deployments yet.")).to_be_visible()
    page.goto(f"/ui/#/deployments/{work.deployment}")
    expect(page.get_by_role("alert")).to_contain_text(f"There is no deployment {work.deployment}")


def test_every_page_is_accessible(
    open_page: Callable[..., Page], platform: Server, work: AdminWork
) -> None:
    """axe-core finds nothing serious or critical on any page, a confirmation dialog
    included (each page saved as <name>.png)."""
    page = open_page(bypass_csp=True)  # axe-core goes in as an inline script
    found: dict[str, list[str]] = {}

    def check(name: str) -> None:
        shoot(page, name)
        audit(page, name, found)

    page.goto("/ui/")
    expect(page.get_by_label("API token")).to_be_visible()
    check("signin")
    sign_in(page, platform.admin_token)
    expect(page.get_by_role("link", name="digits-admin")).to_be_visible()
    check("jobs")
    open_job(page, work.job_id)
    check("job")
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("dialog", name="Delete this job?")).to_be_visible()
    check("job-delete-dialog")
    page.get_by_role("dialog").get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("dialog")).to_be_hidden()
    page.goto("/ui/#/submit")
    expect(page.get_by_label("Command")).to_be_visible()
    check("submit-form")
    page.get_by_role("radio", name="Upload").check()
    expect(page.get_by_label("Manifest")).to_be_visible()
    check("submit-upload")
    page.goto("/ui/#/models")
    expect(page.get_by_role("link", name=work.model, exact=True)).to_be_visible()
    check("models")
    page.goto(f"/ui/#/models/{work.model}")
    expect(row_of(page, "v1")).to_be_visible()
    check("model")
    row_of(page, "v1").get_by_role("link", name="Factsheet of version 1").click()
    expect(page.get_by_role("heading", name="Provenance")).to_be_visible()
    check("factsheet")
    page.goto("/ui/#/deployments")
    expect(page.get_by_role("link", name=work.deployment)).to_be_visible()
    check("deployments")
    page.goto(f"/ui/#/deployments/{work.deployment}")
    expect(shown_state(page)).to_contain_text(re.compile("|".join(IDLE)))
    check("deployment")
    nothing_serious(found)


def test_pages_fit_a_phone(
    open_page: Callable[..., Page], platform: Server, work: AdminWork
) -> None:
    """At 390×844 the jobs, job, factsheet and deployment pages scroll only up and down, with
    the navigation in view."""
    page = open_page(viewport=PHONE, is_mobile=True, has_touch=True)
    sign_in(page, platform.admin_token)
    expect(page.get_by_role("link", name="digits-admin")).to_be_visible()
    fits_a_phone(page, "jobs-phone")
    open_job(page, work.job_id)
    fits_a_phone(page, "job-phone")
    page.goto(f"/ui/#/models/{work.model}/versions/1")
    expect(page.get_by_role("heading", name="Drift in service")).to_be_visible()
    fits_a_phone(page, "factsheet-phone")
    page.goto(f"/ui/#/deployments/{work.deployment}")
    expect(page.get_by_role("heading", name="Monitoring")).to_be_visible()
    fits_a_phone(page, "deployment-phone")
