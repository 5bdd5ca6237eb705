"""Log lines: idempotent batched ingestion and FfDL-style paged queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loom.domain.errors import InvalidInput
from loom.store import logs as log_rows
from loom.store.db import Database
from loom.store.logs import Row
from loom.store.tables import LogLine
from loom.tds.signals import JobSignals

MAX_TEXT = 64 * 1024


def page_window(pos: int, pagesize: int, after: int | None = None) -> dict[str, Any]:
    """FfDL's `pos` as an offset: from the start for pos ≥ 0 (1-based), from the end when
    negative (-1: the last page; -N: the page that ends N-1 records earlier). `after` (a record
    id) is keyset paging instead: the page after that record, as fast deep into a long log as
    at its start."""
    if after is not None:
        if pos != 0:
            raise InvalidInput(f"after: cannot be combined with pos ({pos}); use one or the other")
        return {"after_id": after, "offset": 0, "limit": pagesize, "from_end": False}
    if pos < 0:
        return {"offset": -pos - 1, "limit": pagesize, "from_end": True}
    return {"offset": max(pos - 1, 0), "limit": pagesize, "from_end": False}


@dataclass(frozen=True)
class LogQuery:
    """FfDL's paging: `pos` ≥ 1 is the 1-based line to start at (0 = the first), a negative
    `pos` counts back from the end (-1: the last page); `since` keeps lines at or after a time;
    `after` pages by line id instead of `pos` (see `page_window`)."""

    pos: int = 0
    pagesize: int = 100
    since: float | None = None
    learner: int | None = None
    after: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.pagesize <= 10_000:
            raise InvalidInput(f"pagesize must be between 1 and 10000, got {self.pagesize}")


def line_json(row: LogLine) -> dict[str, Any]:
    return {
        "id": row.id,
        "learner": row.learner_id,
        "attempt": row.attempt,
        "seq": row.seq,
        "time": row.time,
        "stream": row.stream,
        "line": row.text,
    }


class LogService:
    def __init__(self, db: Database, signals: JobSignals) -> None:
        self.db = db
        self.signals = signals

    def rows(
        self, job_id: str, attempt: int, learner: int, lines: Sequence[dict[str, Any]]
    ) -> list[Row]:
        """Table rows (`LINE_COLUMNS` order) for a learner's lines, as it sends and spools them."""
        return [
            (
                job_id,
                attempt,
                learner,
                int(line["seq"]),
                float(line["time"]),
                str(line.get("stream", "stdout"))[:8],
                # PostgreSQL's text cannot hold NUL; a learner may print one.
                str(line.get("text", ""))[:MAX_TEXT].replace("\x00", "\ufffd"),
            )
            for line in lines
        ]

    def query(self, job_id: str, query: LogQuery) -> list[LogLine]:
        window = page_window(query.pos, query.pagesize, query.after)
        with self.db.session() as session:
            return log_rows.read_lines(
                session, job_id, learner_id=query.learner, since=query.since, **window
            )

    def last_id(self, job_id: str) -> int:
        """The id of the newest stored line of a job (0 if none): where a follower starts."""
        with self.db.session() as session:
            return log_rows.last_id(session, job_id)

    def after(self, job_id: str, after_id: int, learner: int | None, limit: int) -> list[LogLine]:
        """Lines stored after the given line id: what a follower has not seen yet."""
        with self.db.session() as session:
            return log_rows.read_lines(
                session, job_id, after_id=after_id, limit=limit, learner_id=learner
            )
