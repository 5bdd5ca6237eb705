"""Algorithms that decide from whole rounds of trials rather than one point at a time, as Katib's
own services do: Hyperband with a budget parameter (`resource_name`: each bracket's trials get a
budget, the best of a rung go on with more), and Population Based Training (generations of
trials; the worst copy the best's parameters and checkpoints, the others perturb their own).

A schedule reads the trials so far (their parameters and `attrs`: bracket and rung, generation
and parent) and says what to run next, or None while it waits for running trials. It keeps no
state of its own: the stored trials are the record, as for Optuna's samplers.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from loom.domain.experiments import ACTIVE_TRIAL, TrialPhase
from loom.domain.katib import ExperimentSpec, Parameter
from loom.hpo import space

if TYPE_CHECKING:
    from loom.hpo.study import Past, Proposal, Search

HYPERBAND = "hyperband"
PBT = "pbt"


class Schedule(Protocol):
    def propose(self, search: Search) -> Proposal | None: ...

    def exhausted(self, search: Search) -> bool: ...


def of(spec: ExperimentSpec) -> Schedule | None:
    """The experiment's schedule, if its algorithm has one."""
    settings = spec.algorithm.settings
    if spec.algorithm.name == HYPERBAND and "resource_name" in settings:
        return Hyperband(spec)
    if spec.algorithm.name == PBT:
        return PopulationBased(spec)
    return None


def _ranked(spec: ExperimentSpec, trials: list[Past]) -> list[Past]:
    """Best first; trials without an objective last."""
    scored = [t for t in trials if t.objective is not None and math.isfinite(t.objective)]
    scored.sort(key=lambda t: t.objective or 0.0, reverse=spec.objective.type == "maximize")
    return scored + [t for t in trials if t not in scored]


def _text(search: Search, sampled: dict[str, Any]) -> dict[str, str]:
    by_name = {p.name: p for p in search.spec.parameters}
    return {
        name: space.as_text(space.value_of(by_name[name], value))
        for name, value in sampled.items()
        if name in by_name
    }


# -- Hyperband ---------------------------------------------------------------------------------
class Hyperband:
    """Katib's Hyperband: brackets s = s_max … 0; bracket s starts n configurations with budget
    r = R·η^−s, and each rung keeps the best 1/η of the last with η times the budget."""

    def __init__(self, spec: ExperimentSpec) -> None:
        settings = spec.algorithm.settings
        self.spec = spec
        self.resource = settings["resource_name"]
        self.most = float(settings["r_l"])
        self.eta = int(settings.get("eta", "3"))
        self.s_max = math.floor(math.log(self.most) / math.log(self.eta) + 1e-9)
        self.parameter = next(p for p in spec.parameters if p.name == self.resource)

    def rungs(self) -> list[tuple[int, int, int, float]]:
        """Every rung in order: (bracket s, rung i, trials n_i, budget r_i)."""
        found = []
        budget = (self.s_max + 1) * self.most
        for s in range(self.s_max, -1, -1):
            n = math.ceil(budget / self.most * self.eta**s / (s + 1))
            r = self.most * self.eta ** (-s)
            for i in range(s + 1):
                found.append((s, i, max(1, math.floor(n * self.eta ** (-i))), r * self.eta**i))
        return found

    def _budget(self, r: float) -> Any:
        return max(1, round(r)) if self.parameter.type == "int" else r

    def _in(self, search: Search, s: int, i: int) -> list[Past]:
        return [
            t
            for t in search.past
            if (t.attrs.get(HYPERBAND) or {}).get("s") == s
            and (t.attrs.get(HYPERBAND) or {}).get("i") == i
        ]

    def propose(self, search: Search) -> Proposal | None:
        for s, i, count, r in self.rungs():
            made = self._in(search, s, i)
            if len(made) >= count:
                continue
            mark = {HYPERBAND: {"s": s, "i": i}}
            if i == 0:
                found = search.ask({self.resource: self._budget(r)})
                return replace(found, attrs={**found.attrs, **mark})
            before = self._in(search, s, i - 1)
            if any(t.phase in ACTIVE_TRIAL for t in before):
                return None  # the rung below is still running
            promoted = {(t.attrs.get(HYPERBAND) or {}).get("from") for t in made}
            chosen = [t for t in _ranked(self.spec, before) if t.number not in promoted]
            if not chosen:
                continue
            best = chosen[0]
            sampled = {k: v for k, v in best.sampled.items() if k != self.resource}
            parameters = {**_text(search, sampled), self.resource: space.as_text(self._budget(r))}
            from loom.hpo.study import Proposal

            return Proposal(parameters, sampled, {HYPERBAND: {"s": s, "i": i, "from": best.number}})
        return None

    def exhausted(self, search: Search) -> bool:
        return all(len(self._in(search, s, i)) >= n for s, i, n, _ in self.rungs())


# -- Population Based Training -----------------------------------------------------------------
class PopulationBased:
    """Katib's PBT: a first generation sampled at random; each next one from the last: a
    member in the worst `truncation_threshold` exploits a member of the best (its parameters
    and checkpoints), the others explore (their own parameters perturbed by ×0.8 or ×1.2, or
    resampled with `resample_probability`, from their own checkpoints)."""

    def __init__(self, spec: ExperimentSpec) -> None:
        settings = spec.algorithm.settings
        self.spec = spec
        self.population = int(settings["n_population"])
        self.truncation = float(settings["truncation_threshold"])
        resample = settings.get("resample_probability")
        self.resample = None if resample is None else float(resample)
        self.seed = int(settings.get("random_state", "0"))

    @staticmethod
    def generation(trial: Past) -> int:
        return int((trial.attrs.get(PBT) or {}).get("generation", 0))

    def propose(self, search: Search) -> Proposal | None:
        alive = [t for t in search.past if t.phase not in (TrialPhase.FAILED, TrialPhase.KILLED)]
        current = max((self.generation(t) for t in alive), default=0)
        members = [t for t in alive if self.generation(t) == current]
        if current == 0 and len(members) < self.population:
            found = search.ask()
            return replace(found, attrs={**found.attrs, PBT: {"generation": 0}})
        if len(members) < self.population:
            pool = self._pool(search, current - 1)
            return self._child(search, pool, current, len(members))
        pool = self._pool(search, current)
        if len(pool) < max(2, self.population // 2):
            return None  # the generation is still running
        return self._child(search, pool, current + 1, 0)

    def _pool(self, search: Search, generation: int) -> list[Past]:
        done = [
            t
            for t in search.past
            if self.generation(t) == generation
            and t.phase == TrialPhase.SUCCEEDED
            and t.objective is not None
        ]
        return _ranked(self.spec, done)

    def _child(self, search: Search, pool: list[Past], generation: int, index: int) -> Proposal:
        from loom.hpo.study import Proposal

        chance = random.Random(f"{self.seed}-{generation}-{index}-{len(search.past)}")
        cut = max(1, int(len(pool) * self.truncation))
        member = pool[index % len(pool)]
        worst = pool[len(pool) - cut :] if len(pool) > 1 else []
        if member in worst:  # exploit: a best member's parameters and checkpoints
            parent = pool[chance.randrange(cut)]
            sampled = dict(parent.sampled)
        else:  # explore: its own, perturbed
            parent = member
            sampled = self._perturbed(member.sampled, chance)
        mark = {PBT: {"generation": generation, "parent": parent.number}}
        return Proposal(_text(search, sampled), sampled, mark)

    def _perturbed(self, sampled: dict[str, Any], chance: random.Random) -> dict[str, Any]:
        found = dict(sampled)
        for parameter in self.spec.parameters:
            if parameter.name in found:
                found[parameter.name] = self._perturb(parameter, found[parameter.name], chance)
        return found

    def _perturb(self, parameter: Parameter, value: Any, chance: random.Random) -> Any:
        if self.resample is not None and chance.random() < self.resample:
            return _resampled(parameter, chance)
        if parameter.values:
            place = list(parameter.values).index(str(value)) + chance.choice((-1, 1))
            return parameter.values[place % len(parameter.values)]
        assert parameter.min is not None and parameter.max is not None
        moved = min(max(float(value) * chance.choice((0.8, 1.2)), parameter.min), parameter.max)
        if parameter.step:  # kept on the parameter's steps
            steps = round((moved - parameter.min) / parameter.step)
            moved = min(parameter.min + steps * parameter.step, parameter.max)
        return round(moved) if parameter.type == "int" else round(moved, 12)

    def exhausted(self, search: Search) -> bool:
        return False  # bounded by maxTrialCount, as Katib's


def _resampled(parameter: Parameter, chance: random.Random) -> Any:
    if parameter.values:
        return chance.choice(parameter.values)
    assert parameter.min is not None and parameter.max is not None
    if parameter.type == "int":
        return chance.randint(int(parameter.min), int(parameter.max))
    return chance.uniform(parameter.min, parameter.max)
