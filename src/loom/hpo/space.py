"""A Katib search space as Optuna's distributions, and a trial's values as Katib passes them:
text, substituted into the trial's manifest."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from loom.domain.errors import ManifestError
from loom.domain.katib import Parameter

GRID_LIMIT = 100_000  # points of a grid search; past it, the grid is not a plan but a typo


def _field(index: int, key: str) -> str:
    return f"spec.parameters[{index}].{key}"


# A normal parameter is searched as its quantile in (0, 1): every sampler sees a plain range,
# and a uniform draw of the quantile is a normal draw of the value (Katib's hyperopt: centred
# on (min + max) / 2 with σ = (max − min) / 6; logNormal the same in log space).
QUANTILE = FloatDistribution(1e-6, 1 - 1e-6)
NORMAL = ("normal", "logNormal")


def distribution(index: int, parameter: Parameter) -> BaseDistribution:
    """Optuna's distribution for one parameter; what Optuna cannot sample is refused."""
    log = parameter.distribution == "logUniform"
    if parameter.type in ("categorical", "discrete"):
        if parameter.distribution in NORMAL:
            raise ManifestError(
                f"{parameter.name}: a {parameter.type} parameter has no {parameter.distribution} "
                "distribution; its values are listed",
                field=_field(index, "feasibleSpace.distribution"),
            )
        return CategoricalDistribution(parameter.values)
    if parameter.distribution in NORMAL and parameter.min != parameter.max:
        return QUANTILE
    assert parameter.min is not None and parameter.max is not None
    if log and parameter.step is not None:
        raise ManifestError(
            f"{parameter.name}: a logUniform parameter cannot also have a step",
            field=_field(index, "feasibleSpace.step"),
        )
    if parameter.type == "int":
        step = int(parameter.step or 1)
        return IntDistribution(int(parameter.min), int(parameter.max), log=log, step=step)
    return FloatDistribution(parameter.min, parameter.max, log=log, step=parameter.step)


def distributions(parameters: tuple[Parameter, ...]) -> dict[str, BaseDistribution]:
    return {p.name: distribution(i, p) for i, p in enumerate(parameters)}


def grid(parameters: tuple[Parameter, ...]) -> dict[str, list[Any]]:
    """Every value of every parameter, for the grid: a double needs its step (checked when
    the experiment is parsed)."""
    space: dict[str, list[Any]] = {}
    size = 1
    for index, parameter in enumerate(parameters):
        values = _points(parameter)
        size *= len(values)
        if size > GRID_LIMIT:
            raise ManifestError(
                f"the grid has more than {GRID_LIMIT:,} points; use larger steps or fewer "
                "values, or another algorithm",
                field=_field(index, "feasibleSpace"),
            )
        space[parameter.name] = values
    return space


def _points(parameter: Parameter) -> list[Any]:
    if parameter.type in ("categorical", "discrete"):
        return list(parameter.values)
    assert parameter.min is not None and parameter.max is not None
    step = parameter.step or 1.0
    count = math.floor((parameter.max - parameter.min) / step + 1e-9) + 1
    if parameter.type == "int":
        return [int(parameter.min) + int(step) * i for i in range(count)]
    return [round(parameter.min + step * i, 12) for i in range(count)]


def as_text(value: Any) -> str:
    """A sampled value as Katib passes it to a trial: `0.01`, `3`, `adam`."""
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(value)
    return str(value)


def value_of(parameter: Parameter, sampled: Any) -> Any:
    """The parameter's value for a sampled point: a normal parameter's quantile turned into its
    value (kept within min and max, on its step), anything else as sampled."""
    if parameter.distribution not in NORMAL or parameter.min is None or parameter.max is None:
        return sampled
    if parameter.min == parameter.max:
        return sampled
    low, high = parameter.min, parameter.max
    if parameter.distribution == "logNormal":
        low, high = math.log(low), math.log(high)
    mean, sigma = (low + high) / 2, (high - low) / 6
    value = mean + sigma * NormalDist().inv_cdf(float(sampled))
    if parameter.distribution == "logNormal":
        value = math.exp(value)
    value = min(max(value, parameter.min), parameter.max)
    if parameter.step:
        value = parameter.min + round((value - parameter.min) / parameter.step) * parameter.step
        value = min(value, parameter.max)
    if parameter.type == "int":
        return round(value)
    return round(value, 12)
