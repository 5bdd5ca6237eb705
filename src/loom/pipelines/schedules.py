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
from functools import partial
from typing import TYPE_CHECKING, Any

from loom.domain.cron import next_time, parse_cron
from loom.domain.errors import Conflict, InvalidInput, NotFound
from loom.domain.pipeline import STEP_NAME, parse_pipeline
from loom.pipelines import triggers as trigger_rules
from loom.pipelines.driver import PipelineDriver
from loom.pipelines.records import RunRecords, redact
from loom.pipelines.triggers import Triggers
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
        self,
        db: Database,
        artifacts: ArtifactStore,
        records: RunRecords,
        driver: PipelineDriver,
        triggers: Triggers | None = None,
    ) -> None:
        self.db = db
        self.triggers = triggers
        self.host_roots: list[str] = []  # where a data trigger may watch a host folder
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
        trigger: dict[str, Any] | None = None,
    ) -> PipelineSchedule:
        """`checked`: the pipeline as `Pipelines.check` gives it."""
        if not STEP_NAME.fullmatch(name):
            raise InvalidInput(
                f"name: a letter, then letters, digits, - and _; got {name!r}", field="name"
            )
        if cron or trigger is None:
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
            next_at=next_time(cron, now) if enabled and cron else None,
            last_run_id="",
            runs=0,
            created_at=now,
        )
        if trigger is not None:
            self._arm(row, trigger)
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
            row.next_at = next_time(row.cron, time.time()) if enabled and row.cron else None
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
        started += self._fire_triggers(now)
        for name, run_id in started:
            log.info("schedule %s started pipeline run %s", name, run_id)
        if started:
            self.driver.wake()

    def _arm(self, row: PipelineSchedule, trigger: dict[str, Any]) -> None:
        """The schedule's trigger, checked, and what it counts as already seen."""
        if self.triggers is None:
            raise InvalidInput("schedule.trigger: this platform has no triggers")
        connection = trigger_rules.connection_of(trigger)
        row.trigger = trigger_rules.checked(trigger, self.host_roots)
        row.trigger_state = self.triggers.initial_state(row.trigger, connection)
        if connection:
            sealed = self.records.seal(f"trigger:{row.id}", {"connection": connection})
            row.trigger_state["sealed"] = sealed

    def _fire_triggers(self, now: float) -> list[tuple[str, str]]:
        """A run of each schedule whose trigger saw its event since the last pass."""
        if self.triggers is None:
            return []
        started = []
        with self.db.session() as session:
            for schedule in trigger_rules.triggered(session):
                try:
                    reason = self.triggers.due(schedule, now, partial(self._secret, schedule))
                    if reason is None:
                        continue
                    run = self._run_of(schedule)
                except Exception:  # one trigger's trouble (a store down) is not every one's
                    log.exception("schedule %s: its trigger could not be checked", schedule.name)
                    continue
                session.add(run)
                schedule.last_run_id, schedule.last_run_at = run.id, now
                schedule.runs += 1
                schedule.trigger_state = {**(schedule.trigger_state or {}), "reason": reason}
                started.append((schedule.name, run.id))
        return started

    def _secret(self, schedule: PipelineSchedule) -> dict[str, Any]:
        sealed = (schedule.trigger_state or {}).get("sealed")
        opened = self.records.open(sealed, f"trigger:{schedule.id}")
        return dict(opened.get("connection") or {})

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
