"""Pipeline runs as the API sees them: start, find, halt, retry and delete; the driver moves
them on in between."""

from __future__ import annotations

import contextlib
from typing import Any

from loom.domain.errors import Conflict, InvalidInput, NotFound
from loom.domain.pipeline import PipelineSpec, load_pipeline, parse_pipeline
from loom.domain.pipeline_states import ACTIVE_RUN, DONE, RunState, StepState
from loom.hpo.service import Experiments
from loom.lifecycle.manager import LifecycleManager
from loom.pipelines.driver import PipelineDriver
from loom.pipelines.records import RunRecords, redact
from loom.pipelines.schedules import Schedules, empty_zip
from loom.pipelines.steps import StepKinds
from loom.pipelines.triggers import Triggers
from loom.registry.models import ModelRegistry
from loom.serving.deployments import Deployments
from loom.settings import Settings
from loom.storage.artifacts import ArtifactStore
from loom.store import pipelines as rows
from loom.store.db import Database
from loom.store.secret_keys import SecretKeys
from loom.store.tables import PipelineRun, PipelineTask, User
from loom.tds.service import TrainingData


class Pipelines:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        keys: SecretKeys,
        artifacts: ArtifactStore,
        lifecycle: LifecycleManager,
        tds: TrainingData,
        registry: ModelRegistry,
        deployments: Deployments,
        experiments: Experiments,
    ) -> None:
        self.db = db
        self.artifacts = artifacts
        self.lifecycle = lifecycle
        self.experiments = experiments
        self.records = RunRecords(keys)
        kinds = StepKinds(settings, lifecycle, artifacts, tds, registry, deployments, experiments)
        self.driver = PipelineDriver(db, self.records, kinds, settings.pipeline_interval_s)
        triggers = Triggers(deployments.drift)
        self.schedules = Schedules(db, artifacts, self.records, self.driver, triggers)
        self.schedules.host_roots = list(settings.host_mount_roots)

    def check(
        self, text: bytes | str, parameters: dict[str, Any] | None
    ) -> tuple[dict[str, Any], PipelineSpec, dict[str, Any]]:
        """The document, its spec and the run's parameters, refused with the field named."""
        document = load_pipeline(text)
        spec = parse_pipeline(document)
        return document, spec, spec.with_parameters(parameters)

    def start(
        self, owner: User, text: bytes | str, code: bytes | None, parameters: dict[str, Any] | None
    ) -> PipelineRun:
        document, spec, values = self.check(text, parameters)
        digest = self.artifacts.put(code if code is not None else empty_zip())
        redacted, credentials = redact(document)
        run = self.records.new_run(owner.id, spec, redacted, credentials, values, digest)
        with self.db.session() as session:
            session.add(run)
        self.driver.wake()
        return run

    def listing(self, owner_id: str | None, pipeline: str | None = None) -> list[PipelineRun]:
        with self.db.session() as session:
            return rows.listing(session, owner_id, pipeline)

    def find(self, owner_id: str, run_id: str) -> PipelineRun:
        with self.db.session() as session:
            found = rows.get(session, run_id)
        if found is None or found.owner_id != owner_id:
            raise NotFound(f"no pipeline run {run_id!r}")
        return found

    def tasks(self, run_id: str) -> list[PipelineTask]:
        with self.db.session() as session:
            return rows.tasks_of(session, run_id)

    def spec_of(self, run: PipelineRun) -> PipelineSpec:
        return self.records.spec_of(run)

    def halt(self, run: PipelineRun) -> PipelineRun:
        """Nothing new starts; the running steps' jobs and experiments are halted."""
        with self.driver.lock, self.db.session() as session:
            row = session.get_one(PipelineRun, run.id)
            if RunState(row.state) not in ACTIVE_RUN:
                raise Conflict(f"pipeline run {row.id} is {row.state}; only a running one halts")
            row.state = RunState.HALTED.value
            row.message = "halted by request"
        self.driver.wake()
        return row

    def retry(self, run: PipelineRun) -> PipelineRun:
        """Every step that did not succeed again (failed, halted, skipped, or cut short by the
        halt; a fan-out's done items kept), and the exit handler; the steps that succeeded
        keep their outputs."""
        spec = self.records.spec_of(run)
        with self.driver.lock, self.db.session() as session:
            row = session.get_one(PipelineRun, run.id)
            if RunState(row.state) in ACTIVE_RUN:
                raise Conflict(f"pipeline run {row.id} is {row.state}; halt it or let it end")
            if any(t.state == StepState.RUNNING for t in rows.tasks_of(session, row.id)):
                raise Conflict(f"pipeline run {row.id} is still stopping its steps; try again")
            steps = dict(row.steps)
            # a step the halt cut short (a fan-out with items never started) is retried too
            again = [
                s.name
                for s in spec.steps
                if s.exit_handler or StepState(steps[s.name]["state"]) not in DONE
            ]
            if not again:
                raise InvalidInput(f"pipeline run {row.id}: every step succeeded; nothing to retry")
            for name in again:
                steps[name] = {"state": StepState.WAITING.value, "message": "retried"}
                for task in rows.tasks_of(session, row.id):
                    exit_done = spec.step(name).exit_handler
                    if task.step == name and (exit_done or StepState(task.state) not in DONE):
                        session.delete(task)
            row.steps = steps
            row.state = RunState.RUNNING.value
            row.message = f"retried: {', '.join(again)}"
            row.finished_at = None
        self.driver.wake()
        return row

    def delete(self, run: PipelineRun) -> None:
        """The run and its jobs and experiments; registered models and deployments stay."""
        spec = self.records.spec_of(run)
        with self.driver.lock:
            for task in self.tasks(run.id):
                if not task.ref or task.state == StepState.CACHED:
                    continue  # a cached task's job belongs to the run that made it
                with contextlib.suppress(NotFound):
                    if spec.step(task.step).kind == "experiment":
                        self.experiments.delete(self.experiments.find(run.owner_id, task.ref))
                    elif spec.step(task.step).kind in ("job", "python", "shell"):
                        self.lifecycle.delete(task.ref)
            with self.db.session() as session:
                rows.remove(session, run.id)
