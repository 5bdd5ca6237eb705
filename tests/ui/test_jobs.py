"""Jobs in the browser: submitted from the form and by upload, watched as they train, their
metrics charted and compared, a bad field pointed at, halted and resumed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from loom.client import LoomClient
from tests.conftest import Server, make_zip, manifest, wait_for_state
from tests.ui.browser import JOB_MS, row_of, section, shoot, shown_state, sign_in
from tests.ui.digits import FOLDER, digits_code, digits_manifest, run_digits

pytestmark = [pytest.mark.browser, pytest.mark.integration]

RUNNING = re.compile(r"QUEUED|PENDING|DOWNLOADING|PROCESSING")
# Counts its runs in its checkpoint folder, which a resumed job keeps.
FOREVER = """import itertools, os, pathlib, time
mark = pathlib.Path(os.environ["CHECKPOINT_DIR"]) / "runs"
run = int(mark.read_text()) + 1 if mark.exists() else 1
mark.write_text(str(run))
for i in itertools.count():
    print(f"run {run} line {i}", flush=True)
    time.sleep(0.5)
"""


def job_id_of(page: Page) -> str:
    """The id in a job page's address (#/jobs/<id>)."""
    expect(page).to_have_url(re.compile(r"#/jobs/[^/]+$"))
    return page.url.rsplit("/", 1)[1]


def test_submit_digits_from_the_form(page: Page, platform: Server, client: LoomClient) -> None:
    """A job filled in on the form, with its code as a folder, opens its page, which shows its
    log lines while it trains, then COMPLETED and a chart of each group of its metrics."""
    sign_in(page, platform.admin_token, "#/submit")
    expect(page.get_by_role("heading", name="Submit a job", level=1)).to_be_visible()
    page.get_by_role("radio", name="Form").check()
    page.get_by_label("Name", exact=True).fill("digits-form")
    page.get_by_label("Framework").select_option("pytorch")
    page.get_by_label("Command").fill("python train.py --epochs 10")
    page.get_by_label("Learners").fill("1")
    page.get_by_label("CPUs").fill("1")
    page.get_by_label("GPUs").fill("0")
    page.get_by_label("Memory").fill("1GiB")
    page.get_by_label("Code (folder)").set_input_files(FOLDER)
    expect(page.get_by_text("Sending the folder digits-pytorch")).to_be_visible()
    shoot(page, "submit-filled")
    page.get_by_role("button", name="Submit").click()

    job_id = job_id_of(page)
    expect(page.get_by_role("heading", name="digits-form", level=1)).to_be_visible()
    log = page.get_by_role("log")
    expect(log).to_contain_text("epoch 1/10", timeout=JOB_MS)
    # 9 epochs of half a second each are still to come: the line came while it trained
    expect(shown_state(page)).to_contain_text(RUNNING, timeout=1000)
    shoot(page, "job-running")
    expect(shown_state(page)).to_contain_text("COMPLETED", timeout=JOB_MS)
    expect(log).to_contain_text("test accuracy:")

    metrics = client.metrics(job_id)["metrics"]
    assert {(m["group"], *m["values"]) for m in metrics} == {
        ("train", "loss"),
        ("test", "accuracy"),
    }
    charts = page.locator("[data-testid=metric-chart]")
    expect(charts).to_have_count(2)
    for group, name in (("test", "accuracy"), ("train", "loss")):
        chart = page.get_by_role("img", name=f"Chart of the {group} metrics: digits-form · {name}.")
        expect(chart.locator("canvas").first).to_be_visible()
        page.get_by_text(f"Latest {group} values").click()
        row = row_of(page, f"digits-form · {name}")
        expect(row.get_by_role("cell")).to_have_text(["10", re.compile(r"\d"), "10"])
    with page.expect_download() as download:
        page.get_by_role("link", name="Download logs").click()
    assert "test accuracy:" in Path(download.value.path()).read_text()
    shoot(page, "job-completed")


def test_submit_by_upload(page: Page, platform: Server, tmp_path: Path) -> None:
    """A manifest file and a code zip, uploaded, make a job; its page opens, and the jobs
    table, left open, follows it to COMPLETED by itself."""
    (tmp_path / "manifest.yml").write_text(digits_manifest("digits-upload", epochs=10))
    (tmp_path / "code.zip").write_bytes(digits_code())
    sign_in(page, platform.admin_token, "#/submit")
    page.get_by_role("radio", name="Upload").check()
    page.get_by_label("Manifest").set_input_files(tmp_path / "manifest.yml")
    page.get_by_label("Code (zip)").set_input_files(tmp_path / "code.zip")
    shoot(page, "submit-upload-filled")
    page.get_by_role("button", name="Submit").click()

    job_id = job_id_of(page)
    expect(page.get_by_role("heading", name="digits-upload", level=1)).to_be_visible()
    page.get_by_role("banner").get_by_role("link", name="Jobs", exact=True).click()
    page.evaluate("window.stillThisPage = true")
    link = page.get_by_role("link", name="digits-upload", exact=True)
    row = page.get_by_role("row").filter(has=link)
    expect(row).to_contain_text(RUNNING)
    shoot(page, "jobs-running")
    expect(row).to_contain_text("COMPLETED", timeout=JOB_MS)
    assert page.evaluate("window.stillThisPage"), "the page was loaded again"
    link.click()
    expect(page).to_have_url(re.compile(f"#/jobs/{job_id}$"))
    expect(shown_state(page)).to_contain_text("COMPLETED")
    expect(page.get_by_role("log")).to_contain_text("epoch 10/10")
    shoot(page, "job-uploaded")


def test_a_bad_manifest_error_is_shown_at_its_field(page: Page, platform: Server) -> None:
    """The server's complaint about a field is shown beside that field, which is marked invalid
    and described by it; a second mistake moves the mark to the next field."""
    sign_in(page, platform.admin_token, "#/submit")
    page.get_by_label("Name", exact=True).fill("bad-learners")
    page.get_by_label("Command").fill("python -c pass")
    page.get_by_label("Learners").fill("0")
    page.get_by_label("Code (folder)").set_input_files(FOLDER)
    page.get_by_role("button", name="Submit").click()

    learners = page.get_by_label("Learners")
    expect(learners).to_have_attribute("aria-invalid", "true")
    expect(learners).to_have_accessible_description(re.compile(r"learners.*got 0"))
    expect(page.get_by_text(re.compile(r"field `learners`.*got 0"))).to_be_visible()
    expect(page.get_by_label("Memory")).not_to_have_attribute("aria-invalid", "true")
    expect(page).to_have_url(re.compile(r"#/submit$"))
    shoot(page, "submit-error")

    learners.fill("1")
    page.get_by_label("Memory").fill("lots")
    page.get_by_role("button", name="Submit").click()
    memory = page.get_by_label("Memory")
    expect(memory).to_have_attribute("aria-invalid", "true")
    expect(memory).to_have_accessible_description(re.compile(r"memory.*got 'lots'"))
    expect(learners).not_to_have_attribute("aria-invalid", "true")


def test_compare_two_runs(page: Page, platform: Server, client: LoomClient) -> None:
    """Another job added to the comparison draws its curves beside this job's: each chart's
    series (its legend, and its description) name both jobs."""
    first = run_digits(client, "digits-lr-a", learning_rate=0.01)
    second = run_digits(client, "digits-lr-b", learning_rate=0.001)
    sign_in(page, platform.admin_token, f"#/jobs/{first}")
    expect(page.get_by_role("img", name=re.compile("digits-lr-a · accuracy"))).to_be_visible()
    page.get_by_label("Compare with job").fill(second)
    page.get_by_role("button", name="Add", exact=True).click()

    expect(page.get_by_role("list", name="Jobs compared")).to_contain_text("digits-lr-b")
    for group, name in (("test", "accuracy"), ("train", "loss")):
        both = f"Chart of the {group} metrics: digits-lr-a · {name}, digits-lr-b · {name}."
        expect(page.get_by_role("img", name=both)).to_be_visible()
    shoot(page, "job-compared")


def test_halt_and_resume(page: Page, platform: Server, client: LoomClient) -> None:
    """Halt, once confirmed, stops a running job (HALTED shown, Resume offered); Resume, once
    confirmed, runs it again, its new lines following in the log."""
    code = make_zip({"forever.py": FOREVER})
    job_id = client.submit(manifest("python forever.py", name="forever"), code)
    wait_for_state(client, job_id, {"PROCESSING"}, timeout=JOB_MS / 1000)
    try:
        sign_in(page, platform.admin_token, f"#/jobs/{job_id}")
        expect(shown_state(page)).to_contain_text("PROCESSING")
        expect(page.get_by_role("log")).to_contain_text("run 1 line 1", timeout=JOB_MS)
        page.get_by_role("button", name="Halt", exact=True).click()
        dialog = page.get_by_role("dialog", name="Halt this job?")
        expect(dialog).to_be_visible()
        shoot(page, "job-halt-dialog")
        dialog.get_by_role("button", name="Confirm").click()
        expect(dialog).to_be_hidden()
        expect(shown_state(page)).to_contain_text("HALTED", timeout=JOB_MS)
        assert client.job(job_id)["state"] == "HALTED"
        expect(section(page, "Timeline")).to_contain_text("HALTED")
        expect(page.get_by_role("button", name="Halt", exact=True)).to_have_count(0)
        shoot(page, "job-halted")

        page.get_by_role("button", name="Resume", exact=True).click()
        page.get_by_role("dialog", name="Resume this job?").get_by_role(
            "button", name="Confirm"
        ).click()
        expect(shown_state(page)).to_contain_text(RUNNING, timeout=JOB_MS)
        expect(page.get_by_role("button", name="Halt", exact=True)).to_be_visible()
        expect(page.get_by_role("log")).to_contain_text("run 2 line 1", timeout=JOB_MS)
        shoot(page, "job-resumed")
    finally:
        client.delete(job_id)
