"""Runs in the browser: the runs table with chosen params and metrics columns, sorted by a
header and filtered with MLflow's grammar; the comparison of runs (params side by side, the
differing ones marked, a chart per metric with a line per run, two runs of one name apart); a
job's page with what its code logged; axe on each."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import Server
from tests.dialects.mlflow.logged import logged
from tests.ui.browser import audit, column, nothing_serious, row_of, shoot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def runs_user(platform: Server, request: pytest.FixtureRequest) -> tuple[str, dict[str, str]]:
    with platform.client() as admin:
        token = admin.add_user(f"runs-{request.node.name[:20]}")["token"]
    return token, logged(platform, token)


def test_the_runs_table(
    page: Page, platform: Server, runs_user: tuple[str, dict[str, str]]
) -> None:
    """Chosen columns show each run's params and metrics; a header orders by its column; a
    filter in MLflow's grammar narrows the runs, and a bad one says why."""
    token, _made = runs_user
    sign_in(page, token, at="#/runs")
    table = page.get_by_role("table", name="Runs, with the params and metrics chosen as columns")
    expect(table.locator("tbody tr")).to_have_count(3)
    page.get_by_text("Columns (").click()
    for name in ("lr", "loss"):  # shown by default, with seed
        expect(page.get_by_role("checkbox", name=name, exact=True)).to_be_checked()
    page.get_by_role("checkbox", name="seed", exact=True).uncheck()
    expect(table.get_by_role("columnheader", name="params.seed")).to_have_count(0)
    table.get_by_role("button", name="metrics.loss").click()  # ascending, runs without it last
    expect(table.get_by_role("columnheader", name=re.compile("metrics.loss"))).to_have_attribute(
        "aria-sort", "ascending"
    )
    expect(table.locator("tbody tr").first).to_contain_text("0.25")
    assert column(table, "metrics.loss") == ["0.25", "0.4", "—"]
    shoot(page, "runs-table")

    page.get_by_label("Filter").fill("params.lr = '0.2'")
    page.get_by_role("button", name="Search").click()
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table.locator("tbody tr")).to_contain_text("twin")
    page.get_by_label("Filter").fill("metrics.loss <")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("alert")).to_contain_text("filter")


def test_comparing_runs(
    page: Page, platform: Server, runs_user: tuple[str, dict[str, str]]
) -> None:
    """Three runs chosen in the table open side by side: lr differs and is marked, seed is the
    same; the loss chart has a line for each twin, told apart by their ids."""
    token, made = runs_user
    sign_in(page, token, at="#/runs")
    compare = page.get_by_role("button", name=re.compile("^Compare"))
    expect(compare).to_be_disabled()
    for key in ("twin-0.1", "twin-0.2", "solo-0.1"):
        page.get_by_role("checkbox", name=re.compile(made[key])).check()
    compare.click()
    expect(page).to_have_url(re.compile("#/compare/"))
    expect(page.get_by_role("heading", name="Comparing 3 runs")).to_be_visible()
    expect(row_of(page, "lr differs")).to_be_visible()
    expect(row_of(page, "seed")).to_contain_text("7")
    page.get_by_label("Only those that differ").check()
    expect(row_of(page, "seed")).to_have_count(0)
    twins = [f"twin ({made[key][:8]})" for key in ("twin-0.1", "twin-0.2")]
    chart = page.get_by_role("img", name=re.compile("Chart of loss"))
    expect(chart).to_have_attribute(
        "aria-label", re.compile(f"{re.escape(twins[0])}, {re.escape(twins[1])}")
    )
    expect(page.get_by_test_id("metric-chart").locator("canvas")).to_have_count(1)
    shoot(page, "runs-compare")


def test_the_run_pages_are_accessible(
    open_page: Callable[..., Page], platform: Server, runs_user: tuple[str, dict[str, str]]
) -> None:
    """axe-core finds nothing serious on the runs table, a run's page and the comparison."""
    token, made = runs_user
    page = open_page(bypass_csp=True)
    found: dict[str, list[str]] = {}
    sign_in(page, token, at="#/runs")
    expect(page.get_by_role("table", name=re.compile("^Runs"))).to_be_visible()
    audit(page, "runs", found)
    page.goto(f"/ui/#/runs/{made['twin-0.1']}")
    expect(page.get_by_role("heading", name="twin", level=1)).to_be_visible()
    expect(page.get_by_test_id("metric-chart")).to_be_visible()
    audit(page, "run", found)
    page.goto(f"/ui/#/compare/{made['twin-0.1']},{made['solo-0.1']}")
    expect(page.get_by_role("heading", name="Comparing 2 runs")).to_be_visible()
    audit(page, "compare", found)
    nothing_serious(found)
