"""Pipeline runs as the API sees them: start, find, halt, retry and delete; the driver moves
them on in between."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from loom.domain import spec_checks
from loom.domain.errors import Conflict, InvalidInput, ManifestError, NotFound
from loom.domain.pipeline import PipelineSpec, parse_pipeline
from loom.domain.pipeline_dialects import Lookup, PipelineDialect
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
from loom.store import objects as applied
from loom.store import pipelines as rows
from loom.store.db import Database
from loom.store.secret_keys import SecretKeys
from loom.store.tables import PipelineRun, PipelineTask, User
from loom.tds.service import TrainingData

# A pipeline file may hold a foreign format's many small nodes (KFP's IR: ~60 a step).
MAX_NODES = 50_000


@dataclass(frozen=True)
class Checked:
    """A pipeline as submitted: its Loom spec as a document and parsed, the run's parameters,
    and what a foreign format's translation ignored or approximated (`dialect`: whose)."""

    document: dict[str, Any]
    spec: PipelineSpec
    values: dict[str, Any]
    warnings: tuple[str, ...] = ()
    dialect: str = ""
    schedule: dict[str, Any] = field(default_factory=dict)


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
        dialects: Sequence[PipelineDialect] = (),
    ) -> None:
        self.db = db
        self.dialects = list(dialects)
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
        self, text: bytes | str, parameters: dict[str, Any] | None, owner_id: str = ""
    ) -> Checked:
        """The pipeline (Loom's spec, or a foreign format a dialect translates), its spec and
        the run's parameters, refused with the field named."""
        documents = spec_checks.load_documents(text, "the pipeline", MAX_NODES)
        return self.check_documents(documents, parameters, owner_id)

    def check_documents(
        self,
        documents: list[Any],
        parameters: dict[str, Any] | None,
        owner_id: str = "",
        lookup: Lookup | None = None,
    ) -> Checked:
        """`check`, of documents already read (a foreign API's JSON body); `lookup` finds the
        documents they name (by default, those the owner applied)."""
        dialect = next((d for d in self.dialects if d.recognises(documents)), None)
        if dialect is None:
            if len(documents) != 1 or not isinstance(documents[0], dict):
                got = f"{len(documents)} documents" if len(documents) != 1 else "not a mapping"
                raise ManifestError(f"the pipeline is one YAML mapping, got {got}")
            spec = parse_pipeline(documents[0])
            return Checked(documents[0], spec, spec.with_parameters(parameters))
        lookup = lookup or partial(self.stored, owner_id, dialect.group)
        translated = dialect.translate(documents, parameters, lookup)
        spec = parse_pipeline(translated.document)
        return Checked(
            translated.document,
            spec,
            spec.with_parameters(translated.parameters),
            translated.warnings,
            dialect.name,
            translated.schedule,
        )

    def stored(self, owner_id: str, group: str, kind: str, name: str) -> dict[str, Any] | None:
        """A document the owner applied (an Argo WorkflowTemplate), by its group, kind and
        name."""
        with self.db.session() as session:
            found = applied.find(session, owner_id, group, kind, name)
        return dict(found.document) if found is not None else None

    def start(
        self, owner: User, text: bytes | str, code: bytes | None, parameters: dict[str, Any] | None
    ) -> PipelineRun:
        """A run of the pipeline (its text checked first), with its code and parameters."""
        return self.start_checked(owner, self.check(text, parameters, owner.id), code)

    def start_checked(self, owner: User, checked: Checked, code: bytes | None) -> PipelineRun:
        """A run of a pipeline `check` took."""
        document, spec, values = checked.document, checked.spec, checked.values
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
        keep their outputs. A sub-pipeline's run that did not succeed is retried the same way,
        in place."""
        with self.driver.lock, self.db.session() as session:
            row = session.get_one(PipelineRun, run.id)
            if row.parent_id is not None:
                raise Conflict(f"pipeline run {row.id} is part of run {row.parent_id}; retry that")
            if RunState(row.state) in ACTIVE_RUN:
                raise Conflict(f"pipeline run {row.id} is {row.state}; halt it or let it end")
            if row.finished_at is None:
                raise Conflict(f"pipeline run {row.id} is {row.state}; its steps are stopping")
            again = self._retry_in(session, row)
            if not again:
                raise InvalidInput(f"pipeline run {row.id}: every step succeeded; nothing to retry")
            row.message = f"retried: {', '.join(again)}"
        self.driver.wake()
        return row

    def _retry_in(self, session: Session, row: PipelineRun) -> list[str]:
        """The run's steps that did not succeed set WAITING again (their undone tasks removed,
        a sub-pipeline's run retried in place); the names of those steps."""
        spec = self.records.spec_of(row)
        tasks = rows.tasks_of(session, row.id)
        if any(t.state == StepState.RUNNING for t in tasks):
            raise Conflict(f"pipeline run {row.id} is still stopping its steps; try again")
        steps = dict(row.steps)
        # a step the halt cut short (a fan-out with items never started) is retried too
        again = [
            s.name
            for s in spec.steps
            if s.exit_handler or StepState(steps[s.name]["state"]) not in DONE
        ]
        for name in again:
            step = spec.step(name)
            steps[name] = {"state": StepState.WAITING.value, "message": "retried"}
            for task in tasks:
                if task.step != name or (not step.exit_handler and task.state in DONE):
                    continue
                child = session.get(PipelineRun, task.ref) if step.kind == "pipeline" else None
                if child is not None and self._retry_in(session, child):
                    # followed again; the step opens again and keeps it (see `_expand`)
                    task.state, task.finished_at, task.message = "RUNNING", None, "retried"
                    continue
                if child is not None:
                    self._remove(child)
                session.delete(task)
        row.steps = steps
        row.state = RunState.RUNNING.value
        row.finished_at = None
        return again

    def delete(self, run: PipelineRun) -> None:
        """The run and its jobs, experiments and sub-pipelines' runs; registered models and
        deployments stay."""
        if run.parent_id is not None:
            raise Conflict(f"pipeline run {run.id} is part of run {run.parent_id}; delete that")
        with self.driver.lock:
            self._remove(run)

    def _remove(self, run: PipelineRun) -> None:
        spec = self.records.spec_of(run)
        for task in self.tasks(run.id):
            if not task.ref or task.state == StepState.CACHED:
                continue  # a cached task's job belongs to the run that made it
            kind = spec.step(task.step).kind
            with contextlib.suppress(NotFound):
                if kind == "experiment":
                    self.experiments.delete(self.experiments.find(run.owner_id, task.ref))
                elif kind in ("job", "python", "shell"):
                    self.lifecycle.delete(task.ref)
        with self.db.session() as session:
            children = rows.children(session, run.id)
        for child in children:
            self._remove(child)
        with self.db.session() as session:
            rows.remove(session, run.id)
