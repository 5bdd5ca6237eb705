"""A job's budgets in bytes as well as rows, its parameters and tags, and a user's rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom.domain.errors import TooManyRequests
from loom.store import run_info as info_rows
from loom.tds.budgets import Allowance, Limits, UserRate
from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals
from tests.tds.test_caps import stored
from tests.tds.test_logs import database


def text_lines(count: int, size: int) -> list[dict[str, object]]:
    return [{"seq": i, "time": 1.0, "text": "x" * size} for i in range(1, count + 1)]


def test_lines_past_the_bytes_budget_are_cut_with_one_notice(tmp_path: Path) -> None:
    """With 1 KiB of text a job keeps the lines that fit (rows to spare) and one notice that
    names the setting in MiB."""
    limits = Limits(lines=Allowance(rows=100, bytes=1024))
    tds = TrainingData(database(tmp_path), JobSignals(), limits=limits)
    tds.ingest("training-1", 1, 1, text_lines(30, 100), [])
    found = stored(tds)
    assert [len(text) for _l, _s, text in found[:10]] == [100] * 10
    assert len(found) == 11 and "LOOM_MAX_LOG_MB" in found[10][2]


def test_parameters_past_the_budget_are_refused_but_a_known_tag_still_changes(
    tmp_path: Path,
) -> None:
    """A job's parameters stop at its budget (said once); a tag it has already keeps taking
    new values, which make no new row."""
    limits = Limits(run_info=Allowance(rows=3, bytes=10_000))
    tds = TrainingData(database(tmp_path), JobSignals(), limits=limits)
    entries = [("tag", "stage", "one", 1.0)] + [("param", f"p{i}", "v", 1.0) for i in range(5)]
    with tds.db.session() as session:
        assert tds.record_run_info(session, "training-1", entries) == 3
        assert tds.record_run_info(session, "training-1", [("tag", "stage", "two", 2.0)]) == 0
    with tds.db.session() as session:
        found = info_rows.read(session, "training-1")
    assert found["tags"] == {"stage": "two"} and list(found["params"]) == ["p0", "p1"]
    notices = [text for _l, _s, text in stored(tds) if "parameters and tags" in text]
    assert len(notices) == 1 and "LOOM_MAX_RUN_INFO" in notices[0]


def test_a_user_past_the_ingest_rate_waits_and_others_do_not() -> None:
    """Bytes a second per user: a burst passes, more is refused with a Retry-After, the same
    user is let through once the bucket refills, and another user is never held up."""
    now = [0.0]
    rate = UserRate(rate=1000.0, burst=2000.0, clock=lambda: now[0])
    rate.charge("u1", "alice", 2000)
    with pytest.raises(TooManyRequests) as refused:
        rate.charge("u1", "alice", 500)
    assert refused.value.retry_after == pytest.approx(0.5)
    assert "LOOM_INGEST_MB_PER_S" in refused.value.message
    rate.charge("u2", "bob", 2000)
    now[0] = 0.6
    rate.charge("u1", "alice", 500)
