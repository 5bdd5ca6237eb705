"""Katib's algorithms by their names, as Optuna's samplers and pruners.

Each algorithm takes Katib's settings for it (text, as Katib's `algorithmSettings` are); an
unknown setting or a bad value is refused with the setting named. Hyperband is Optuna's: trials
are sampled at random and stopped early, bracket by bracket, on the steps they report.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import optuna

from loom.domain.errors import ManifestError
from loom.domain.katib import Algorithm, ExperimentSpec
from loom.hpo import space

_ALGO = "spec.algorithm.algorithmSettings"
_STOP = "spec.earlyStopping.algorithmSettings"

# Katib's setting names per algorithm, and what each becomes.
SAMPLER_SETTINGS: dict[str, tuple[str, ...]] = {
    "random": ("random_state",),
    "grid": ("random_state",),
    "tpe": ("random_state", "n_startup_trials", "n_ei_candidates", "prior_weight"),
    "multivariate-tpe": ("random_state", "n_startup_trials", "n_ei_candidates", "prior_weight"),
    "cmaes": ("random_state", "sigma", "n_startup_trials", "popsize", "restart_strategy"),
    "sobol": ("random_state", "scramble"),
    "bayesianoptimization": ("random_state", "n_initial_points", "base_estimator"),
    "hyperband": ("random_state", "eta", "r_l", "min_resource", "resource_name"),
    "pbt": (
        *("random_state", "n_population", "truncation_threshold", "resample_probability"),
        "suggestion_trial_dir",
    ),
}
RESTART_STRATEGIES = ("none", "ipop", "bipop")
PRUNER_SETTINGS: dict[str, tuple[str, ...]] = {
    "medianstop": ("min_trials_required", "start_step"),
    "asha": ("min_resource", "reduction_factor", "min_early_stopping_rate"),
    "successivehalving": ("min_resource", "reduction_factor", "min_early_stopping_rate"),
}


class Settings:
    """An algorithm's settings, read one at a time with their type; refused with their name."""

    def __init__(self, algorithm: Algorithm, known: tuple[str, ...], where: str) -> None:
        self.values = algorithm.settings
        self.where = where
        for name in self.values:
            if name not in known:
                offered = ", ".join(known) or "none"
                raise ManifestError(
                    f"{name}: not a setting of {algorithm.name} (its settings: {offered})",
                    field=f"{where}[{name}]",
                )

    def get(self, name: str, kind: Callable[[str], Any], default: Any, low: float = 0) -> Any:
        raw = self.values.get(name)
        if raw is None:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise ManifestError(
                f"{name}: {raw!r} is not {'an integer' if kind is int else 'a number'}",
                field=f"{self.where}[{name}]",
            ) from None
        if value < low:
            raise ManifestError(f"{name}: {raw!r} must be ≥ {low}", field=f"{self.where}[{name}]")
        return value

    def choice(self, name: str, allowed: tuple[str, ...], default: str) -> str:
        raw = self.values.get(name, default)
        if raw not in allowed:
            raise ManifestError(
                f"{name}: {raw!r} is not one of {', '.join(allowed)}", field=f"{self.where}[{name}]"
            )
        return raw

    def flag(self, name: str, default: bool) -> bool:
        raw = self.values.get(name)
        if raw is None:
            return default
        if raw.lower() not in ("true", "false"):
            raise ManifestError(
                f"{name}: {raw!r} is not true or false", field=f"{self.where}[{name}]"
            )
        return raw.lower() == "true"


def sampler(spec: ExperimentSpec, proposed: int = 0) -> optuna.samplers.BaseSampler:
    """The sampler of `spec.algorithm`; its settings are checked here, so at creation too.

    The sampler lives for one decision, so a fixed `random_state` would draw the same first
    point at every decision: the seed moves on with the trials `proposed` so far (the same
    trials, the same draws). A grid's order and Sobol's scrambling keep the seed as given."""
    algorithm = spec.algorithm
    settings = Settings(algorithm, SAMPLER_SETTINGS[algorithm.name], _ALGO)
    seed = settings.get("random_state", int, None)
    name = algorithm.name
    if seed is not None and name not in ("grid", "sobol"):
        seed = (seed + proposed * 7919) % 2**32
    if name in ("random", "hyperband", "pbt"):
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler(space.grid(spec.parameters), seed=seed)
    if name in ("tpe", "multivariate-tpe"):
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=settings.get("n_startup_trials", int, 10),
            n_ei_candidates=settings.get("n_ei_candidates", int, 24, low=1),
            prior_weight=settings.get("prior_weight", float, None),
            multivariate=name == "multivariate-tpe",
        )
    if name == "cmaes":
        restart = settings.choice("restart_strategy", RESTART_STRATEGIES, "none")
        with warnings.catch_warnings():  # restart strategies are "experimental" in Optuna
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.simplefilter("ignore", FutureWarning)
            return optuna.samplers.CmaEsSampler(
                seed=seed,
                sigma0=settings.get("sigma", float, None),
                n_startup_trials=settings.get("n_startup_trials", int, 1),
                popsize=settings.get("popsize", int, None, low=2),
                restart_strategy=None if restart == "none" else restart,
            )
    if name == "sobol":
        scramble = settings.flag("scramble", True)
        with warnings.catch_warnings():  # "experimental" since Optuna 3.0, and still there
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(
                qmc_type="sobol", scramble=scramble, seed=seed, warn_asynchronous_seeding=False
            )
    return _gaussian_process(settings, seed)


def _gaussian_process(settings: Settings, seed: int | None) -> optuna.samplers.BaseSampler:
    estimator = settings.values.get("base_estimator", "GP")
    if estimator != "GP":
        raise ManifestError(
            f"base_estimator: {estimator!r}; Loom's bayesianoptimization is a Gaussian process "
            "(Optuna's GPSampler): GP only",
            field=f"{_ALGO}[base_estimator]",
        )
    try:
        import torch  # noqa: F401  (Optuna's GPSampler is written in it)
    except ImportError:
        raise ManifestError(
            "bayesianoptimization needs PyTorch on the platform: pip install 'loom-dl[torch]'",
            field="spec.algorithm.algorithmName",
        ) from None
    return optuna.samplers.GPSampler(
        seed=seed, n_startup_trials=settings.get("n_initial_points", int, 10, low=1)
    )


def pruner(spec: ExperimentSpec) -> optuna.pruners.BasePruner | None:
    """What stops trials early: `spec.earlyStopping`, or hyperband's own brackets (with a
    `resource_name`, Katib's: its brackets give budgets instead, see `schedules`)."""
    if spec.algorithm.name in ("hyperband", "pbt") and spec.early_stopping is not None:
        raise ManifestError(
            f"{spec.algorithm.name} decides which trials go on itself; leave earlyStopping out",
            field="spec.earlyStopping",
        )
    if spec.algorithm.name == "hyperband" and "resource_name" in spec.algorithm.settings:
        return None
    if spec.algorithm.name == "hyperband":
        settings = Settings(spec.algorithm, SAMPLER_SETTINGS["hyperband"], _ALGO)
        return optuna.pruners.HyperbandPruner(
            min_resource=settings.get("min_resource", int, 1, low=1),
            max_resource=settings.get("r_l", int, "auto", low=1),
            reduction_factor=settings.get("eta", int, 3, low=2),
        )
    stopping = spec.early_stopping
    if stopping is None:
        return None
    settings = Settings(stopping, PRUNER_SETTINGS[stopping.name], _STOP)
    if stopping.name == "medianstop":
        return optuna.pruners.MedianPruner(
            n_startup_trials=settings.get("min_trials_required", int, 3, low=1),
            n_warmup_steps=settings.get("start_step", int, 4, low=0),
        )
    min_resource, factor, rate = _halving(settings)
    return optuna.pruners.SuccessiveHalvingPruner(
        min_resource=min_resource, reduction_factor=factor, min_early_stopping_rate=rate
    )


def _halving(settings: Settings) -> tuple[int, int, int]:
    return (
        settings.get("min_resource", int, 1, low=1),
        settings.get("reduction_factor", int, 3, low=2),
        settings.get("min_early_stopping_rate", int, 0),
    )


def rung_steps(spec: ExperimentSpec, last_step: int) -> list[int]:
    """Successive halving's rungs up to `last_step`: the reports at which a trial is compared
    with the others (`completed_rung_N`, in Optuna's words)."""
    stopping = spec.early_stopping
    if stopping is None or stopping.name not in ("asha", "successivehalving"):
        return []
    low, factor, rate = _halving(Settings(stopping, PRUNER_SETTINGS[stopping.name], _STOP))
    steps: list[int] = []
    while (step := low * factor ** (rate + len(steps))) <= last_step:
        steps.append(step)
    return steps


def check(spec: ExperimentSpec) -> None:
    """Everything the samplers and pruners refuse, said when the experiment is created."""
    space.distributions(spec.parameters)
    sampler(spec)
    pruner(spec)
    name = spec.algorithm.name
    for index, parameter in enumerate(spec.parameters):
        if parameter.distribution in space.NORMAL and name in ("grid", "pbt"):
            raise ManifestError(
                f"{parameter.name}: {name} walks or perturbs values, not a "
                f"{parameter.distribution} distribution's quantiles; use uniform",
                field=f"spec.parameters[{index}].feasibleSpace.distribution",
            )
    if name == "hyperband" and "resource_name" in spec.algorithm.settings:
        _check_budget(spec)
    if name == "pbt":
        _check_population(spec)


def _check_budget(spec: ExperimentSpec) -> None:
    """Katib's: the budget parameter is a parameter, r_l its most, eta at least 2."""
    settings = Settings(spec.algorithm, SAMPLER_SETTINGS["hyperband"], _ALGO)
    resource = spec.algorithm.settings["resource_name"]
    found = next((p for p in spec.parameters if p.name == resource), None)
    if found is None or found.type not in ("int", "double"):
        raise ManifestError(
            f"resource_name: {resource!r} is not an int or double parameter of the experiment",
            field=f"{_ALGO}[resource_name]",
        )
    if settings.get("r_l", float, None, low=1) is None:
        raise ManifestError(
            "r_l: the most budget a trial gets is required with resource_name",
            field=f"{_ALGO}[r_l]",
        )
    settings.get("eta", int, 3, low=2)


def _check_population(spec: ExperimentSpec) -> None:
    """Katib's: a population of 5 or more, a truncation threshold and a resample probability
    between 0 and 1."""
    settings = Settings(spec.algorithm, SAMPLER_SETTINGS["pbt"], _ALGO)
    for name in ("n_population", "truncation_threshold"):
        if name not in spec.algorithm.settings:
            raise ManifestError(f"{name}: pbt needs it", field=f"{_ALGO}[{name}]")
    settings.get("n_population", int, 5, low=5)
    for name in ("truncation_threshold", "resample_probability"):
        value = settings.get(name, float, 0.0)
        if value > 1:
            raise ManifestError(f"{name}: must be between 0 and 1", field=f"{_ALGO}[{name}]")
