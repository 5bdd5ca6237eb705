"""Past a job's cap on lines or points the TDS stores no more, says so once, and still answers."""

from __future__ import annotations

from pathlib import Path

from loom.store import logs as log_rows
from loom.store import metrics as metric_rows
from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals
from tests.tds.test_logs import database, lines


def points(first: int, last: int) -> list[dict[str, object]]:
    return [{"seq": i, "time": 1.0, "values": {"loss": 1.0 / i}} for i in range(first, last + 1)]


def stored(tds: TrainingData) -> list[tuple[int, int, str]]:
    with tds.db.session() as session:
        rows = log_rows.read_lines(session, "training-1", limit=1000)
    return [(row.learner_id, row.seq, row.text) for row in rows]


def test_lines_past_the_cap_are_dropped_with_one_notice(tmp_path: Path) -> None:
    """With a cap of 5, a job keeps its first 5 lines and one notice naming the cap."""
    tds = TrainingData(database(tmp_path), JobSignals(), max_lines=5)
    tds.ingest("training-1", 1, 1, lines(1, 3), [])
    tds.ingest("training-1", 1, 1, lines(4, 8), [])
    tds.ingest("training-1", 1, 2, lines(1, 4), [])
    found = stored(tds)
    assert [text for _l, _s, text in found[:5]] == [f"line {i}" for i in range(1, 6)]
    assert len(found) == 6
    assert found[5][0] == 0
    assert "the log of this job was cut at 5 lines" in found[5][2]
    assert "LOOM_MAX_LOG_LINES" in found[5][2]


def test_resent_lines_do_not_use_up_the_cap(tmp_path: Path) -> None:
    """A batch sent twice counts once: duplicates skipped by the store give back their room."""
    tds = TrainingData(database(tmp_path), JobSignals(), max_lines=6)
    tds.ingest("training-1", 1, 1, lines(1, 3), [])
    tds.ingest("training-1", 1, 1, lines(1, 3), [])
    tds.ingest("training-1", 1, 1, lines(4, 6), [])
    assert [text for _l, _s, text in stored(tds)] == [f"line {i}" for i in range(1, 7)]


def test_the_cap_is_counted_from_the_store_after_a_restart(tmp_path: Path) -> None:
    """A new process counts what the job already holds before it stores more."""
    db = database(tmp_path)
    TrainingData(db, JobSignals(), max_lines=4).ingest("training-1", 1, 1, lines(1, 3), [])
    TrainingData(db, JobSignals(), max_lines=4).ingest("training-1", 1, 1, lines(4, 9), [])
    assert [seq for learner, seq, _t in stored(TrainingData(db, JobSignals())) if learner] == [
        1, 2, 3, 4
    ]  # fmt: skip


def test_points_past_the_cap_are_dropped_with_a_notice_line(tmp_path: Path) -> None:
    """Metric points have their own cap, and the log says where they were cut."""
    tds = TrainingData(database(tmp_path), JobSignals(), max_points=3)
    tds.ingest("training-1", 1, 1, lines(1, 2), points(1, 5))
    with tds.db.session() as session:
        assert metric_rows.count_points(session, "training-1") == 3
    texts = [text for _l, _s, text in stored(tds)]
    assert texts[:2] == ["line 1", "line 2"]
    assert "the metrics of this job were cut at 3 points" in texts[2]


def test_no_cap_stores_everything(tmp_path: Path) -> None:
    """Without caps (None) every line is stored and no notice is added."""
    tds = TrainingData(database(tmp_path), JobSignals())
    tds.ingest("training-1", 1, 1, lines(1, 50), [])
    assert len(stored(tds)) == 50
