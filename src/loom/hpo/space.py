"""A Katib search space as Optuna's distributions, and a trial's values as Katib passes them:
text, substituted into the trial's manifest."""

from __future__ import annotations

import math
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


def distribution(index: int, parameter: Parameter) -> BaseDistribution:
    """Optuna's distribution for one parameter; what Optuna cannot sample is refused."""
    log = parameter.distribution == "logUniform"
    if parameter.distribution in ("normal", "logNormal"):
        raise ManifestError(
            f"{parameter.name}: distribution {parameter.distribution} is not offered by Loom's "
            "samplers (Optuna's); use uniform or logUniform",
            field=_field(index, "feasibleSpace.distribution"),
        )
    if parameter.type in ("categorical", "discrete"):
        return CategoricalDistribution(parameter.values)
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
