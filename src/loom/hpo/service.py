"""Experiments as the API sees them: create, find, halt, resume and delete; the driver moves
them on in between."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from loom.domain.errors import Conflict, InvalidInput, NotFound
from loom.domain.experiments import (
    ACTIVE_EXPERIMENT,
    ENDED_EXPERIMENT,
    MAX_TRIALS,
    ExperimentPhase,
    TrialPhase,
)
from loom.domain.katib import ExperimentSpec, load_document, parse_experiment
from loom.hpo import algorithms
from loom.hpo.driver import ExperimentDriver
from loom.hpo.records import ExperimentRecords, redact
from loom.lifecycle.manager import LifecycleManager
from loom.registry.models import ModelRegistry
from loom.settings import Settings
from loom.storage.artifacts import ArtifactStore
from loom.store import experiments as rows
from loom.store.db import Database
from loom.store.secret_keys import SecretKeys
from loom.store.tables import Experiment, Trial, User
from loom.tds.service import TrainingData


class Experiments:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        keys: SecretKeys,
        artifacts: ArtifactStore,
        lifecycle: LifecycleManager,
        tds: TrainingData,
        registry: ModelRegistry,
    ) -> None:
        self.db = db
        self.artifacts = artifacts
        self.lifecycle = lifecycle
        self.records = ExperimentRecords(db, keys, artifacts, lifecycle)
        self.driver = ExperimentDriver(
            db, self.records, lifecycle, tds, registry, settings.experiment_interval_s
        )

    def check(self, text: bytes | str) -> tuple[dict[str, Any], ExperimentSpec]:
        """The document and its spec, refused with the field named if anything is wrong."""
        document = load_document(text)
        spec = parse_experiment(document)
        algorithms.check(spec)
        return document, spec

    def create(self, owner: User, text: bytes | str, code: bytes) -> Experiment:
        document, spec = self.check(text)
        with self.db.session() as session:
            if rows.by_name(session, owner.id, spec.name) is not None:
                raise Conflict(
                    f"name: you already have an experiment {spec.name!r}; delete it or choose "
                    "another name"
                )
        digest = self.artifacts.put(code)
        experiment_id = rows.new_experiment_id()
        redacted, credentials = redact(document)
        experiment = Experiment(
            id=experiment_id,
            owner_id=owner.id,
            name=spec.name,
            spec=redacted,
            sealed=self.records.seal(experiment_id, credentials),
            code_digest=digest,
            state=ExperimentPhase.CREATED.value,
            reason="",
            message="waiting for its first trials",
            max_trial_count=spec.max_trial_count,
            sampler_state={},
            best_model="",
            created_at=time.time(),
        )
        with self.db.session() as session:
            if rows.by_name(session, owner.id, spec.name) is not None:
                raise Conflict(f"name: you already have an experiment {spec.name!r}")
            session.add(experiment)
        self.driver.wake()
        return experiment

    def listing(self, owner_id: str | None) -> list[Experiment]:
        with self.db.session() as session:
            return rows.listing(session, owner_id)

    def find(self, owner_id: str, ref: str) -> Experiment:
        """One of the owner's experiments, by name or id."""
        with self.db.session() as session:
            found = rows.by_name(session, owner_id, ref) or rows.get(session, ref)
        if found is None or found.owner_id != owner_id:
            raise NotFound(f"no experiment {ref!r}")
        return found

    def trials(self, experiment_id: str) -> list[Trial]:
        with self.db.session() as session:
            return rows.trials_of(session, experiment_id)

    def halt(self, experiment: Experiment) -> Experiment:
        """No new trial; the running ones are halted, to resume with the experiment."""
        with self.driver.lock, self.db.session() as session:
            row = session.get_one(Experiment, experiment.id)
            if ExperimentPhase(row.state) not in ACTIVE_EXPERIMENT:
                raise Conflict(f"experiment {row.name} is {row.state}; only a running one halts")
            row.state = ExperimentPhase.HALTED.value
            row.message = "halted by request"
        self.driver.wake()
        return row

    def resume(self, experiment: Experiment, max_trial_count: int | None = None) -> Experiment:
        """A halted experiment goes on where it was; an ended one, if its `resumePolicy` lets
        it, with more trials (`max_trial_count`)."""
        spec = self.records.spec_of(experiment)
        with self.driver.lock:
            with self.db.session() as session:
                row = session.get_one(Experiment, experiment.id)
                _check_resume(row, spec, max_trial_count)
                if max_trial_count is not None:
                    row.max_trial_count = max_trial_count
                row.state = ExperimentPhase.RUNNING.value
                row.reason = ""
                row.message = "resumed by request"
                row.finished_at = None
                held = [
                    t.job_id
                    for t in rows.trials_of(session, row.id)
                    if TrialPhase(t.state) in (TrialPhase.CREATED, TrialPhase.RUNNING)
                ]
            for job_id in held:
                # not halted (still queued or running), or gone
                with contextlib.suppress(Conflict, NotFound):
                    self.lifecycle.resume(job_id)
        self.driver.wake()
        return row

    def delete(self, experiment: Experiment) -> None:
        """The experiment, its trials and their jobs; the models they registered stay."""
        with self.driver.lock:
            for trial in self.trials(experiment.id):
                with contextlib.suppress(NotFound):
                    self.lifecycle.delete(trial.job_id)
            with self.db.session() as session:
                rows.remove(session, experiment.id)


def _check_resume(row: Experiment, spec: ExperimentSpec, max_trial_count: int | None) -> None:
    phase = ExperimentPhase(row.state)
    if max_trial_count is not None and max_trial_count < 1:
        raise InvalidInput(f"max_trial_count: must be at least 1, got {max_trial_count}")
    if phase in ACTIVE_EXPERIMENT:
        raise Conflict(f"experiment {row.name} is {row.state}; it is not halted or ended")
    if phase not in ENDED_EXPERIMENT:
        return
    if spec.resume_policy == "Never":
        raise Conflict(
            f"experiment {row.name} has ended and its resumePolicy is Never; set "
            "resumePolicy: LongRunning to be able to resume it"
        )
    if row.reason == MAX_TRIALS and (max_trial_count or 0) <= (row.max_trial_count or 0):
        raise InvalidInput(
            f"max_trial_count: experiment {row.name} ran its {row.max_trial_count} trials; "
            "give a larger max_trial_count to resume it"
        )
