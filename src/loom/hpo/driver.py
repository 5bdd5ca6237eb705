"""The experiments' driver: one thread, on the leading server, that moves every experiment on.

Each pass, per experiment: trials follow their jobs; running trials are judged on their live
metrics (early stopping); the experiment ends by Katib's rules, or new trials are proposed up
to `parallelTrialCount` and submitted as jobs of the experiment's owner. A trial's job id is
stored before the job is: after a crash the pass submits it if it is missing, and never twice.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from loom.domain.errors import Conflict, InvalidInput, LoomError, NotFound, TooManyRequests
from loom.domain.experiments import (
    ACTIVE_TRIAL,
    ENDED_EXPERIMENT,
    ExperimentPhase,
    Outcome,
    TrialPhase,
    best,
    outcome,
    room,
)
from loom.domain.katib import ExperimentSpec
from loom.domain.states import RUNNING_STATES, JobState
from loom.hpo import observations
from loom.hpo.records import ExperimentRecords
from loom.hpo.study import Past, Search
from loom.lifecycle.manager import LifecycleManager
from loom.lifecycle.ticker import RowDriver
from loom.registry.models import ModelRegistry
from loom.store import experiments as rows
from loom.store import jobs as job_rows
from loom.store.db import Database
from loom.store.tables import Experiment, Job, Trial
from loom.tds.service import TrainingData

log = logging.getLogger("loom.hpo")
BEST_ALIAS = "best"


@dataclass
class View:
    """One experiment as read at the start of a step, detached from its session."""

    experiment: Experiment
    spec: ExperimentSpec
    trials: list[Trial]
    jobs: dict[str, Job]

    @property
    def phases(self) -> list[TrialPhase]:
        return [TrialPhase(t.state) for t in self.trials]

    def active(self) -> list[Trial]:
        return [t for t in self.trials if TrialPhase(t.state) in ACTIVE_TRIAL]


class ExperimentDriver(RowDriver):
    def __init__(
        self,
        db: Database,
        records: ExperimentRecords,
        lifecycle: LifecycleManager,
        tds: TrainingData,
        registry: ModelRegistry,
        interval_s: float,
    ) -> None:
        super().__init__("experiments", db, interval_s, log)
        self.records = records
        self.lifecycle = lifecycle
        self.tds = tds
        self.registry = registry
        self.interval_s = interval_s

    def pending(self, session: Session) -> list[str]:
        return rows.to_drive(session)

    # -- one experiment ----------------------------------------------------------------------
    def view(self, experiment_id: str) -> View | None:
        with self.db.session() as session:
            experiment = rows.get(session, experiment_id)
            if experiment is None:
                return None
            trials = rows.trials_of(session, experiment_id)
            jobs = {}
            for trial in trials:  # an ended trial's job is not looked at again
                if TrialPhase(trial.state) not in ACTIVE_TRIAL:
                    continue
                job = job_rows.get_job(session, trial.job_id)
                if job is not None:
                    jobs[job.id] = job
        return View(experiment, self.records.spec_of(experiment), trials, jobs)

    def advance(self, experiment_id: str) -> None:
        view = self.view(experiment_id)
        if view is None:
            return
        if self._follow(view):
            view = self.view(experiment_id)
            assert view is not None
        phase = ExperimentPhase(view.experiment.state)
        if phase == ExperimentPhase.HALTED:
            self._halt_jobs(view, [t for t in view.active() if t.submitted_at is not None])
            return
        if phase in ENDED_EXPERIMENT:
            self._halt_jobs(view, view.active())
            return
        search = self._search(view)
        self._early_stop(view, search)
        ended = self._outcome(view, search)
        if ended is not None:
            self._end(view, ended)
            return
        self._propose(view, search)
        self._submit(experiment_id)

    # -- trials follow their jobs ------------------------------------------------------------
    def _follow(self, view: View) -> bool:
        """Store each active trial's new phase from its job's state; whether any changed."""
        changed = False
        halted = view.experiment.state == ExperimentPhase.HALTED.value
        for trial in view.active():
            update = self._phase_of(view, trial, halted)
            if update is None:
                continue
            phase, message, extra = update
            with self.db.session() as session:
                row = session.get_one(Trial, trial.id)
                if row.state != trial.state:
                    continue
                row.state = phase.value
                row.message = message
                for key, value in extra.items():
                    setattr(row, key, value)
                if phase not in ACTIVE_TRIAL:
                    row.finished_at = time.time()
            changed = True
        return changed

    def _phase_of(
        self, view: View, trial: Trial, halted: bool
    ) -> tuple[TrialPhase, str, dict[str, Any]] | None:
        job = view.jobs.get(trial.job_id)
        if job is None:
            if trial.submitted_at is None:
                return None  # not submitted yet: `_submit` does it
            return TrialPhase.KILLED, f"its job {trial.job_id} was deleted", {}
        state = JobState(job.state)
        if state == JobState.QUEUED:
            return (TrialPhase.CREATED, "", {}) if trial.state != TrialPhase.CREATED else None
        if state in RUNNING_STATES:
            return (TrialPhase.RUNNING, "", {}) if trial.state != TrialPhase.RUNNING else None
        if state == JobState.COMPLETED:
            objective, metrics, curve = observations.final(self.tds, view.spec, job.id)
            extra = {"objective": objective, "metrics": metrics, "intermediate": curve}
            if objective is None:
                why = f"its job completed without reporting {view.spec.objective.metric}"
                return TrialPhase.METRICS_UNAVAILABLE, why, extra
            return TrialPhase.SUCCEEDED, "", extra
        if state == JobState.FAILED:
            return TrialPhase.FAILED, job.status_message, {}
        # HALTED: stopped early, held with its halted experiment, or killed
        if trial.stop_reason:
            curve = observations.series(self.tds, job.id, view.spec.objective.metric)
            return TrialPhase.EARLY_STOPPED, trial.stop_reason, {"intermediate": curve}
        if halted:
            return None  # resumes with the experiment
        return TrialPhase.KILLED, trial.message or "its job was halted", {}

    # -- early stopping ----------------------------------------------------------------------
    def _search(self, view: View) -> Search:
        past = []
        for trial in view.trials:
            curve = list(trial.intermediate or [])
            if TrialPhase(trial.state) == TrialPhase.RUNNING and trial.job_id in view.jobs:
                curve = observations.series(self.tds, trial.job_id, view.spec.objective.metric)
                trial.intermediate = curve
            state = trial.sampler_state or {}
            past.append(
                Past(
                    number=trial.number,
                    phase=TrialPhase(trial.state),
                    sampled=state.get("sampled", {}),
                    attrs=state.get("attrs", {}),
                    objective=trial.objective,
                    intermediate=observations.intermediate(curve),
                )
            )
        return Search(view.spec, view.experiment.sampler_state or {}, past)

    def _early_stop(self, view: View, search: Search) -> None:
        name = view.spec.algorithm.name
        if view.spec.early_stopping is not None:
            name = view.spec.early_stopping.name
        for trial in view.active():
            job = view.jobs.get(trial.job_id)
            if trial.stop_reason or job is None or job.state != JobState.PROCESSING.value:
                continue
            stop, attrs = search.should_stop(trial.number)
            reason = ""
            if stop:
                curve = [v for v in trial.intermediate if v is not None]
                reason = (
                    f"stopped early by {name}: {view.spec.objective.metric} was {curve[-1]:g} "
                    f"after {len(curve)} reports, worse than the other trials at that point"
                )
            with self.db.session() as session:  # what changed: new reports, a rung, a stop
                row = session.get_one(Trial, trial.id)
                if row.intermediate != trial.intermediate:
                    row.intermediate = trial.intermediate
                if (row.sampler_state or {}).get("attrs") != attrs:
                    row.sampler_state = {**(row.sampler_state or {}), "attrs": attrs}
                if stop:
                    row.stop_reason = reason
            if stop:
                log.info("experiment %s: trial %s %s", view.experiment.name, trial.number, reason)
                self._halt_job(trial.job_id)

    # -- ending ------------------------------------------------------------------------------
    def _outcome(self, view: View, search: Search) -> Outcome | None:
        scored = [
            (t.number, t.objective)
            for t in view.trials
            if t.state == TrialPhase.SUCCEEDED.value and t.objective is not None
        ]
        found = best(view.spec, [(n, v) for n, v in scored if v is not None])
        return outcome(
            view.spec,
            view.experiment.max_trial_count,
            view.phases,
            found[1] if found else None,
            search.exhausted(),
        )

    def _end(self, view: View, ended: Outcome) -> None:
        """Record the outcome, stop what still runs, and name the best trial's model."""
        scored = [
            (t.number, t.objective)
            for t in view.trials
            if t.state == TrialPhase.SUCCEEDED.value and t.objective is not None
        ]
        found = best(view.spec, [(n, v) for n, v in scored if v is not None])
        best_model, note = self._alias_best(view, found[0] if found else None)
        with self.db.session() as session:
            experiment = session.get_one(Experiment, view.experiment.id)
            experiment.state = ended.phase.value
            experiment.reason = ended.reason
            experiment.message = ended.message + note
            experiment.finished_at = time.time()
            experiment.best_trial = found[0] if found else None
            experiment.best_model = best_model
            for trial in view.active():
                row = session.get_one(Trial, trial.id)
                row.message = f"halted: the experiment ended ({ended.reason})"
                if row.submitted_at is None:
                    row.state = TrialPhase.KILLED.value
                    row.finished_at = time.time()
        log.info("experiment %s ended: %s", view.experiment.name, ended.message + note)
        self._halt_jobs(view, view.active())

    def _alias_best(self, view: View, number: int | None) -> tuple[str, str]:
        if number is None:
            return "", "; no trial succeeded, so no model is named best"
        trial = next(t for t in view.trials if t.number == number)
        found = self.registry.of_job(trial.job_id)
        if found is None:
            return "", f"; the best trial ({number}) saved no model (RESULT_DIR/model)"
        name, version = found
        owner = view.experiment.owner_id
        self.registry.set_alias(owner, name, BEST_ALIAS, str(version.version))
        return f"{name}@{version.version}", (
            f"; the best trial ({number}) is model {name} version {version.version}, "
            f"now {name}@{BEST_ALIAS}"
        )

    def _halt_jobs(self, view: View, trials: list[Trial]) -> None:
        for trial in trials:
            job = view.jobs.get(trial.job_id)
            if job is not None and not job.halt_requested and job.state != JobState.HALTED.value:
                self._halt_job(trial.job_id)

    def _halt_job(self, job_id: str) -> None:
        with contextlib.suppress(Conflict, NotFound):  # it ended, or was deleted, meanwhile
            self.lifecycle.halt(job_id)

    # -- new trials --------------------------------------------------------------------------
    def _propose(self, view: View, search: Search) -> None:
        wanted = room(view.spec, view.experiment.max_trial_count, view.phases)
        proposals = []
        for _ in range(wanted):
            if search.exhausted():
                break
            proposal = search.propose()
            if proposal is None:  # the algorithm waits for running trials
                break
            proposals.append(proposal)
        if not proposals and view.experiment.state == ExperimentPhase.RUNNING.value:
            return
        with self.db.session() as session:
            experiment = session.get_one(Experiment, view.experiment.id)
            experiment.state = ExperimentPhase.RUNNING.value
            experiment.sampler_state = search.study_attrs
            number = len(view.trials)
            for proposal in proposals:
                session.add(
                    Trial(
                        experiment_id=experiment.id,
                        number=number,
                        job_id=job_rows.new_job_id(),
                        state=TrialPhase.CREATED.value,
                        parameters=proposal.parameters,
                        sampler_state={"sampled": proposal.sampled, "attrs": proposal.attrs},
                        objective=None,
                        metrics={},
                        intermediate=[],
                        stop_reason="",
                        message="",
                        created_at=time.time(),
                    )
                )
                number += 1

    def _submit(self, experiment_id: str) -> None:
        """Submit the trials whose jobs are not stored yet (new ones, or after a crash)."""
        view = self.view(experiment_id)
        if view is None:
            return
        for trial in view.trials:
            if trial.submitted_at is not None or trial.state != TrialPhase.CREATED.value:
                continue
            message, failed = "", False
            try:
                self.records.submit_trial(view.experiment, view.spec, trial)
            except TooManyRequests as exc:  # the owner's queue is full: again next pass
                message = f"waiting to be submitted: {exc.message}"
            except (InvalidInput, LoomError) as exc:
                message, failed = f"its job was refused: {exc.message}", True
            with self.db.session() as session:
                row = session.get_one(Trial, trial.id)
                row.message = message
                if failed:
                    row.state = TrialPhase.FAILED.value
                    row.finished_at = time.time()
                elif not message:
                    row.submitted_at = time.time()
