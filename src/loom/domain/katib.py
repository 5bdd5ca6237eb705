"""Experiments in Katib's v1beta1 form: what a Katib user's `Experiment` says, checked and typed.

Pure: no Optuna here (the `hpo` package maps algorithms onto it). The trial template's `trialSpec`
is a Loom manifest with `${trialParameters.NAME}` placeholders. Katib's defaults are filled in as
its mutating webhook fills them (parallelTrialCount 3, resumePolicy Never, the StdOut collector,
each metric's strategy by the objective's type). Katib fields that only make sense on Kubernetes
are refused with the field named, never dropped without a word.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal

from loom.domain import spec_checks as check
from loom.domain.errors import ManifestError
from loom.domain.katib_collectors import collector
from loom.domain.katib_types import (
    ALGORITHMS,
    EARLY_STOPPING,
    Algorithm,
    Distribution,
    ExperimentSpec,
    MetricsCollector,
    Objective,
    Parameter,
    ParameterType,
    Strategy,
    TrialParameter,
)
from loom.domain.manifest import manifest_from_dict

__all__ = [  # the types are this module's too
    "ALGORITHMS",
    "EARLY_STOPPING",
    "Algorithm",
    "Distribution",
    "ExperimentSpec",
    "MetricsCollector",
    "Objective",
    "Parameter",
    "ParameterType",
    "Strategy",
    "TrialParameter",
    "load_document",
    "parse_experiment",
    "placeholders",
    "trial_manifest",
]

API_VERSION = "kubeflow.org/v1beta1"
PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^}]*)\}")
# Katib's references to a trial's own metadata: a Loom trial has one name (its job's), which
# stands for both. Katib's others (Kind, APIVersion, Labels[…], Annotations[…]) name parts of a
# Kubernetes object, which a Loom trial is not.
METADATA_REFERENCES = ("${trialSpec.Name}", "${trialSpec.Namespace}")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
DEFAULT_PARALLEL = 3  # Katib's DefaultTrialParallelCount
_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

ResumePolicy = Literal["Never", "LongRunning", "FromVolume"]
_TYPES: tuple[ParameterType, ...] = ("double", "int", "categorical", "discrete")
_DISTRIBUTIONS: tuple[Distribution, ...] = ("uniform", "logUniform", "normal", "logNormal")
_STRATEGIES: tuple[Strategy, ...] = ("min", "max", "latest")
_OBJECTIVES: tuple[Literal["maximize", "minimize"], ...] = ("maximize", "minimize")
_RESUME: tuple[ResumePolicy, ...] = ("Never", "LongRunning", "FromVolume")
# Fields Katib's own examples carry that mean nothing for a Loom job: accepted, said aloud.
_IGNORED = {
    "primaryContainerName": "a Loom trial is one job; its learners are its containers",
    "primaryPodLabels": "a Loom trial is one job; its learners are its containers",
    "successCondition": "a trial succeeds when its job completes",
    "failureCondition": "a trial fails when its job fails",
    "retain": "a trial's job is kept until the experiment is deleted",
}
_SPEC_FIELDS = (
    *("objective", "algorithm", "earlyStopping", "parameters", "trialTemplate", "resumePolicy"),
    *("parallelTrialCount", "maxTrialCount", "maxFailedTrialCount", "metricsCollectorSpec"),
)


# -- the document ------------------------------------------------------------------------------
def parse_experiment(data: str | bytes | dict[str, Any]) -> ExperimentSpec:
    """A Katib Experiment (the whole `apiVersion/kind/metadata/spec` document, or its `spec`
    mapping with a `name`), checked. Raises `ManifestError` naming the field."""
    document = load_document(data) if isinstance(data, str | bytes) else data
    warnings: list[str] = []
    if "spec" in document or "kind" in document or "apiVersion" in document:
        name, spec = _envelope(document, warnings)
        return _spec(name, spec, "spec", warnings)
    spec = dict(document)
    name = spec.pop("name", None)
    _check_name(name, "name")
    return _spec(name, spec, "", warnings)


def load_document(text: str | bytes) -> dict[str, Any]:
    """The YAML text of an experiment, as a mapping; refused with the reason."""
    return check.load_mapping(text, "the experiment")


def _envelope(document: dict[str, Any], warnings: list[str]) -> tuple[str, dict[str, Any]]:
    """The name and spec of a whole Kubernetes-style document."""
    check.known(document, ("apiVersion", "kind", "metadata", "spec"), "")
    if document.get("apiVersion", API_VERSION) != API_VERSION:
        raise check.fail("apiVersion", f"{document['apiVersion']!r}; use {API_VERSION}")
    if document.get("kind", "Experiment") != "Experiment":
        raise check.fail("kind", f"{document['kind']!r}; an experiment is kind: Experiment")
    metadata = check.section(document, "metadata", "", "the experiment's name")
    check.known(metadata, ("name", "namespace", "labels", "annotations"), "metadata")
    if "namespace" in metadata:
        warnings.append("metadata.namespace is ignored: an experiment belongs to its owner")
    for key in ("labels", "annotations"):
        if key in metadata:
            warnings.append(f"metadata.{key} are ignored: Loom keeps no Kubernetes metadata")
    _check_name(metadata.get("name"), "metadata.name")
    return metadata["name"], check.section(document, "spec", "", "what to search and how")


def _check_name(name: Any, where: str) -> None:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise check.fail(
            where, f"letters, digits, `-`, `_` and `.`, ≤ 200 characters; got {name!r}"
        )


def _spec(name: str, spec: dict[str, Any], where: str, warnings: list[str]) -> ExperimentSpec:
    check.known(spec, _SPEC_FIELDS, where)
    at: Callable[[str], str] = functools.partial(check.join, where)
    parameters = _parameters(spec.get("parameters"), at("parameters"))
    algorithm = _algorithm(
        check.section(spec, "algorithm", where, "the search algorithm"), at("algorithm"), ALGORITHMS
    )
    if algorithm.name == "grid":
        _grid_steps(parameters, at("parameters"))
    stopping = spec.get("earlyStopping")
    if stopping is not None:
        stopping = _algorithm(
            check.mapping(stopping, at("earlyStopping")), at("earlyStopping"), EARLY_STOPPING
        )
    parallel, most, failed = _counts(spec, at)
    template = check.section(
        spec, "trialTemplate", where, "the trial parameters and the trial spec"
    )
    trial_parameters, trial_spec = _template(template, at("trialTemplate"), parameters, warnings)
    made = ExperimentSpec(
        name=name,
        parameters=parameters,
        objective=_objective(
            check.section(spec, "objective", where, "the metric to optimize"), at("objective")
        ),
        algorithm=algorithm,
        trial_parameters=trial_parameters,
        trial_spec=trial_spec,
        early_stopping=stopping,
        parallel_trial_count=parallel,
        max_trial_count=most,
        max_failed_trial_count=failed,
        resume_policy=check.choice(
            spec.get("resumePolicy") or "Never", at("resumePolicy"), _RESUME
        ),
        metrics_collector=collector(spec.get("metricsCollectorSpec"), at("metricsCollectorSpec")),
        warnings=tuple(warnings),
    )
    _check_template(made, "metricsCollectorSpec" in spec, at)
    return made


def _counts(spec: dict[str, Any], at: Callable[[str], str]) -> tuple[int, int | None, int | None]:
    """parallelTrialCount, maxTrialCount and maxFailedTrialCount, by Katib's rules: neither
    of the others may be more than maxTrialCount."""
    parallel = check.count(spec.get("parallelTrialCount"), at("parallelTrialCount"), 1)
    most = check.count(spec.get("maxTrialCount"), at("maxTrialCount"), 1)
    failed = check.count(spec.get("maxFailedTrialCount"), at("maxFailedTrialCount"), 0)
    for key, count in (("parallelTrialCount", parallel), ("maxFailedTrialCount", failed)):
        if count is not None and most is not None and count > most:
            raise check.fail(at(key), f"{count} is more than maxTrialCount ({most})")
    if parallel is None:  # Katib's default, which its own check then refuses for maxTrialCount < 3
        parallel = DEFAULT_PARALLEL if most is None else min(DEFAULT_PARALLEL, most)
    return parallel, most, failed


# -- the search space --------------------------------------------------------------------------
def _parameters(value: Any, where: str) -> tuple[Parameter, ...]:
    found: dict[str, Parameter] = {}
    for at, item in check.entries(value, where, ("name", "parameterType", "feasibleSpace")):
        parameter = _parameter(item, at)
        if parameter.name in found:
            raise check.fail(f"{at}.name", f"{parameter.name!r} is named twice")
        found[parameter.name] = parameter
    if not found:
        raise check.fail(where, "an experiment needs at least one parameter to search")
    return tuple(found.values())


def _parameter(item: dict[str, Any], where: str) -> Parameter:
    name = check.name(item.get("name"), f"{where}.name")
    kind = check.choice(item.get("parameterType"), f"{where}.parameterType", _TYPES)
    space = check.section(item, "feasibleSpace", where, "the values to search")
    at = f"{where}.feasibleSpace"
    check.known(space, ("min", "max", "step", "list", "distribution"), at)
    distribution = None
    if space.get("distribution") not in (None, ""):  # Katib's empty one is its uniform
        distribution = check.choice(space["distribution"], f"{at}.distribution", _DISTRIBUTIONS)
    if kind in ("categorical", "discrete"):
        values = _listed(kind, space, at)
        return Parameter(name, kind, values=values, distribution=distribution)
    low, high, step = _ranged(kind, space, at, distribution)
    return Parameter(name, kind, low, high, step, distribution=distribution)


def _ranged(
    kind: str, space: dict[str, Any], where: str, distribution: str | None
) -> tuple[float, float, float | None]:
    if "list" in space:
        raise check.fail(f"{where}.list", f"a {kind} parameter takes min and max, not a list")
    low, high = (_bound(space.get(key), f"{where}.{key}", kind) for key in ("min", "max"))
    if low > high:  # min = max is a constant (Katib's own hyperband example has one)
        raise check.fail(f"{where}.max", f"{high:g} must not be less than min ({low:g})")
    if distribution in ("logUniform", "logNormal") and low <= 0:
        raise check.fail(f"{where}.min", f"a {distribution} parameter needs min > 0, got {low:g}")
    if space.get("step") in (None, ""):
        return low, high, None
    step = check.number(space["step"], f"{where}.step")
    if step <= 0 or (step > high - low and high > low):
        raise check.fail(
            f"{where}.step", f"{space['step']!r} must be > 0 and ≤ max − min ({high - low:g})"
        )
    if kind == "int" and not step.is_integer():
        raise check.fail(
            f"{where}.step", f"an int parameter's step is whole, got {space['step']!r}"
        )
    return low, high, step


def _bound(value: Any, where: str, kind: str) -> float:
    if value is None or value == "":
        raise check.fail(where, f"a {kind} parameter needs min and max")
    number = check.number(value, where)
    if kind == "int" and not number.is_integer():
        raise check.fail(where, f"an int parameter's bounds are whole numbers, got {value!r}")
    return number


def _listed(kind: str, space: dict[str, Any], where: str) -> tuple[str, ...]:
    for key in ("min", "max", "step"):
        if key in space:
            raise check.fail(f"{where}.{key}", f"a {kind} parameter takes a list, not min/max/step")
    items = check.sequence(space.get("list"), f"{where}.list")
    values = tuple(check.text(v, f"{where}.list[{i}]") for i, v in enumerate(items))
    if not values:
        raise check.fail(f"{where}.list", f"a {kind} parameter needs a non-empty list")
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise check.fail(f"{where}.list", f"{twice[0]!r} is listed twice")
    if kind == "discrete":
        for index, value in enumerate(values):
            check.number(value, f"{where}.list[{index}]")
    return values


def _grid_steps(parameters: tuple[Parameter, ...], where: str) -> None:
    for index, parameter in enumerate(parameters):
        if parameter.type == "double" and parameter.step is None:
            raise check.fail(
                f"{where}[{index}].feasibleSpace.step",
                f"the grid needs a step for the double parameter {parameter.name}",
            )


# -- objective and algorithms ------------------------------------------------------------------
def _objective(found: dict[str, Any], where: str) -> Objective:
    keys = ("type", "goal", "objectiveMetricName", "additionalMetricNames", "metricStrategies")
    check.known(found, keys, where)
    kind = check.choice(found.get("type"), f"{where}.type", _OBJECTIVES)
    metric = check.name(found.get("objectiveMetricName"), f"{where}.objectiveMetricName")
    goal = None if found.get("goal") is None else check.number(found["goal"], f"{where}.goal")
    extra = _additional(
        found.get("additionalMetricNames"), f"{where}.additionalMetricNames", metric
    )
    strategies = _strategies(
        found.get("metricStrategies"), f"{where}.metricStrategies", (metric, *extra)
    )
    # Katib's webhook: a metric without a strategy gets the objective's direction, additional
    # metrics included (whatever its comment says).
    default: Strategy = "max" if kind == "maximize" else "min"
    filled = {name: strategies.get(name, default) for name in (metric, *extra)}
    return Objective(kind, metric, goal, extra, filled)


def _additional(value: Any, where: str, objective: str) -> tuple[str, ...]:
    names = tuple(
        check.name(m, f"{where}[{i}]") for i, m in enumerate(check.sequence(value, where))
    )
    if objective in names:
        raise check.fail(where, f"{objective!r} is the objective already")
    twice = [m for i, m in enumerate(names) if m in names[:i]]
    if twice:
        raise check.fail(where, f"{twice[0]!r} is named twice")
    return names


def _strategies(value: Any, where: str, metrics: tuple[str, ...]) -> dict[str, Strategy]:
    found: dict[str, Strategy] = {}
    for at, name, strategy in check.pairs(value, where):
        if name not in metrics:
            raise check.fail(
                f"{at}.name", f"{name!r} is not one of the metrics: {', '.join(metrics)}"
            )
        found[name] = check.choice(strategy, f"{at}.value", _STRATEGIES)
    return found


def _algorithm(found: dict[str, Any], where: str, names: tuple[str, ...]) -> Algorithm:
    check.known(found, ("algorithmName", "algorithmSettings"), where)
    name = check.choice(found.get("algorithmName"), f"{where}.algorithmName", names)
    settings = check.pairs(found.get("algorithmSettings"), f"{where}.algorithmSettings")
    return Algorithm(name, {key: value for _, key, value in settings})


# -- the trial template ------------------------------------------------------------------------
def _template(
    found: dict[str, Any], where: str, parameters: tuple[Parameter, ...], warnings: list[str]
) -> tuple[tuple[TrialParameter, ...], dict[str, Any]]:
    check.known(found, ("trialParameters", "trialSpec", *_IGNORED), where)
    warnings.extend(
        f"{where}.{key} is ignored: {why}" for key, why in _IGNORED.items() if key in found
    )
    declared = _trial_parameters(
        found.get("trialParameters"), f"{where}.trialParameters", parameters
    )
    spec_at = f"{where}.trialSpec"
    trial_spec = check.section(found, "trialSpec", where, "the Loom manifest each trial runs")
    if "apiVersion" in trial_spec or "kind" in trial_spec:
        raise check.fail(
            spec_at,
            "a Kubernetes object; in Loom a trial is a job, so trialSpec is a "
            "Loom manifest (name, framework, learners, cpus, …)",
        )
    _check_placeholders(trial_spec, declared, where)
    _check_references(declared, parameters, f"{where}.trialParameters", warnings)
    return declared, trial_spec


def _trial_parameters(
    value: Any, where: str, parameters: tuple[Parameter, ...]
) -> tuple[TrialParameter, ...]:
    """Katib's rules: names unique and without braces, each reference a parameter (or the
    trial's name)."""
    names = [p.name for p in parameters]
    declared: dict[str, TrialParameter] = {}
    for at, entry in check.entries(value, where, ("name", "reference", "description")):
        name = check.name(entry.get("name"), f"{at}.name")
        if "{" in name or "}" in name or name in declared:
            why = "is declared twice" if name in declared else "holds a brace"
            raise check.fail(f"{at}.name", f"{name!r} {why}")
        reference = check.name(entry.get("reference"), f"{at}.reference")
        _check_reference(reference, f"{at}.reference", names)
        description = check.text(entry.get("description") or "", f"{at}.description")
        declared[name] = TrialParameter(name, reference, description)
    return tuple(declared.values())


def _check_reference(reference: str, where: str, names: list[str]) -> None:
    if reference not in names and reference not in METADATA_REFERENCES:
        known = ", ".join((*names, *METADATA_REFERENCES))
        raise check.fail(where, f"{reference!r} is not a parameter, nor the trial's name ({known})")


def _check_references(
    declared: tuple[TrialParameter, ...],
    parameters: tuple[Parameter, ...],
    where: str,
    warnings: list[str],
) -> None:
    """Katib's: one trial parameter per reference. Katib's webhook lets a parameter go
    unreferenced (its values would be searched for nothing): said aloud here."""
    referenced: set[str] = set()
    for index, trial in enumerate(declared):
        if trial.reference in referenced:
            raise check.fail(
                f"{where}[{index}].reference", f"{trial.reference!r} is referred to twice"
            )
        referenced.add(trial.reference)
    for parameter in parameters:
        if parameter.name not in referenced:
            warnings.append(
                f"parameter {parameter.name} is searched but no trial parameter refers to it"
            )


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string value in a trial spec, with its path (keys are never substituted)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, check.join(where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def placeholders(trial_spec: Any) -> set[str]:
    """The names that `${trialParameters.NAME}` placeholders give in a trial spec's strings."""
    return {name for _, text in _strings(trial_spec, "") for name in PLACEHOLDER.findall(text)}


def _check_placeholders(
    trial_spec: dict[str, Any], declared: tuple[TrialParameter, ...], where: str
) -> None:
    """Katib's check both ways: every placeholder declared, every declared name used."""
    known = {t.name for t in declared}
    for path, text in _strings(trial_spec, ""):
        for name in PLACEHOLDER.findall(text):
            if name not in known:
                said = ", ".join(sorted(known)) or "none"
                raise check.fail(
                    f"{where}.trialSpec",
                    f"${{trialParameters.{name}}} in {path} is not declared in "
                    f"trialParameters (declared: {said})",
                )
    for name in sorted(known - placeholders(trial_spec)):
        raise check.fail(f"{where}.trialParameters", f"{name!r} is never used in trialSpec")


# -- trials ------------------------------------------------------------------------------------
def _samples(spec: ExperimentSpec) -> list[dict[str, str]]:
    """Plausible assignments (every parameter at its low end, then at its high end), to check
    the template when the experiment is created rather than at its first trial."""
    by_name = {p.name: p for p in spec.parameters}
    return [
        {
            t.name: _plausible(by_name.get(t.reference), end, spec.name)
            for t in spec.trial_parameters
        }
        for end in (0, -1)
    ]


def _plausible(parameter: Parameter | None, end: int, experiment: str) -> str:
    if parameter is None:  # a metadata reference: the trial's name, as the driver gives it
        return f"{experiment}-0"
    if parameter.values:
        return parameter.values[end]
    bound = (parameter.min, parameter.max)[end]
    assert bound is not None
    return str(int(bound)) if parameter.type == "int" else repr(bound)


def _check_template(
    spec: ExperimentSpec, explicit_collector: bool, at: Callable[[str], str]
) -> None:
    if explicit_collector and "evaluation_metrics" in spec.trial_spec:
        raise check.fail(
            at("metricsCollectorSpec"),
            "the trialSpec has its own evaluation_metrics: give one source of metrics, not two",
        )
    for assignments in _samples(spec):
        trial_manifest(spec, assignments)


def _substitute(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, values) for v in value]
    if not isinstance(value, str):
        return value
    whole = PLACEHOLDER.fullmatch(value)
    if whole is not None:
        return _as_number(values[whole.group(1)])
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], value)


def _as_number(text: str) -> Any:
    """A whole-placeholder field gets a number when the value is one (`cpus: ${…}`)."""
    if _INTEGER.fullmatch(text):  # not "007" nor "+3": text that a number would change
        return int(text) if str(int(text)) == text else text
    return float(text) if _DECIMAL.fullmatch(text) else text


def _metrics(spec: ExperimentSpec) -> dict[str, Any] | None:
    """The collector as the manifest's `evaluation_metrics`."""
    collector = spec.metrics_collector
    if collector.kind == "None":
        return None
    if collector.kind == "TensorFlowEvent":
        return {"type": "tensorboard", "in": collector.path}
    if collector.kind == "PrometheusMetric":
        names = [spec.objective.metric, *spec.objective.additional]
        return {"type": "prometheus", "in": collector.path, "filters": names}
    found: dict[str, Any] = {"type": "katib"}
    if collector.kind == "File":
        found.update({"in": collector.path, "format": collector.format or "TEXT"})
    if collector.filters:
        found["filters"] = list(collector.filters)
    return found


def trial_manifest(spec: ExperimentSpec, assignments: dict[str, str]) -> dict[str, Any]:
    """The trial's manifest: `${trialParameters.NAME}` replaced in every string of the template
    by `assignments[NAME]`, the metrics collector translated into `evaluation_metrics` (unless
    the template has its own), checked as a manifest."""
    missing = sorted(placeholders(spec.trial_spec) - set(assignments))
    if missing:
        raise check.fail("spec.trialTemplate.trialParameters", f"no value for {', '.join(missing)}")
    manifest: dict[str, Any] = _substitute(copy.deepcopy(spec.trial_spec), assignments)
    if "evaluation_metrics" not in manifest:
        metrics = _metrics(spec)
        if metrics is not None:
            manifest["evaluation_metrics"] = metrics
    try:
        manifest_from_dict(manifest)
    except ManifestError as exc:
        where = "spec.trialTemplate.trialSpec" + (f".{exc.field}" if exc.field else "")
        given = ", ".join(f"{k}={v}" for k, v in assignments.items()) or "no trial parameters"
        raise ManifestError(f"{exc.message} (with {given})", field=where) from exc
    return manifest
