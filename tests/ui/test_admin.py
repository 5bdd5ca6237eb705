"""The admin's pages in the browser, on a platform of one CPU: capacity and the queue, with a
job that holds the CPU and one that waits for it; users added, given a quota and deleted; and
both pages checked by axe-core."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect

from loom.client import ClientError, LoomClient
from tests.conftest import Server, eventually, make_zip, manifest, wait_for_state
from tests.ui.browser import (
    JOB_MS,
    NAV,
    audit,
    fact,
    nothing_serious,
    row_of,
    section,
    shoot,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.integration]

HOLD = "import time\nwhile True:\n    time.sleep(1)\n"


@pytest.fixture(scope="module")
def platform_settings() -> dict[str, str]:
    return {"LOOM_CPUS": "1"}  # one job of 1 CPU fills the machine


@dataclass
class Busy:
    holder: str
    waiter: str
    reason: str  # why the waiter waits, as the API says it


@pytest.fixture(scope="module")
def busy(platform: Server) -> Iterator[Busy]:
    """A job that holds the platform's one CPU, and one that waits for it."""
    code = make_zip({"hold.py": HOLD})
    with platform.client() as client:
        holder = client.submit(manifest("python hold.py", name="holder", cpus=1), code)
        wait_for_state(client, holder, {"PROCESSING"}, timeout=JOB_MS / 1000)
        waiter = client.submit(manifest("python hold.py", name="waiter", cpus=1), code)
        eventually(lambda: client.job(waiter)["queue_reason"], timeout=30)
        yield Busy(holder, waiter, client.job(waiter)["queue_reason"])
        client.delete(waiter)
        client.delete(holder)


def test_capacity_and_the_queue(
    page: Page, platform: Server, client: LoomClient, busy: Busy
) -> None:
    """The capacity page shows the one CPU in use, in all and on the node, and the job that
    waits in the queue with the reason the API gives."""
    assert busy.reason == "needs 1 CPUs, 0 free", busy.reason
    sign_in(page, platform.admin_token)
    page.get_by_role("banner").get_by_role("link", name="Capacity", exact=True).click()
    expect(page.get_by_role("heading", name="Capacity", level=1)).to_be_visible()

    in_all = section(page, "In all")
    expect(fact(in_all, "CPUs in use")).to_have_text("1 of 1 (100%)")
    expect(fact(in_all, "Jobs queued")).to_have_text("1")
    launcher = client.capacity()["launcher"]
    expect(section(page, "Nodes").get_by_role("region", name="Nodes table")).to_be_visible()
    node = row_of(page, f"This machine ({launcher} launcher)")
    expect(node.get_by_role("cell").nth(1)).to_have_text("1 of 1 (100%)")  # CPUs in use

    queue = section(page, "The queue").get_by_role("region", name="Queue table")
    expect(queue.get_by_role("rowheader")).to_have_text(["waiter"])
    waiting = row_of(page, "waiter")
    expect(waiting.get_by_role("cell").nth(0)).to_have_text("1")  # its place
    expect(waiting.get_by_role("cell").nth(1)).to_have_text(busy.reason)
    waiting.get_by_role("link", name="waiter").click()
    expect(page).to_have_url(re.compile(f"#/jobs/{busy.waiter}$"))
    page.go_back()
    expect(queue).to_be_visible()
    shoot(page, "capacity")


def test_users_admin_page(
    open_page: Callable[..., Page], platform: Server, client: LoomClient
) -> None:
    """An admin adds carol and is shown her token, which works; gives her a quota of 2 CPUs,
    which the table and the API then hold; is told at the field that -1 CPUs is not a quota,
    and where the API refuses a priority; carol has no Users page; deleted, she is gone and
    her token refused."""
    page = open_page()
    sign_in(page, platform.admin_token)
    page.get_by_role("banner").get_by_role("link", name="Users", exact=True).click()
    expect(page.get_by_role("heading", name="Users", level=1)).to_be_visible()
    expect(page.get_by_role("region", name="Users table")).to_be_visible()

    adding = page.get_by_role("form", name="Add a user")
    adding.get_by_label("User name").fill("carol")
    expect(adding.get_by_label("Administrator")).not_to_be_checked()
    adding.get_by_role("button", name="Add user").click()
    shown = page.get_by_role("region", name="carol's token")
    expect(shown).to_contain_text("it will not be shown again")
    expect(shown.get_by_role("button", name="Copy token")).to_be_visible()
    token = shown.get_by_role("code").inner_text().strip()
    with platform.client(token) as carol:
        assert carol.me()["name"] == "carol"
    expect(row_of(page, "carol").get_by_role("cell").nth(1)).to_have_text("user")  # role
    shoot(page, "users-token")
    shown.get_by_role("button", name="Done").click()
    expect(shown).to_be_hidden()

    quota = page.get_by_role("form", name="Quota of carol")
    cpus = quota.get_by_label("CPUs", exact=True)
    cpus.fill("2")
    quota.get_by_role("button", name="Save quota").click()
    expect(quota.get_by_role("status")).to_have_text("Saved.")
    assert quota_of(client, "carol")["cpus"] == 2
    page.reload()
    expect(cpus).to_have_value("2")
    expect(quota.get_by_label("GPUs", exact=True)).to_have_value("")
    shoot(page, "users")

    cpus.fill("-1")
    quota.get_by_role("button", name="Save quota").click()
    expect(cpus).to_have_attribute("aria-invalid", "true")
    expect(cpus).to_have_accessible_description(re.compile("More than 0"))
    expect(quota.get_by_role("status")).to_have_count(0)
    assert quota_of(client, "carol")["cpus"] == 2
    shoot(page, "users-quota-error")
    # a whole number, so the form sends it; past the API's bound, so the API refuses it
    cpus.fill("2")
    priority = quota.get_by_label("Highest priority", exact=True)
    priority.fill("2000000")
    quota.get_by_role("button", name="Save quota").click()
    expect(priority).to_have_attribute("aria-invalid", "true")
    expect(priority).to_have_accessible_description(re.compile("1000000"))
    expect(cpus).not_to_have_attribute("aria-invalid", "true")
    assert quota_of(client, "carol")["max_priority"] is None

    as_carol = open_page()
    sign_in(as_carol, token)
    banner = as_carol.get_by_role("banner")
    expect(banner).to_contain_text("carol · user")
    for name in NAV:
        expect(banner.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(banner.get_by_role("link", name="Users")).to_have_count(0)
    as_carol.goto("/ui/#/users")
    expect(as_carol.get_by_role("alert")).to_have_text("Only admins can see users.")
    expect(as_carol.get_by_role("region", name="Users table")).to_have_count(0)
    shoot(as_carol, "users-not-admin")

    page.get_by_role("button", name="Delete carol").click()
    dialog = page.get_by_role("dialog", name="Delete carol?")
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog).to_be_hidden()
    expect(row_of(page, "carol")).to_have_count(0)
    assert "carol" not in [user["name"] for user in client.users()]
    with platform.client(token) as carol, pytest.raises(ClientError, match="401"):
        carol.me()


def quota_of(client: LoomClient, name: str) -> dict[str, object]:
    [user] = [user for user in client.users() if user["name"] == name]
    return dict(user["quota"])


def test_admin_pages_are_accessible(
    open_page: Callable[..., Page], platform: Server, client: LoomClient, busy: Busy
) -> None:
    """axe-core finds nothing serious or critical on the capacity page with a job queued, or
    on the users page with a new token shown, a quota refused at its field, and the delete
    dialog open."""
    page = open_page(bypass_csp=True)  # axe-core goes in as an inline script
    found: dict[str, list[str]] = {}
    sign_in(page, platform.admin_token, "#/capacity")
    expect(row_of(page, "waiter")).to_contain_text(busy.reason)
    audit(page, "capacity", found)

    page.goto("/ui/#/users")
    page.get_by_label("User name").fill("dave")
    page.get_by_role("button", name="Add user").click()
    expect(page.get_by_role("region", name="dave's token")).to_be_visible()
    audit(page, "users-token", found)
    quota = page.get_by_role("form", name="Quota of dave")
    quota.get_by_label("Jobs", exact=True).fill("1.5")
    quota.get_by_role("button", name="Save quota").click()
    expect(quota.get_by_label("Jobs", exact=True)).to_have_attribute("aria-invalid", "true")
    audit(page, "users-quota-error", found)
    page.get_by_role("button", name="Delete dave").click()
    dialog = page.get_by_role("dialog", name="Delete dave?")
    expect(dialog).to_be_visible()
    audit(page, "users-delete-dialog", found)
    shoot(page, "users-delete-dialog")
    dialog.get_by_role("button", name="Confirm").click()
    expect(row_of(page, "dave")).to_have_count(0)
    nothing_serious(found)
