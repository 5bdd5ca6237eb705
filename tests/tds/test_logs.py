"""Log ingestion is idempotent and queries page like FfDL's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom.domain.errors import InvalidInput
from loom.observability import PlatformMetrics
from loom.store import jobs as job_rows
from loom.store import users as user_rows
from loom.store.db import Database, migrate
from loom.store.tables import Job
from loom.tds.logs import LogQuery, LogService
from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals
from tests.conftest import database_url


def database(tmp_path: Path, url: str | None = None, **job: Any) -> Database:
    """A migrated database (at `url`, else this run's kind) holding one user's job,
    `training-1` unless `job` says otherwise."""
    db = Database(url or database_url(tmp_path))
    migrate(db.engine)
    fields = {"id": "training-1", "state": "QUEUED", "learners": 1, **job}
    with db.session() as session:
        user = user_rows.add_user(session, "ada")
        job_rows.add_job(
            session,
            Job(owner_id=user.id, name="t", manifest="{}", code_digest="x", cpus=1, memory=1,
                gpus=0, submitted_at=0.0, **fields),
        )  # fmt: skip
    return db


@pytest.fixture
def service(tmp_path: Path) -> LogService:
    return LogService(database(tmp_path), JobSignals())


def lines(first: int, last: int) -> list[dict[str, object]]:
    return [{"seq": i, "time": float(i), "text": f"line {i}"} for i in range(first, last + 1)]


def texts(service: LogService, **query: int) -> list[str]:
    return [row.text for row in service.query("training-1", LogQuery(**query))]


def test_resent_lines_are_stored_once(service: LogService) -> None:
    """A batch sent again after an outage, overlapping the last one, adds nothing twice."""
    TrainingData(service.db, service.signals).ingest("training-1", 1, 1, lines(1, 10), [])
    TrainingData(service.db, service.signals).ingest("training-1", 1, 1, lines(5, 15), [])
    assert texts(service, pagesize=100) == [f"line {i}" for i in range(1, 16)]


def test_ingested_lines_are_counted_once(service: LogService) -> None:
    """`loom_ingested_lines_total` counts lines stored, not lines sent: a resend adds only
    what is new."""
    observed = PlatformMetrics()
    tds = TrainingData(service.db, service.signals, platform_metrics=observed)
    tds.ingest("training-1", 1, 1, lines(1, 10), [])
    tds.ingest("training-1", 1, 1, lines(5, 15), [])
    assert observed.registry.get_sample_value("loom_ingested_lines_total") == 15


def test_pages(service: LogService) -> None:
    """pos ≥ 1 starts at that line; negative pos pages back from the end."""
    TrainingData(service.db, service.signals).ingest("training-1", 1, 1, lines(1, 20), [])
    assert texts(service, pos=0, pagesize=2) == ["line 1", "line 2"]
    assert texts(service, pos=19, pagesize=5) == ["line 19", "line 20"]
    assert texts(service, pos=-1, pagesize=2) == ["line 19", "line 20"]
    assert texts(service, pos=-5, pagesize=2) == ["line 15", "line 16"]
    assert texts(service, pos=-30, pagesize=2) == []


def test_page_size_is_bounded() -> None:
    """A page of zero or of more than 10,000 lines is refused."""
    with pytest.raises(InvalidInput):
        LogQuery(pagesize=0)


def test_out_of_range_point_is_refused_or_dropped(tmp_path: Path) -> None:
    """A step beyond 64 bits is a 400 for a user and a dropped point for a learner, whose
    lines are stored all the same."""
    from loom.tds.metrics import point_row
    from loom.tds.service import TrainingData

    db = database(tmp_path)
    huge = {"seq": 1, "time": 1.0, "step": 2**64, "values": {"loss": 1.0}}
    with pytest.raises(InvalidInput):
        point_row("training-1", 1, 1, huge)
    tds = TrainingData(db, JobSignals())
    tds.ingest("training-1", 1, 1, lines(1, 2), [huge])
    assert [r.text for r in tds.logs.query("training-1", LogQuery())] == ["line 1", "line 2"]


def test_pages_after_a_line(service: LogService) -> None:
    """`after` pages by line id: the lines after that one, whatever came before."""
    TrainingData(service.db, service.signals).ingest("training-1", 1, 1, lines(1, 20), [])
    first = service.query("training-1", LogQuery(pagesize=5))
    after = service.query("training-1", LogQuery(pagesize=5, after=first[-1].id))
    assert [row.text for row in after] == [f"line {i}" for i in range(6, 11)]
    with pytest.raises(InvalidInput, match="after"):
        service.query("training-1", LogQuery(pos=3, after=first[-1].id))
