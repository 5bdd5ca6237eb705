"""An experiment's search as an Optuna study, rebuilt from the stored trials.

Optuna keeps every bit of a sampler's and a pruner's state in its storage (trial and study
attributes), so a study rebuilt from what Loom stored goes on exactly where it was, after a
restart too. Loom's database stays the one record: the study lives for one decision.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.storages import InMemoryStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from loom.domain.experiments import TrialPhase
from loom.domain.katib import ExperimentSpec
from loom.hpo import algorithms, schedules, space

optuna.logging.set_verbosity(optuna.logging.WARNING)
log = logging.getLogger("loom.hpo")

_AS_OPTUNA = {
    TrialPhase.CREATED: TrialState.RUNNING,
    TrialPhase.RUNNING: TrialState.RUNNING,
    TrialPhase.SUCCEEDED: TrialState.COMPLETE,
    TrialPhase.EARLY_STOPPED: TrialState.PRUNED,
}


@dataclass(frozen=True)
class Past:
    """What the study needs of one stored trial."""

    number: int
    phase: TrialPhase
    sampled: dict[str, Any]  # Optuna's values of the parameters
    attrs: dict[str, Any]  # Optuna's system attributes of the trial
    objective: float | None = None
    intermediate: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Proposal:
    parameters: dict[str, str]  # as text, for the trial's manifest
    sampled: dict[str, Any]
    attrs: dict[str, Any]


class Search:
    """One decision's study: propose new trials, or judge running ones."""

    def __init__(self, spec: ExperimentSpec, study_attrs: dict[str, Any], past: list[Past]):
        self.spec = spec
        self.distributions: dict[str, BaseDistribution] = space.distributions(spec.parameters)
        storage = InMemoryStorage()
        direction = (
            StudyDirection.MAXIMIZE
            if spec.objective.type == "maximize"
            else StudyDirection.MINIMIZE
        )
        self._study_id = storage.create_new_study([direction], spec.name)
        for key, value in study_attrs.items():
            storage.set_study_system_attr(self._study_id, key, value)
        self.storage = storage
        self.pruner = algorithms.pruner(spec)
        self.sampler = algorithms.sampler(spec, len(past))
        self.study = optuna.load_study(
            study_name=spec.name, storage=storage, sampler=self.sampler, pruner=self.pruner
        )
        for trial in sorted(past, key=lambda t: t.number):
            self.study.add_trial(self._frozen(trial))
        self.past = sorted(past, key=lambda t: t.number)
        self.schedule = schedules.of(spec)

    def _frozen(self, trial: Past) -> FrozenTrial:
        state = _AS_OPTUNA.get(trial.phase, TrialState.FAIL)
        value = trial.objective if state == TrialState.COMPLETE else None
        if state == TrialState.COMPLETE and (value is None or not math.isfinite(value)):
            state, value = TrialState.FAIL, None
        sampled = {k: v for k, v in trial.sampled.items() if k in self.distributions}
        attrs = dict(trial.attrs)
        if state != TrialState.RUNNING:
            attrs = {**self._rungs(trial.intermediate), **attrs}
        return optuna.trial.create_trial(
            state=state,
            value=value,
            params=sampled,
            distributions={k: self.distributions[k] for k in sampled},
            system_attrs=attrs,
            intermediate_values=trial.intermediate,
        )

    def _rungs(self, curve: dict[int, float]) -> dict[str, float]:
        """A trial that ended between two passes was never judged at its rungs: what it
        reported there is what successive halving would have recorded."""
        if not curve:
            return {}
        steps = algorithms.rung_steps(self.spec, max(curve))
        found = {}
        for rung, step in enumerate(steps):
            reached = [s for s in curve if s <= step]
            found[f"completed_rung_{rung}"] = curve[max(reached)] if reached else math.nan
        return {k: v for k, v in found.items() if not math.isnan(v)}

    @property
    def study_attrs(self) -> dict[str, Any]:
        return dict(self.storage.get_study_system_attrs(self._study_id))

    def exhausted(self) -> bool:
        """The grid has been walked, or the schedule ran out: no new point is left."""
        if self.schedule is not None:
            return self.schedule.exhausted(self)
        grid = self.sampler
        return isinstance(grid, optuna.samplers.GridSampler) and grid.is_exhausted(self.study)

    def propose(self) -> Proposal | None:
        """The next trial's point; None while the algorithm waits for running trials (a
        Hyperband rung, a PBT generation)."""
        if self.schedule is not None:
            found = self.schedule.propose(self)
            if found is not None:  # the next proposal of the same pass sees this one, as it
                # would once stored (two PBT trials ending together made two of generation 0)
                number = max((t.number for t in self.past), default=-1) + 1
                self.past.append(Past(number, TrialPhase.CREATED, found.sampled, found.attrs))
            return found
        return self.ask()

    def ask(self, fixed: dict[str, Any] | None = None) -> Proposal:
        """A point from the sampler (`fixed`: values given, not sampled), as text."""
        distributions = {k: v for k, v in self.distributions.items() if k not in (fixed or {})}
        trial = self.study.ask(fixed_distributions=distributions)
        frozen = self.study.get_trials(deepcopy=False)[trial.number]
        sampled = dict(frozen.params)
        by_name = {p.name: p for p in self.spec.parameters}
        parameters = {
            name: space.as_text(space.value_of(by_name[name], value))
            for name, value in sampled.items()
        }
        parameters.update({name: space.as_text(value) for name, value in (fixed or {}).items()})
        return Proposal(parameters=parameters, sampled=sampled, attrs=dict(frozen.system_attrs))

    def should_stop(self, number: int) -> tuple[bool, dict[str, Any]]:
        """Whether the pruner stops running trial `number` on what it reported, and the trial's
        attributes after (a successive-halving rung is recorded there)."""
        frozen = self.study.get_trials(deepcopy=False)[number]
        if self.pruner is None or frozen.state != TrialState.RUNNING or frozen.last_step is None:
            return False, dict(frozen.system_attrs)  # its own, kept (a PBT trial's parent)
        stop = self.pruner.prune(self.study, frozen)
        after = self.study.get_trials(deepcopy=False)[number]
        return bool(stop), dict(after.system_attrs)
