"""What the CLI prints for people: ids, states and dates whole at 80 columns, and no colour
codes into a pipe or a file (unit tests of the renderings, no platform)."""

from __future__ import annotations

import pytest
from rich.console import Console

from loom.cli import experiments, jobs

JOB: dict[str, str | None] = {
    "id": "training-0123456789",
    "name": "a-rather-long-training-job-name-that-does-not-fit",
    "owner": "alice@example.com",
    "state": "PROCESSING",
    "submitted_at": "2026-11-26T13:33:44.123456+00:00",
    "queue_reason": None,
    "status_message": "running the command, with a long status message to wrap",
}


def rendered(table: object, width: int = 80) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    return console.export_text()


def test_the_jobs_table_keeps_ids_states_and_dates_whole_at_80_columns() -> None:
    """Nothing a user copies or reads at a glance is cut to `…` on a narrow terminal."""
    text = rendered(jobs._jobs_table({"jobs": [JOB]}, wide=False))
    assert str(JOB["id"]) in text and "PROCESSING" in text and "2026-11-26 13:33" in text
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_jobs_history_and_learners_keep_their_states_and_times_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`loom show` at 80 columns: each state and time of the history is whole."""
    job = {
        **JOB,
        "error_code": None,
        "lineage": None,
        "history": [
            {"state": "DOWNLOADING", "at": "2026-11-26T13:33:45.000001+00:00", "message": "x" * 90}
        ],
        "learner_status": [
            {"learner": 1, "attempt": 1, "state": "DOWNLOADING", "exit_code": None, "message": ""}
        ],
    }
    with monkeypatch.context() as patched:
        console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        patched.setattr(jobs, "console", console)
        jobs._show_job(job, wide=False)
    text = console.export_text()
    assert "2026-11-26T13:33:45.000001+00:00" in text and "DOWNLOADING" in text, text


def test_experiments_show_writes_no_colour_codes_into_a_pipe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The objective chart is plain text when standard output is not a terminal."""
    found = {
        "name": "search",
        "state": "Succeeded",
        "objective": {"type": "minimize", "objectiveMetricName": "loss"},
        "algorithm": "random",
        "trial_list": [
            {"number": n, "state": "Succeeded", "parameters": {"lr": "0.1"}, "objective": 1 / n,
             "job_id": f"job-{n}", "duration_s": 1.0}
            for n in (1, 2, 3)
        ],
    }  # fmt: skip
    experiments._show(found)
    out = capsys.readouterr().out
    assert "loss over trials" in out
    assert "\x1b[" not in out
