"""A trial's metrics as the search reads them: one series per metric name, from whichever
collector reported it (Katib's `name=value` lines, a regex, TensorBoard, the SDK)."""

from __future__ import annotations

from typing import Any

from loom.domain.experiments import reduce
from loom.domain.katib import ExperimentSpec
from loom.registry.models import PREFERRED_GROUPS
from loom.tds.metrics import MetricQuery
from loom.tds.series import MAX_BUDGET
from loom.tds.service import TrainingData

# A trial's curve, read whole up to this many reports (past it, reduced: `tds.series`).
CURVE_BUDGET = MAX_BUDGET


def _pick(lines: dict[str, dict[str, dict[str, list[Any]]]], name: str) -> list[float | None]:
    """A test-like group first (a metric named alike in `train` and `test`), then any."""
    groups = [g for g in lines if name in lines[g]]
    if not groups:
        return []
    ordered = [g for g in PREFERRED_GROUPS if g in groups] + sorted(groups)
    return list(lines[ordered[0]][name]["values"])


def series(tds: TrainingData, job_id: str, metric: str) -> list[float | None]:
    """The metric's values in the order reported, by the first learner (Katib reads the primary
    container) or, if it reported none, by any; `group/name` names one group."""
    for learner in (1, None):
        query = MetricQuery(name=metric, learner=learner)
        found = _pick(tds.metrics.series(job_id, query, CURVE_BUDGET)["series"], metric)
        if not found and "/" in metric:
            group, name = metric.split("/", 1)
            query = MetricQuery(group=group, name=name, learner=learner)
            found = _pick(tds.metrics.series(job_id, query, CURVE_BUDGET)["series"], name)
        if found:
            return found
    return []


def intermediate(values: list[float | None]) -> dict[int, float]:
    """As Optuna's steps: the n-th report is step n (the pruners' warm-up counts reports, as
    Katib's median stop does)."""
    return {i: v for i, v in enumerate(values, start=1) if v is not None}


def final(
    tds: TrainingData, spec: ExperimentSpec, job_id: str
) -> tuple[float | None, dict[str, float], list[float | None]]:
    """The objective and every metric by its strategy, and the objective's series."""
    objective = spec.objective
    values: dict[str, float] = {}
    curve: list[float | None] = []
    for name in (objective.metric, *objective.additional):
        found = series(tds, job_id, name)
        if name == objective.metric:
            curve = found
        value = reduce(found, objective.strategies.get(name, "latest"))
        if value is not None:
            values[name] = value
    return values.get(objective.metric), values, curve
