"""Followers on PostgreSQL miss nothing while many learners write at once.

On PostgreSQL, row ids come from a sequence and transactions commit in any order: without the
per-job ingestion lock, a follower reading "after id N" skips a row that took id N-1 but
committed after N. Eight learners write lines and points at once while four followers read."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals
from tests.conftest import postgres_server
from tests.tds.test_logs import database

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

LEARNERS, FOLLOWERS, BATCHES, PER_BATCH = 8, 4, 40, 25
JOB = "training-concurrent"


def learner(tds: TrainingData, n: int) -> None:
    for batch in range(BATCHES):
        first = batch * PER_BATCH + 1
        lines = [
            {"seq": seq, "time": time.time(), "text": f"{n}:{seq}"}
            for seq in range(first, first + PER_BATCH)
        ]
        values = {"loss": 1.0 / (batch + 1)}
        points = [{"seq": batch + 1, "time": time.time(), "group": "train", "values": values}]
        tds.ingest(JOB, 1, n, lines, points)


def follower(tds: TrainingData, seen: list[tuple[int, int]], points: list[int]) -> None:
    """Reads lines and points after its cursors until it has them all (or a minute passes)."""
    line_at = point_at = 0
    deadline = time.monotonic() + 60
    while (len(seen) < LEARNERS * BATCHES * PER_BATCH or len(points) < LEARNERS * BATCHES) and (
        time.monotonic() < deadline
    ):
        for row in tds.logs.after(JOB, line_at, None, 1000):
            seen.append((row.learner_id, row.seq))
            line_at = row.id
        for point in tds.metrics.after(JOB, point_at, None, 1000):
            points.append(point.id)
            point_at = point.id


def test_every_follower_sees_every_line_once_in_each_learners_order(tmp_path: Path) -> None:
    url = postgres_server().create_database()
    db = database(tmp_path, url, id=JOB, state="PROCESSING", learners=LEARNERS)
    tds = TrainingData(db, JobSignals())
    seen: list[list[tuple[int, int]]] = [[] for _ in range(FOLLOWERS)]
    points: list[list[int]] = [[] for _ in range(FOLLOWERS)]
    threads = [
        threading.Thread(target=follower, args=(tds, seen[f], points[f])) for f in range(FOLLOWERS)
    ]
    threads += [threading.Thread(target=learner, args=(tds, n)) for n in range(1, LEARNERS + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    db.close()
    for got, got_points in zip(seen, points, strict=True):
        assert len(got) == len(set(got)) == LEARNERS * BATCHES * PER_BATCH  # each once
        by_learner: dict[int, list[int]] = defaultdict(list)
        for n, seq in got:
            by_learner[n].append(seq)
        for n in range(1, LEARNERS + 1):
            assert by_learner[n] == list(range(1, BATCHES * PER_BATCH + 1))  # in its order
        assert len(got_points) == len(set(got_points)) == LEARNERS * BATCHES
