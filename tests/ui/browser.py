"""What a test does in the browser: sign in, find things on a page, take a screenshot, ask
axe-core about the page."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Locator, Page, expect

from tests.conftest import ROOT

SHOTS = ROOT / "build" / "ui-screenshots"
AXE = ROOT / "ui" / "node_modules" / "axe-core" / "axe.min.js"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# Training on a 2-core machine: a job may wait its turn before it trains for seconds.
JOB_MS = 240_000
# The navigation every user has; admins have "Users" besides.
NAV = ("Jobs", "Submit", "Runs", "Models", "Deployments", "Experiments", "Pipelines", "Capacity")


def sign_in(page: Page, token: str, at: str = "#/jobs") -> None:
    """Through the sign-in form, as a user would."""
    page.goto(f"/ui/{at}")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def shown_state(page: Page) -> Locator:
    """The line under the heading of a job, a deployment, an experiment or a pipeline run that
    says its state now."""
    return page.get_by_role("status").filter(has_text="State:")


def section(page: Page, title: str) -> Locator:
    """The part of a page under the heading `title`."""
    return page.locator("section").filter(has=page.get_by_role("heading", name=title, exact=True))


def row_of(page: Page, header: str) -> Locator:
    """The table row whose row header is `header`."""
    return page.get_by_role("row").filter(
        has=page.get_by_role("rowheader", name=header, exact=True)
    )


def column(table: Locator, header: str) -> list[str]:
    """The text of each body row's cell under the column header `header`, top to bottom."""
    headers = [text.strip() for text in table.get_by_role("columnheader").all_inner_texts()]
    at = headers.index(header)
    rows = table.locator("tbody tr").all()
    return [row.locator("th, td").nth(at).inner_text().strip() for row in rows]


def fact(where: Locator, term: str) -> Locator:
    """The value beside `term` in a list of facts (a <dt> and its <dd>)."""
    exact = re.compile(f"^{re.escape(term)}$")
    return (
        where.get_by_role("term").filter(has_text=exact).locator("xpath=following-sibling::dd[1]")
    )


def fits_a_phone(page: Page, name: str) -> None:
    """The page scrolls only up and down, with the navigation in view (saved as <name>.png)."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{name}: the page is {width} px wide"
    for link in NAV:
        expect(
            page.get_by_role("banner").get_by_role("link", name=link, exact=True)
        ).to_be_in_viewport()
    shoot(page, name)


def shoot(page: Page, name: str) -> None:
    """The whole page as build/ui-screenshots/<name>.png."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)


def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical findings on the page as it is now: rule, impact, nodes.
    The page's policy forbids inline script, so the page's context must bypass CSP."""
    page.add_script_tag(path=AXE)
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run()).violations
            .filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                          nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5)}))"""
    )
    return [f"{v['id']} ({v['impact']}: {v['help']}) at {v['nodes']}" for v in found]


def audit(page: Page, name: str, found: dict[str, list[str]]) -> None:
    """axe-core's serious and critical findings on the page now, kept as found[name]."""
    found[name] = serious_violations(page)


def nothing_serious(found: dict[str, list[str]]) -> None:
    """Fails with every finding of every page audited, if there is one."""
    problems = {name: rules for name, rules in found.items() if rules}
    assert not problems, "\n".join(
        f"{name}: {rule}" for name, rules in problems.items() for rule in rules
    )
