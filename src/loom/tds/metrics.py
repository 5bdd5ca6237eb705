"""Evaluation metrics: idempotent batched ingestion, FfDL-style pages, and series for charts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from loom.domain.errors import InvalidInput
from loom.domain.runs import MAX_KEY, Metric, metric_key, ms
from loom.store import metrics as metric_rows
from loom.store.db import Database
from loom.store.logs import Row
from loom.store.runs import Latest, newest
from loom.store.tables import MetricPoint
from loom.tds import series as series_rules
from loom.tds.logs import page_window
from loom.tds.signals import JobSignals

MAX_NAMES = 200
INT64 = 2**63


@dataclass(frozen=True)
class MetricQuery:
    """Paging as for log lines (`pos`, `pagesize`, `since`), plus group, name and learner."""

    pos: int = 0
    pagesize: int = 100
    since: float | None = None
    group: str | None = None
    name: str | None = None
    learner: int | None = None
    after: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.pagesize <= 10_000:
            raise InvalidInput(f"pagesize must be between 1 and 10000, got {self.pagesize}")

    @property
    def filters(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "name": self.name,
            "learner_id": self.learner,
            "since": self.since,
        }


_NUMBERS = (int, float)


def _number(value: Any) -> float | None:
    """A metric value as a float; NaN and infinities (not JSON) are kept as null."""
    if type(value) is float:  # the common case, first and cheap
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, _NUMBERS):
        raise InvalidInput(f"metric values must be numbers, got {value!r}")
    number = float(value)
    return number if math.isfinite(number) else None


def point_row(
    job_id: str, attempt: int, learner: int, point: dict[str, Any], run_id: str | None = None
) -> Row:
    """A table row (`POINT_COLUMNS` order) for one point as learners send it (of the job's own
    run, or of `run_id`, a run its code started); raises `InvalidInput` if malformed. Built in
    one pass: this runs for every point ingested."""
    values = point.get("values")
    if type(values) is not dict or not values or len(values) > MAX_NAMES:
        raise InvalidInput(f"a metric point needs 1 to {MAX_NAMES} named values, got {values!r}")
    try:
        step = point.get("step")
        etimes = point.get("etimes")
        if all(type(v) is float and v - v == 0.0 for v in values.values()):
            clean = values  # finite floats, the common case: nothing to convert
        else:
            clean = {k: _number(v) for k, v in values.items()}
        seq = int(point["seq"])
        step = int(step) if step is not None else None
        if not 0 <= seq < INT64 or (step is not None and not -INT64 <= step < INT64):
            raise InvalidInput(f"seq and step must be 64-bit integers, got {seq}, {step}")
        return (
            job_id,
            attempt,
            learner,
            seq,
            float(point["time"]),
            str(point.get("group") or "default")[:100],
            step,
            orjson.dumps(etimes).decode() if type(etimes) is dict and etimes else None,
            orjson.dumps(clean).decode(),
            run_id,
        )
    except (KeyError, TypeError, ValueError, OverflowError, orjson.JSONEncodeError) as exc:
        raise InvalidInput(f"a metric point needs a `seq`, a `time` and numbers: {exc}") from exc


def point_json(row: MetricPoint) -> dict[str, Any]:
    return {
        "id": row.id,
        "learner": row.learner_id,
        "attempt": row.attempt,
        "seq": row.seq,
        "time": row.time,
        "group": row.group,
        "step": row.step,
        "etimes": row.etimes or {},
        "values": row.values,
    }


def emetrics_json(row: MetricPoint, job_id: str, rindex: int) -> dict[str, Any]:
    """FfDL's EMetrics shape: typed string values, times in epoch milliseconds."""
    etimes = dict(row.etimes or {})
    if row.step is not None and not etimes:
        etimes = {"step": row.step}
    return {
        "meta": {"training_id": job_id, "time": int(row.time * 1000), "rindex": rindex},
        "grouplabel": row.group,
        "etimes": {k: _typed(v) for k, v in etimes.items()},
        "values": {k: _typed(v) for k, v in row.values.items()},
    }


def _typed(value: Any) -> dict[str, str]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {"type": "INT", "value": str(value)}
    if isinstance(value, float):
        return {"type": "FLOAT", "value": repr(value)}
    return {"type": "STRING", "value": "" if value is None else str(value)}


class MetricService:
    def __init__(self, db: Database, signals: JobSignals) -> None:
        self.db = db
        self.signals = signals

    def rows(
        self,
        job_id: str,
        attempt: int,
        learner: int,
        points: Sequence[dict[str, Any]],
        *,
        strict: bool = True,
        run_id: str | None = None,
    ) -> list[Row]:
        """Table rows for points; a malformed point is an error, or skipped if not `strict`
        (a learner's batch also carries log lines, which must not be lost over one point)."""
        if strict:
            return [point_row(job_id, attempt, learner, p, run_id) for p in points]
        rows = []
        for point in points:
            try:
                rows.append(point_row(job_id, attempt, learner, point))
            except InvalidInput:
                continue
        return rows

    def query(self, job_id: str, query: MetricQuery) -> list[MetricPoint]:
        window = page_window(query.pos, query.pagesize, query.after)
        with self.db.session() as session:
            return metric_rows.read_points(session, job_id, **window, **query.filters)

    def series(
        self, job_id: str, query: MetricQuery, budget: int = series_rules.DEFAULT_BUDGET
    ) -> dict[str, Any]:
        """`{"series": {group: {name: {"steps": [...], "values": [...]}}}, …}`: each line exact
        in arrival order up to `budget` points, else reduced to that many (`tds.series`);
        filter by `learner` to chart one learner of a gang. Memory stays within the budget,
        whatever the job's size."""
        filters = query.filters
        with self.db.session() as session:
            span = metric_rows.x_range(session, job_id, **filters)
            reducer = series_rules.SeriesReducer(span, budget, name=query.name)
            for group, x, values in metric_rows.stream_points(session, job_id, **filters):
                reducer.add(group, x, values)
        return reducer.result()

    def final(self, job_id: str) -> dict[str, float]:
        """The last value of every metric, as `{"group/name": value}`: a model's scorecard
        (read in chunks; at most `tds.series.MAX_LINES` metrics)."""
        latest: dict[str, float] = {}
        with self.db.session() as session:
            for group, _x, values in metric_rows.stream_points(session, job_id):
                for name, value in values.items():
                    key = f"{group}/{name}"
                    fits = key in latest or len(latest) < series_rules.MAX_LINES
                    if fits and isinstance(value, int | float) and not isinstance(value, bool):
                        latest[key] = value
        return latest

    def last_id(self, job_id: str) -> int:
        with self.db.session() as session:
            return metric_rows.last_id(session, job_id)

    def after(
        self, job_id: str, after_id: int, learner: int | None, limit: int
    ) -> list[MetricPoint]:
        with self.db.session() as session:
            return metric_rows.read_points(
                session, job_id, limit=limit, after_id=after_id, learner_id=learner
            )


def latest_of_rows(job_id: str, rows: Sequence[Row]) -> Latest:
    """Each run's newest value of each metric among these point rows (`POINT_COLUMNS` order),
    by MLflow's keys: a point of the job's own run counts for the job's run."""
    found: list[tuple[str, Metric]] = []
    for row in rows:
        seq, at, group, step, values, run_id = row[3], row[4], row[5], row[6], row[8], row[9]
        stamp, step = ms(at), step if step is not None else seq
        for name, value in orjson.loads(values).items():
            key = metric_key(group, name)
            if len(key) <= MAX_KEY:
                found.append(
                    (
                        run_id or job_id,
                        Metric(key, math.nan if value is None else value, stamp, step),
                    )
                )
    return newest(found)
