"""What a Katib v1beta1 Experiment says, typed: the shapes `loom.domain.katib` parses into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ParameterType = Literal["double", "int", "categorical", "discrete"]
Distribution = Literal["uniform", "logUniform", "normal", "logNormal"]
Strategy = Literal["min", "max", "latest"]

ALGORITHMS = (
    "random",
    "grid",
    "tpe",
    "multivariate-tpe",
    "cmaes",
    "sobol",
    "bayesianoptimization",
    "hyperband",
    "pbt",
)
EARLY_STOPPING = ("medianstop", "asha", "successivehalving")


@dataclass(frozen=True)
class Parameter:
    """One `spec.parameters[]` entry. `values` holds a categorical's or discrete's list, as
    text (Katib keeps them as strings); `min`/`max`/`step` a double's or int's range."""

    name: str
    type: ParameterType
    min: float | None = None
    max: float | None = None
    step: float | None = None
    values: tuple[str, ...] = ()
    distribution: Distribution | None = None


@dataclass(frozen=True)
class Objective:
    type: Literal["maximize", "minimize"]
    metric: str  # objectiveMetricName
    goal: float | None = None
    additional: tuple[str, ...] = ()  # additionalMetricNames
    # metricStrategies, with Katib's defaults filled in: every metric not given one gets the
    # objective's type (max when maximizing, min when minimizing), as Katib's webhook does.
    strategies: dict[str, Strategy] = field(default_factory=dict)


@dataclass(frozen=True)
class Algorithm:
    name: str  # one of ALGORITHMS (or EARLY_STOPPING for `earlyStopping`)
    settings: dict[str, str] = field(default_factory=dict)  # Katib's name/value pairs


@dataclass(frozen=True)
class TrialParameter:
    name: str
    reference: (
        str  # a parameter's name (Katib also allows a trial's metadata, e.g. `${trialSpec.Name}`)
    )
    description: str = ""


@dataclass(frozen=True)
class MetricsCollector:
    """`spec.metricsCollectorSpec`: where the trial's metrics come from."""

    kind: Literal["StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "None"] = "StdOut"
    filters: tuple[str, ...] = ()  # source.filter.metricsFormat: regexes, group 1 name, 2 value
    # source.fileSystemPath.path (File, TensorFlowEvent); PrometheusMetric: `PORT/PATH`
    path: str | None = None
    format: Literal["TEXT", "JSON"] | None = None  # source.fileSystemPath.format (File)


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    parameters: tuple[Parameter, ...]
    objective: Objective
    algorithm: Algorithm
    trial_parameters: tuple[TrialParameter, ...]
    trial_spec: dict[str, Any]  # a Loom manifest, placeholders unsubstituted
    early_stopping: Algorithm | None = None
    parallel_trial_count: int = 3
    max_trial_count: int | None = None
    max_failed_trial_count: int | None = None
    resume_policy: Literal["Never", "LongRunning", "FromVolume"] = "Never"
    metrics_collector: MetricsCollector = MetricsCollector()
    warnings: tuple[str, ...] = ()  # accepted Katib fields that mean nothing here, said aloud
