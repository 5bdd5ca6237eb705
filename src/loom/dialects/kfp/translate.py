"""KFP's pipeline IR as a Loom pipeline (pure): the dialect `loom pipelines run` and the KFP
API hand a compiled pipeline to.

Every DAG of the IR (the root, a nested pipeline, the inside of `dsl.If`, `dsl.ParallelFor` or
`dsl.ExitHandler`) becomes a Loom spec; a task that runs a DAG becomes a `pipeline` step holding
it (a fan-out of sub-runs for a loop), and a task that runs a container becomes a `shell` step
that runs `loom.dialects.kfp.executor` with what the task's executor needs as its `values`.
Task inputs become references (`${{ steps.train.outputs.values.parameters.Output }}`), trigger
conditions become `when:`, `ALL_UPSTREAM_TASKS_COMPLETED` becomes `trigger: all_done`, retry
policies, caching options and resources become the step's own. What Loom cannot honour is
refused naming the task and field; what it approximates is said in the warnings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from loom.dialects.kfp import ir
from loom.dialects.kfp.bindings import (
    Bindings,
    declared,
    input_value,
    literal,
    output,
    output_key,
    ref,
    task_inputs,
    unref,
)
from loom.dialects.kfp.executors import leaf_step
from loom.dialects.kfp.scope import Context, Scope
from loom.domain.errors import ManifestError
from loom.domain.pipeline import NAME
from loom.domain.pipeline_dialects import Lookup, Translation

DIALECT = "kfp"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class KfpDialect:
    """`kfp.compiler`'s YAML (or a PipelineJob) as a Loom pipeline."""

    name = DIALECT
    group = "pipelines.kubeflow.org"

    def recognises(self, documents: Sequence[Any]) -> bool:
        return ir.recognises(documents)

    def translate(
        self, documents: Sequence[Any], parameters: dict[str, Any] | None, lookup: Lookup
    ) -> Translation:
        try:
            spec, platform, runtime = ir.split(documents)
            given = {**runtime, **(parameters or {})}
            return translate(spec, platform, given or None)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            # a shape the checks above did not foresee: refused, never a server error
            raise ManifestError(
                f"the pipeline is not a compiled KFP pipeline Loom can read: "
                f"{type(exc).__name__}: {exc}"
            ) from None


def translate(
    spec: dict[str, Any],
    platform: dict[str, Any],
    parameters: dict[str, Any] | None,
    require: bool = True,
) -> Translation:
    """The pipeline spec (and platform spec) as a Loom spec, with the run's parameters typed
    as the pipeline declares them (`require`: each required one given, as a run needs; an
    uploaded pipeline is checked without)."""
    info = spec.get("pipelineInfo") or {}
    pipeline = _pipeline_name(str(info.get("name") or "pipeline"))
    context = Context(spec, platform, pipeline)
    _top_level(spec, context)
    root = spec.get("root")
    if not isinstance(root, dict) or not isinstance(root.get("dag"), dict):
        raise ir.fail("root.dag", "a compiled pipeline's root is a DAG")
    scope = Scope("root", root)
    document = _dag(scope, context, pipeline, str(info.get("description") or ""))
    defaults, values = _root_parameters(root, parameters, scope, require)
    document["parameters"] = defaults
    _platform_left(platform, context)
    return Translation(document, values, tuple(context.warnings), DIALECT)


def _pipeline_name(name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "pipeline"
    return clean[:100] if NAME.fullmatch(clean[:100]) else "pipeline"


def _top_level(spec: dict[str, Any], context: Context) -> None:
    known = (*ir.INFORMATIONAL, "deploymentSpec", "components", "root", "defaultPipelineRoot")
    for key in spec:
        if key not in known:
            context.warn(f"{key}: not read by Loom (it says nothing Loom acts on)")
    if spec.get("defaultPipelineRoot"):
        context.warn(
            "defaultPipelineRoot: artifacts are kept in Loom's own store (each under its job), "
            "not under a pipeline root"
        )


def _root_parameters(
    root: dict[str, Any], given: dict[str, Any] | None, scope: Scope, require: bool
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The root's parameters with their defaults (typed), and the run's values (typed, each
    declared; a required one without a value refused)."""
    definitions = (root.get("inputDefinitions") or {}).get("parameters") or {}
    if (root.get("inputDefinitions") or {}).get("artifacts"):
        names = ", ".join(root["inputDefinitions"]["artifacts"])
        raise ir.fail(
            "root.inputDefinitions.artifacts",
            f"a pipeline whose own inputs are artifacts ({names}) cannot be run by itself; "
            "use dsl.importer inside it",
        )
    defaults: dict[str, Any] = {}
    for name, definition in definitions.items():
        kind = str(definition.get("parameterType") or "STRING")
        where = f"root.inputDefinitions.parameters.{name}"
        defaults[scope.inputs.of(name)] = ir.coerce(definition.get("defaultValue"), kind, where)
    values: dict[str, Any] = {}
    for name, value in (given or {}).items():
        if name not in definitions:
            have = ", ".join(sorted(definitions)) or "none"
            raise ir.fail(f"parameters.{name}", f"the pipeline has no such input (it has: {have})")
        kind = str(definitions[name].get("parameterType") or "STRING")
        values[scope.inputs.of(name)] = ir.coerce(value, kind, f"parameters.{name}")
    for name, definition in definitions.items():
        loom_name = scope.inputs.of(name)
        missing = values.get(loom_name, defaults[loom_name]) is None
        if require and missing and not definition.get("isOptional"):
            raise ir.fail(f"parameters.{name}", "the pipeline needs a value for it (-p name=value)")
    return defaults, values or None


def _dag(scope: Scope, context: Context, name: str, description: str = "") -> dict[str, Any]:
    """One DAG as a Loom spec: a step per task (importers are constants, not steps), and its
    outputs."""
    dag = scope.component["dag"]
    tasks = dag.get("tasks") or {}
    if not isinstance(tasks, dict) or not tasks:
        raise ir.fail(f"{scope.where}.dag.tasks", "a DAG needs at least one task")
    for task_name, task in tasks.items():
        where = f"{scope.where}.dag.tasks.{task_name}"
        component = context.component(_component_ref(task, where), f"{where}.componentRef.name")
        if "dag" in component:
            scope.kinds[task_name] = "dag"
        elif _is_importer(component, context, where):
            scope.kinds[task_name] = "importer"
        else:
            scope.kinds[task_name] = "executor"
        scope.steps.of(task_name)
    for task_name, task in tasks.items():
        if scope.kinds[task_name] == "importer":
            where = f"{scope.where}.dag.tasks.{task_name}"
            scope.imported[task_name] = _importer(task, scope, context, where)
    steps = [
        _task(task_name, task, scope, context)
        for task_name, task in tasks.items()
        if scope.kinds[task_name] != "importer"
    ]
    if not steps:
        raise ir.fail(f"{scope.where}.dag.tasks", "a DAG of importers only runs nothing")
    document: dict[str, Any] = {"name": name, "steps": steps}
    if description:
        document["description"] = description
    outputs = _dag_outputs(dag, scope)
    if outputs:
        document["outputs"] = outputs
    return document


def _component_ref(task: dict[str, Any], where: str) -> str:
    ref = (task.get("componentRef") or {}).get("name")
    if not isinstance(ref, str):
        raise ir.fail(f"{where}.componentRef.name", "a task names its component")
    return ref


def _is_importer(component: dict[str, Any], context: Context, where: str) -> bool:
    label = component.get("executorLabel")
    if not isinstance(label, str):
        raise ir.fail(where, "its component has neither a DAG nor an executor")
    return "importer" in context.executor(label, f"{where}.componentRef")


# -- one task ----------------------------------------------------------------------------------
def _task(name: str, task: dict[str, Any], scope: Scope, context: Context) -> dict[str, Any]:
    where = f"{scope.where}.dag.tasks.{name}"
    _known_task_fields(task, where, context)
    component = context.component(_component_ref(task, where), f"{where}.componentRef.name")
    step: dict[str, Any] = {"name": scope.steps.of(name)}
    given = task_inputs(task, component, scope, context, where)
    if scope.kinds[name] == "dag":
        step |= _dag_step(name, task, component, given, scope, context, where)
    else:
        label = str(component["executorLabel"])
        executor = context.executor(label, f"{where}.componentRef")
        step |= leaf_step(
            name, label, executor, component, given, context, f"deploymentSpec.executors.{label}"
        )
    after = [
        scope.steps.of(str(t))
        for t in task.get("dependentTasks") or []
        if scope.kinds.get(str(t)) not in (None, "importer")
    ]
    if after:
        step["after"] = after
    _policies(task, step, scope, context, where)
    return step


_TASK_FIELDS = (
    *("taskInfo", "componentRef", "inputs", "dependentTasks", "cachingOptions"),
    *("triggerPolicy", "retryPolicy", "parameterIterator", "iteratorPolicy"),
)


def _known_task_fields(task: dict[str, Any], where: str, context: Context) -> None:
    for key in task:
        if key == "artifactIterator":
            raise ir.fail(
                f"{where}.artifactIterator",
                "a ParallelFor over a list of artifacts is not run by Loom; loop over "
                "parameters (their URIs) instead",
            )
        if key not in _TASK_FIELDS:
            raise ir.fail(f"{where}.{key}", "a task field Loom does not know")


def _policies(
    task: dict[str, Any], step: dict[str, Any], scope: Scope, context: Context, where: str
) -> None:
    """Caching, retries, the trigger and the condition, as Loom's step fields."""
    if step.get("kind") != "pipeline":
        caching = task.get("cachingOptions") or {}
        step["cache"] = bool(caching.get("enableCache", False))
        if caching.get("cacheKey"):
            context.warn(
                f"{where}.cachingOptions.cacheKey: ignored; Loom keys its cache by "
                "the task's inputs and code"
            )
    retry = task.get("retryPolicy")
    if retry:
        step["retry"] = _retry(retry, f"{where}.retryPolicy")
    trigger = task.get("triggerPolicy") or {}
    strategy = trigger.get("strategy") or "ALL_UPSTREAM_TASKS_SUCCEEDED"
    if strategy == "ALL_UPSTREAM_TASKS_COMPLETED":
        step["trigger"] = "all_done"
    elif strategy != "ALL_UPSTREAM_TASKS_SUCCEEDED":
        raise ir.fail(f"{where}.triggerPolicy.strategy", f"{strategy!r} is not a strategy")
    if trigger.get("condition"):
        step["when"] = ir.condition(
            str(trigger["condition"]),
            lambda name: literal(input_value(task, name, scope, where)),
            f"{where}.triggerPolicy.condition",
        )


def _retry(policy: dict[str, Any], where: str) -> dict[str, Any]:
    limit = policy.get("maxRetryCount", 0)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit <= 20:
        raise ir.fail(f"{where}.maxRetryCount", f"Loom retries 0 to 20 times, got {limit!r}")
    retry: dict[str, Any] = {"limit": limit}
    if policy.get("backoffDuration") is not None:
        retry["backoff_s"] = ir.seconds(policy["backoffDuration"], f"{where}.backoffDuration")
    if policy.get("backoffFactor") is not None:
        factor = float(policy["backoffFactor"])
        if not 1.0 <= factor <= 10.0:
            raise ir.fail(f"{where}.backoffFactor", f"between 1 and 10 in Loom, got {factor:g}")
        retry["factor"] = factor
    if policy.get("backoffMaxDuration") is not None:
        longest = ir.seconds(policy["backoffMaxDuration"], f"{where}.backoffMaxDuration")
        retry["max_backoff_s"] = longest
    return retry


# -- a task that runs a DAG --------------------------------------------------------------------
def _dag_step(
    name: str,
    task: dict[str, Any],
    component: dict[str, Any],
    bound: Bindings,
    scope: Scope,
    context: Context,
    where: str,
) -> dict[str, Any]:
    """A `pipeline` step holding the component's DAG; a loop is one sub-run per item."""
    component_name = _component_ref(task, where)
    inner = Scope(f"components.{component_name}", component)
    for input_name in declared(inner):
        inner.inputs.of(input_name)
    document = _dag(inner, context, _pipeline_name(name)[:100])
    document["parameters"] = {inner.inputs.of(n): None for n in sorted(declared(inner))}
    given = {
        inner.inputs.of(n): v
        for n, v in {**bound.parameters, **bound.artifacts}.items()
        if n in declared(inner)
    }
    step: dict[str, Any] = {"kind": "pipeline", "pipeline": document, "parameters": given}
    iterator = task.get("parameterIterator")
    if iterator:
        at = f"{where}.parameterIterator"
        items = iterator.get("items") or {}
        if "raw" in items:
            step["for_each"] = _raw_items(items["raw"], f"{at}.items.raw")
        elif "inputParameter" in items:
            source = str(items["inputParameter"])
            if source not in bound.parameters:
                raise ir.fail(
                    f"{at}.items.inputParameter",
                    f"the loop's input {source!r} is not given to it here ({scope.where} has no "
                    "such input: the DAG the SDK wrote cannot run on KFP either)",
                )
            step["for_each"] = bound.parameters[source]
        else:
            raise ir.fail(f"{at}.items", "a loop over `raw` items or an input parameter")
        item_input = str(iterator.get("itemInput") or "")
        if item_input not in declared(inner):
            raise ir.fail(f"{at}.itemInput", f"{item_input!r} is not an input of the loop")
        given[inner.inputs.of(item_input)] = ref("item")
        limit = (task.get("iteratorPolicy") or {}).get("parallelismLimit")
        if limit:
            step["parallelism"] = int(limit)
    return step


def _raw_items(raw: Any, where: str) -> list[Any]:
    try:
        found = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise ir.fail(where, f"a JSON list is expected, got {raw!r}") from None
    if not isinstance(found, list):
        raise ir.fail(where, f"a JSON list is expected, got {raw!r}")
    return found


def _dag_outputs(dag: dict[str, Any], scope: Scope) -> dict[str, Any]:
    """The DAG's outputs as its Loom spec's `outputs` (a OneOf: the first branch that ran)."""
    outputs = dag.get("outputs") or {}
    found: dict[str, Any] = {}
    where = f"{scope.where}.dag.outputs"
    for name, spec in (outputs.get("parameters") or {}).items():
        at = f"{where}.parameters.{name}"
        if "valueFromParameter" in spec:
            selectors = [spec["valueFromParameter"]]
        else:
            selectors = (spec.get("valueFromOneof") or {}).get("parameterSelectors") or []
        found[output_key(name, at)] = _first_of(
            [
                output(
                    str(s.get("producerSubtask")),
                    str(s.get("outputParameterKey")),
                    False,
                    scope,
                    at,
                )
                for s in selectors
            ],
            at,
        )
    for name, spec in (outputs.get("artifacts") or {}).items():
        at = f"{where}.artifacts.{name}"
        selectors = spec.get("artifactSelectors") or []
        if output_key(name, at) in found:
            raise ir.fail(at, "a DAG output parameter has the same name")
        found[name] = _first_of(
            [
                output(
                    str(s.get("producerSubtask")), str(s.get("outputArtifactKey")), True, scope, at
                )
                for s in selectors
            ],
            at,
        )
    return found


def _first_of(values: list[Any], where: str) -> Any:
    if not values:
        raise ir.fail(where, "an output that names no task")
    if len(values) == 1 or not all(isinstance(v, str) for v in values):
        return values[0]
    return ref(" || ".join(unref(v) for v in values))


# -- importers ---------------------------------------------------------------------------------
def _importer(
    task: dict[str, Any], scope: Scope, context: Context, where: str
) -> list[dict[str, Any]]:
    """An importer's artifact as a constant descriptor: a `loom://jobs/JOB/PATH` URI brings
    that job's files (the owner's only, checked when a step uses it); another URI is passed
    on as the artifact's URI alone."""
    component = context.component(_component_ref(task, where), f"{where}.componentRef.name")
    label = str(component["executorLabel"])
    spec = context.executor(label, where)["importer"]
    at = f"deploymentSpec.executors.{label}.importer"
    uri_spec = spec.get("artifactUri") or {}
    if "constant" in uri_spec:
        uri = uri_spec["constant"]
    else:
        name = str(uri_spec.get("runtimeParameter") or "uri")
        binding = ((task.get("inputs") or {}).get("parameters") or {}).get(name) or {}
        uri = (binding.get("runtimeValue") or {}).get("constant")
    if not isinstance(uri, str) or uri.startswith("${{"):
        raise ir.fail(
            f"{at}.artifactUri",
            "an importer's URI must be known when the run starts (a constant); Loom does not "
            "import from a URI computed by another task",
        )
    kind = spec.get("typeSchema") or {}
    descriptor: dict[str, Any] = {
        "name": "artifact",
        "uri": uri,
        "metadata": spec.get("metadata") or {},
        "type": kind.get("schemaTitle") or "system.Artifact",
        "job_id": None,
    }
    match = re.fullmatch(r"loom://jobs/([A-Za-z0-9_-]+)/(.+)", uri)
    if match:
        descriptor["job_id"], descriptor["path"] = match.group(1), match.group(2).strip("/")
    else:
        context.warn(
            f"{where}: {uri} is passed on as the artifact's URI only; Loom fetches the files "
            "of loom://jobs/JOB/PATH artifacts (an earlier run's), not of other stores"
        )
    if spec.get("reimport"):
        context.warn(f"{at}.reimport: ignored; Loom records no artifact lineage to reimport into")
    return [descriptor]


# -- the platform spec -------------------------------------------------------------------------
def _platform_left(platform: dict[str, Any], context: Context) -> None:
    """Kubernetes settings the executors did not take (the executors read theirs)."""
    for name in platform.get("platforms") or {}:
        if name != "kubernetes":
            raise ir.fail(f"platforms.{name}", "Loom reads only the kubernetes platform spec")
