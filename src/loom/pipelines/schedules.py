"""Recurring runs: a schedule keeps its own copy of a pipeline's spec (credentials sealed
apart), code and parameters, and starts a run at each time its cron expression names (UTC).

The leader's driver calls `fire` on every pass. A run and its schedule's next time are stored in
one transaction, so a crash starts a due run once, never twice; a platform that was down when
times passed starts one run when it is back, not one per missed time.
"""

from __future__ import annotations

import io
import logging
import time
import zipfile
from typing import TYPE_CHECKING

from loom.domain.cron import next_time, parse_cron
from loom.domain.errors import Conflict, InvalidInput, NotFound
from loom.domain.pipeline import STEP_NAME, parse_pipeline
from loom.pipelines.driver import PipelineDriver
from loom.pipelines.records import RunRecords, redact
from loom.storage.artifacts import ArtifactStore
from loom.store import pipelines as rows
from loom.store.db import Database
from loom.store.tables import PipelineRun, PipelineSchedule, User

if TYPE_CHECKING:
    from loom.pipelines.service import Checked

log = logging.getLogger("loom.pipelines")


def empty_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w"):
        pass
    return out.getvalue()


class Schedules:
    def __init__(
        self, db: Database, artifacts: ArtifactStore, records: RunRecords, driver: PipelineDriver
    ) -> None:
        self.db = db
        self.artifacts = artifacts
        self.records = records
        self.driver = driver
        driver.before_pass = self.fire

    def create(
        self,
        owner: User,
        name: str,
        cron: str,
        checked: Checked,
        code: bytes | None,
        enabled: bool = True,
    ) -> PipelineSchedule:
        """`checked`: the pipeline as `Pipelines.check` gives it."""
        if not STEP_NAME.fullmatch(name):
            raise InvalidInput(
                f"name: a letter, then letters, digits, - and _; got {name!r}", field="name"
            )
        parse_cron(cron)
        document, spec, values = checked.document, checked.spec, checked.values
        redacted, credentials = redact(document)
        schedule_id = rows.new_schedule_id()
        now = time.time()
        row = PipelineSchedule(
            id=schedule_id,
            owner_id=owner.id,
            name=name,
            pipeline=spec.name,
            spec=redacted,
            sealed=self.records.seal(f"schedule:{schedule_id}", credentials),
            parameters=values,
            code_digest=self.artifacts.put(code if code is not None else empty_zip()),
            cron=cron,
            enabled=enabled,
            next_at=next_time(cron, now) if enabled else None,
            last_run_id="",
            runs=0,
            created_at=now,
        )
        with self.db.session() as session:
            if rows.schedule(session, owner.id, name) is not None:
                raise Conflict(f"name: you already have a schedule {name!r}; delete it first")
            session.add(row)
        return row

    def listing(self, owner_id: str | None) -> list[PipelineSchedule]:
        with self.db.session() as session:
            return rows.schedules(session, owner_id)

    def find(self, owner_id: str, ref: str) -> PipelineSchedule:
        with self.db.session() as session:
            found = rows.schedule(session, owner_id, ref)
        if found is None:
            raise NotFound(f"no pipeline schedule {ref!r}")
        return found

    def enable(self, schedule: PipelineSchedule, enabled: bool) -> PipelineSchedule:
        with self.db.session() as session:
            row = session.get_one(PipelineSchedule, schedule.id)
            row.enabled = enabled
            row.next_at = next_time(row.cron, time.time()) if enabled else None
        return row

    def delete(self, schedule: PipelineSchedule) -> None:
        """The schedule; the runs it started stay."""
        with self.db.session() as session:
            row = session.get(PipelineSchedule, schedule.id)
            if row is not None:
                session.delete(row)

    def fire(self) -> None:
        """Start a run of every schedule whose time has come."""
        now = time.time()
        started = []
        with self.db.session() as session:
            for schedule in rows.due(session, now):
                try:
                    run = self._run_of(schedule)
                except Exception:  # one schedule's trouble (a lost key) is not every one's
                    log.exception("schedule %s could not start its run", schedule.name)
                    schedule.next_at = next_time(schedule.cron, now)
                    continue
                session.add(run)
                schedule.last_run_id, schedule.last_run_at = run.id, now
                schedule.runs += 1
                schedule.next_at = next_time(schedule.cron, now)
                started.append((schedule.name, run.id))
        for name, run_id in started:
            log.info("schedule %s started pipeline run %s", name, run_id)
        if started:
            self.driver.wake()

    def _run_of(self, schedule: PipelineSchedule) -> PipelineRun:
        spec = parse_pipeline(schedule.spec)
        credentials = self.records.open(schedule.sealed, f"schedule:{schedule.id}")
        return self.records.new_run(
            schedule.owner_id,
            spec,
            schedule.spec,
            credentials,
            dict(schedule.parameters),
            schedule.code_digest,
            schedule=schedule.name,
        )
