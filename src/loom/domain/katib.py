"""Experiments in Katib's v1beta1 form: what a Katib user's `Experiment` says, checked and typed.

Pure: no Optuna here (the `hpo` package maps algorithms onto it). The trial template's `trialSpec`
is a Loom manifest with `${trialParameters.NAME}` placeholders. Katib fields that only make sense
on Kubernetes are refused with the field named, never dropped without a word.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from collections.abc import Callable
from typing import Any

import yaml

from loom.domain.errors import ManifestError
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
from loom.domain.manifest import manifest_from_dict, yaml_problem
from loom.domain.safe_yaml import UnsafeYaml, safe_load

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
    "trial_manifest",
]

API_VERSION = "kubeflow.org/v1beta1"
PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^}]*)\}")
METADATA_REFERENCES = ("${trialSpec.Name}", "${trialSpec.Namespace}")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")

# Katib fields a Loom experiment cannot honour: refused with why.
_KUBERNETES_ONLY = {
    "nasConfig": "neural architecture search is not offered by Loom",
    "configMap": "a Kubernetes ConfigMap; put the Loom manifest in trialSpec",
}
# Fields Katib's own examples carry that mean nothing for a Loom job: accepted, said aloud.
_IGNORED = {
    "primaryContainerName": "a Loom trial is one job; its learners are its containers",
    "primaryPodLabels": "a Loom trial is one job; its learners are its containers",
    "successCondition": "a trial succeeds when its job completes",
    "failureCondition": "a trial fails when its job fails",
    "retain": "a trial's job is kept until the experiment is deleted",
}
_SPEC_FIELDS = {
    "objective",
    "algorithm",
    "earlyStopping",
    "parallelTrialCount",
    "maxTrialCount",
    "maxFailedTrialCount",
    "parameters",
    "trialTemplate",
    "metricsCollectorSpec",
    "resumePolicy",
    "nasConfig",
}


def _fail(field_path: str, message: str) -> ManifestError:
    return ManifestError(f"{field_path}: {message}", field=field_path)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"must be a mapping, got {type(value).__name__}")
    return value


def _known(found: dict[str, Any], allowed: set[str] | tuple[str, ...], where: str) -> None:
    for key in found:
        if key in _KUBERNETES_ONLY:
            raise _fail(_join(where, key), f"{_KUBERNETES_ONLY[key]}; refused")
        if key not in allowed:
            close = difflib.get_close_matches(str(key), list(allowed), n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise _fail(_join(where, key), f"unknown field{hint}")


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(where, f"must be a list, got {type(value).__name__}")
    return value


def _count(value: Any, where: str, low: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _fail(where, f"must be a whole number ≥ {low}, got {value!r}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise _fail(where, f"must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _fail(where, f"must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise _fail(where, f"must be a finite number, got {value!r}")
    return number


def _text(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _fail(where, f"must be text, got {value!r}")
    return str(value)


def _choice(value: Any, where: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _fail(where, f"{value!r} is not one of {', '.join(allowed)}")
    return str(value)


# -- the document ------------------------------------------------------------------------------
def parse_experiment(data: str | bytes | dict[str, Any]) -> ExperimentSpec:
    """A Katib Experiment (the whole `apiVersion/kind/metadata/spec` document, or its `spec`
    mapping with a `name`), checked. Raises `ManifestError` naming the field."""
    document = load_document(data) if isinstance(data, str | bytes) else data
    warnings: list[str] = []
    if "spec" in document or "kind" in document or "apiVersion" in document:
        _known(document, ("apiVersion", "kind", "metadata", "spec"), "")
        if document.get("apiVersion", API_VERSION) != API_VERSION:
            raise _fail("apiVersion", f"{document['apiVersion']!r}; use {API_VERSION}")
        if document.get("kind", "Experiment") != "Experiment":
            raise _fail("kind", f"{document['kind']!r}; an experiment is kind: Experiment")
        metadata = _mapping(document.get("metadata") or {}, "metadata")
        _known(metadata, ("name", "namespace", "labels", "annotations"), "metadata")
        if "namespace" in metadata:
            warnings.append("metadata.namespace is ignored: an experiment belongs to its owner")
        for key in ("labels", "annotations"):
            if key in metadata:
                warnings.append(f"metadata.{key} are ignored: Loom keeps no Kubernetes metadata")
        name, name_field = metadata.get("name"), "metadata.name"
        spec = _mapping(document.get("spec"), "spec")
        where = "spec"
    else:
        spec = dict(document)
        name, name_field = spec.pop("name", None), "name"
        where = ""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _fail(
            name_field, f"letters, digits, `-`, `_` and `.`, ≤ 200 characters; got {name!r}"
        )
    return _spec(name, spec, where, warnings)


def load_document(text: str | bytes) -> dict[str, Any]:
    """The YAML text of an experiment, as a mapping; refused with the reason."""
    try:
        data = safe_load(text)
    except UnsafeYaml as exc:
        raise ManifestError(f"the experiment is refused: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(f"the experiment is not valid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"an experiment is a YAML mapping, got {type(data).__name__}")
    return data


def _spec(name: str, spec: dict[str, Any], where: str, warnings: list[str]) -> ExperimentSpec:
    _known(spec, _SPEC_FIELDS, where)
    at: Callable[[str], str] = lambda key: _join(where, key)  # noqa: E731
    parameters = _parameters(spec.get("parameters"), at("parameters"))
    algorithm = _algorithm(spec.get("algorithm"), at("algorithm"), ALGORITHMS, required=True)
    assert algorithm is not None
    stopping = _algorithm(spec.get("earlyStopping"), at("earlyStopping"), EARLY_STOPPING)
    if algorithm.name == "grid":
        for index, parameter in enumerate(parameters):
            if parameter.type == "double" and parameter.step is None:
                raise _fail(
                    at(f"parameters[{index}].feasibleSpace.step"),
                    f"the grid needs a step for the double parameter {parameter.name}",
                )
    parallel = _count(spec.get("parallelTrialCount"), at("parallelTrialCount"), 1) or 3
    most = _count(spec.get("maxTrialCount"), at("maxTrialCount"), 1)
    failed = _count(spec.get("maxFailedTrialCount"), at("maxFailedTrialCount"), 0)
    if most is not None and parallel > most:
        raise _fail(at("parallelTrialCount"), f"{parallel} is more than maxTrialCount ({most})")
    if most is not None and failed is not None and failed > most:
        raise _fail(at("maxFailedTrialCount"), f"{failed} is more than maxTrialCount ({most})")
    policy = spec.get("resumePolicy", "Never")
    _choice(policy, at("resumePolicy"), ("Never", "LongRunning", "FromVolume"))
    collector = _collector(spec.get("metricsCollectorSpec"), at("metricsCollectorSpec"))
    trial_parameters, trial_spec = _template(
        spec.get("trialTemplate"), at("trialTemplate"), parameters, warnings
    )
    made = ExperimentSpec(
        name=name,
        parameters=parameters,
        objective=_objective(spec.get("objective"), at("objective")),
        algorithm=algorithm,
        trial_parameters=trial_parameters,
        trial_spec=trial_spec,
        early_stopping=stopping,
        parallel_trial_count=parallel,
        max_trial_count=most,
        max_failed_trial_count=failed,
        resume_policy=policy,
        metrics_collector=collector,
        warnings=tuple(warnings),
    )
    _check_template(made, "metricsCollectorSpec" in spec, at)
    return made


# -- parts -------------------------------------------------------------------------------------
def _parameters(value: Any, where: str) -> tuple[Parameter, ...]:
    items = _list(value, where)
    if not items:
        raise _fail(where, "an experiment needs at least one parameter to search")
    found: list[Parameter] = []
    for index, item in enumerate(items):
        parameter = _parameter(_mapping(item, f"{where}[{index}]"), f"{where}[{index}]")
        if any(p.name == parameter.name for p in found):
            raise _fail(f"{where}[{index}].name", f"{parameter.name!r} is named twice")
        found.append(parameter)
    return tuple(found)


def _parameter(item: dict[str, Any], where: str) -> Parameter:
    if "distribution" in item:
        raise _fail(f"{where}.distribution", "goes in feasibleSpace, where Katib reads it")
    _known(item, ("name", "parameterType", "feasibleSpace"), where)
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(f"{where}.name", f"a parameter needs a name, got {name!r}")
    kind = _choice(
        item.get("parameterType"),
        f"{where}.parameterType",
        ("double", "int", "categorical", "discrete"),
    )
    space_at = f"{where}.feasibleSpace"
    space = _mapping(item.get("feasibleSpace"), space_at)
    _known(space, ("min", "max", "step", "list", "distribution"), space_at)
    distribution = space.get("distribution")
    if distribution is not None:
        _choice(
            distribution,
            f"{space_at}.distribution",
            ("uniform", "logUniform", "normal", "logNormal"),
        )
    if kind in ("categorical", "discrete"):
        return _listed(name, kind, space, space_at, distribution)
    if "list" in space:
        raise _fail(f"{space_at}.list", f"a {kind} parameter takes min and max, not a list")
    low, high = (_number(space.get(k), f"{space_at}.{k}") for k in ("min", "max"))
    if kind == "int" and not (low.is_integer() and high.is_integer()):
        raise _fail(
            f"{space_at}.min", f"an int parameter's bounds are whole numbers: {low}, {high}"
        )
    if low >= high:
        raise _fail(f"{space_at}.max", f"{high:g} must be more than min ({low:g})")
    step = None
    if space.get("step") is not None:
        step = _number(space["step"], f"{space_at}.step")
        if step <= 0 or step > high - low or (kind == "int" and not step.is_integer()):
            raise _fail(
                f"{space_at}.step", f"{space['step']!r} must be > 0, ≤ max − min, whole for int"
            )
    if distribution in ("logUniform", "logNormal") and low <= 0:
        raise _fail(f"{space_at}.min", f"a {distribution} parameter needs min > 0, got {low:g}")
    return Parameter(name, kind, low, high, step, (), distribution)  # type: ignore[arg-type]


def _listed(
    name: str, kind: str, space: dict[str, Any], where: str, distribution: Any
) -> Parameter:
    if any(k in space for k in ("min", "max", "step")):
        raise _fail(f"{where}.list", f"a {kind} parameter takes a list, not min/max/step")
    values = [
        _text(v, f"{where}.list[{i}]")
        for i, v in enumerate(_list(space.get("list"), f"{where}.list"))
    ]
    if not values:
        raise _fail(f"{where}.list", f"a {kind} parameter needs a non-empty list")
    if len(set(values)) != len(values):
        raise _fail(f"{where}.list", f"{values!r} holds a value twice")
    if kind == "discrete":
        for index, value in enumerate(values):
            _number(value, f"{where}.list[{index}]")
    return Parameter(name, kind, values=tuple(values), distribution=distribution)  # type: ignore[arg-type]


def _objective(value: Any, where: str) -> Objective:
    found = _mapping(value, where)
    _known(
        found,
        ("type", "goal", "objectiveMetricName", "additionalMetricNames", "metricStrategies"),
        where,
    )
    kind = _choice(found.get("type"), f"{where}.type", ("maximize", "minimize"))
    metric = found.get("objectiveMetricName")
    if not isinstance(metric, str) or not metric:
        raise _fail(f"{where}.objectiveMetricName", f"the metric to optimize, got {metric!r}")
    goal = found.get("goal")
    goal = None if goal is None else _number(goal, f"{where}.goal")
    extra = [
        _text(m, f"{where}.additionalMetricNames[{i}]")
        for i, m in enumerate(
            _list(found.get("additionalMetricNames"), f"{where}.additionalMetricNames")
        )
    ]
    if metric in extra:
        raise _fail(f"{where}.additionalMetricNames", f"{metric!r} is the objective already")
    strategies: dict[str, Strategy] = {}
    for index, item in enumerate(_list(found.get("metricStrategies"), f"{where}.metricStrategies")):
        at = f"{where}.metricStrategies[{index}]"
        entry = _mapping(item, at)
        _known(entry, ("name", "value"), at)
        named = _text(entry.get("name"), f"{at}.name")
        if named not in (metric, *extra):
            raise _fail(
                f"{at}.name", f"{named!r} is neither the objective nor an additional metric"
            )
        strategies[named] = _choice(entry.get("value"), f"{at}.value", ("min", "max", "latest"))  # type: ignore[assignment]
    default: Strategy = "max" if kind == "maximize" else "min"
    for name in (metric, *extra):
        strategies.setdefault(name, default)
    return Objective(kind, metric, goal, tuple(extra), strategies)  # type: ignore[arg-type]


def _algorithm(
    value: Any, where: str, names: tuple[str, ...], required: bool = False
) -> Algorithm | None:
    if value is None and not required:
        return None
    found = _mapping(value, where)
    _known(found, ("algorithmName", "algorithmSettings"), where)
    name = _choice(found.get("algorithmName"), f"{where}.algorithmName", names)
    settings: dict[str, str] = {}
    for index, item in enumerate(
        _list(found.get("algorithmSettings"), f"{where}.algorithmSettings")
    ):
        at = f"{where}.algorithmSettings[{index}]"
        entry = _mapping(item, at)
        _known(entry, ("name", "value"), at)
        key = _text(entry.get("name"), f"{at}.name")
        if key in settings:
            raise _fail(f"{at}.name", f"{key!r} is set twice")
        settings[key] = _text(entry.get("value"), f"{at}.value")
    return Algorithm(name, settings)


def _collector(value: Any, where: str) -> MetricsCollector:
    if value is None:
        return MetricsCollector()
    found = _mapping(value, where)
    _known(found, ("collector", "source"), where)
    collector = _mapping(found.get("collector") or {}, f"{where}.collector")
    _known(collector, ("kind",), f"{where}.collector")
    kind = collector.get("kind", "StdOut")
    if kind in ("PrometheusMetric", "Custom"):
        raise _fail(
            f"{where}.collector.kind",
            f"{kind} is a Kubernetes sidecar; Loom collects StdOut, File, TensorFlowEvent or None",
        )
    _choice(kind, f"{where}.collector.kind", ("StdOut", "File", "TensorFlowEvent", "None"))
    source = _mapping(found.get("source") or {}, f"{where}.source")
    _known(source, ("filter", "fileSystemPath", "httpGet"), f"{where}.source")
    if "httpGet" in source:
        raise _fail(f"{where}.source.httpGet", "Prometheus scraping is not offered; refused")
    filters = _filters(source.get("filter"), f"{where}.source.filter")
    path, fmt = _file_path(source.get("fileSystemPath"), f"{where}.source.fileSystemPath")
    if kind in ("File", "TensorFlowEvent") and path is None:
        raise _fail(f"{where}.source.fileSystemPath.path", f"a {kind} collector needs a path")
    if kind == "File" and fmt == "JSON" and filters:
        raise _fail(f"{where}.source.filter", "a JSON file's metrics are its keys; no filter")
    if kind in ("TensorFlowEvent", "None") and filters:
        raise _fail(f"{where}.source.filter", f"a {kind} collector takes no filter")
    return MetricsCollector(kind, filters, path, (fmt or "TEXT") if kind == "File" else None)  # type: ignore[arg-type]


def _filters(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    found = _mapping(value, where)
    _known(found, ("metricsFormat",), where)
    out = []
    for index, item in enumerate(_list(found.get("metricsFormat"), f"{where}.metricsFormat")):
        at = f"{where}.metricsFormat[{index}]"
        pattern = _text(item, at)
        try:
            groups = re.compile(pattern).groups
        except re.error as exc:
            raise _fail(at, f"not a regular expression: {exc}") from None
        if groups < 2:
            raise _fail(at, "needs two groups: the metric's name, then its value")
        out.append(pattern)
    return tuple(out)


def _file_path(value: Any, where: str) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    found = _mapping(value, where)
    _known(found, ("path", "kind", "format"), where)
    path = found.get("path")
    if path is not None:
        path = _text(path, f"{where}.path")
    if "kind" in found:
        _choice(found["kind"], f"{where}.kind", ("File", "Directory"))
    fmt = found.get("format")
    if fmt is not None:
        _choice(fmt, f"{where}.format", ("TEXT", "JSON"))
    return path, fmt


def _template(
    value: Any, where: str, parameters: tuple[Parameter, ...], warnings: list[str]
) -> tuple[tuple[TrialParameter, ...], dict[str, Any]]:
    found = _mapping(value, where)
    _known(found, ("trialParameters", "trialSpec", *_IGNORED), where)
    for key, why in _IGNORED.items():
        if key in found:
            warnings.append(f"{where}.{key} is ignored: {why}")
    names = {p.name for p in parameters}
    declared: list[TrialParameter] = []
    for index, item in enumerate(_list(found.get("trialParameters"), f"{where}.trialParameters")):
        at = f"{where}.trialParameters[{index}]"
        entry = _mapping(item, at)
        _known(entry, ("name", "reference", "description"), at)
        name = _text(entry.get("name"), f"{at}.name")
        if any(t.name == name for t in declared):
            raise _fail(f"{at}.name", f"{name!r} is declared twice")
        reference = _text(entry.get("reference"), f"{at}.reference")
        if reference not in names and reference not in METADATA_REFERENCES:
            raise _fail(
                f"{at}.reference",
                f"{reference!r} is not a parameter (spec.parameters: {', '.join(sorted(names))})",
            )
        declared.append(TrialParameter(name, reference, str(entry.get("description") or "")))
    spec_at = f"{where}.trialSpec"
    trial_spec = _mapping(found.get("trialSpec"), spec_at)
    if "apiVersion" in trial_spec or "kind" in trial_spec:
        raise _fail(
            spec_at,
            "a Kubernetes object; in Loom a trial is a job, so trialSpec is a Loom manifest "
            "(name, framework, learners, cpus, …)",
        )
    used = set(PLACEHOLDER.findall(repr(trial_spec)))
    known = {t.name for t in declared}
    for name in sorted(used - known):
        raise _fail(spec_at, f"${{trialParameters.{name}}} is not declared in trialParameters")
    for name in sorted(known - used):
        raise _fail(f"{where}.trialParameters", f"{name!r} is never used in trialSpec")
    referenced = {t.reference for t in declared}
    for parameter in parameters:
        if parameter.name not in referenced:
            warnings.append(
                f"parameter {parameter.name} is searched but no trial parameter refers to it"
            )
    return tuple(declared), trial_spec


# -- trials ------------------------------------------------------------------------------------
def _sample(spec: ExperimentSpec) -> dict[str, str]:
    """A plausible assignment, to check the template when the experiment is created."""
    by_name = {p.name: p for p in spec.parameters}
    values = {}
    for trial in spec.trial_parameters:
        parameter = by_name.get(trial.reference)
        if parameter is None:
            values[trial.name] = f"{spec.name}-0"
        elif parameter.values:
            values[trial.name] = parameter.values[0]
        else:
            low = parameter.min or 0.0
            values[trial.name] = str(int(low)) if parameter.type == "int" else repr(low)
    return values


def _check_template(
    spec: ExperimentSpec, explicit_collector: bool, at: Callable[[str], str]
) -> None:
    if explicit_collector and "evaluation_metrics" in spec.trial_spec:
        raise _fail(
            at("metricsCollectorSpec"),
            "the trialSpec has its own evaluation_metrics: give one source of metrics, not two",
        )
    trial_manifest(spec, _sample(spec))


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
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _metrics(spec: ExperimentSpec) -> dict[str, Any] | None:
    collector = spec.metrics_collector
    if collector.kind == "None":
        return None
    if collector.kind == "TensorFlowEvent":
        return {"type": "tensorboard", "in": collector.path}
    found: dict[str, Any] = {"type": "katib"}
    if collector.kind == "File":
        found.update({"in": collector.path, "format": collector.format or "TEXT"})
    if collector.filters:
        found["filters"] = list(collector.filters)
    return found


def trial_manifest(spec: ExperimentSpec, assignments: dict[str, str]) -> dict[str, Any]:
    """The trial's manifest: `${trialParameters.NAME}` replaced in every string of the template,
    the metrics collector translated into `evaluation_metrics`, checked as a manifest."""
    manifest: dict[str, Any] = _substitute(copy.deepcopy(spec.trial_spec), assignments)
    if "evaluation_metrics" not in manifest:
        metrics = _metrics(spec)
        if metrics is not None:
            manifest["evaluation_metrics"] = metrics
    try:
        manifest_from_dict(manifest)
    except ManifestError as exc:
        where = "spec.trialTemplate.trialSpec" + (f".{exc.field}" if exc.field else "")
        given = ", ".join(f"{k}={v}" for k, v in assignments.items())
        raise ManifestError(f"{exc.message} (with {given})", field=where) from exc
    return manifest
