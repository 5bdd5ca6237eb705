"""A KFP task's inputs as Loom values (pure): a constant, or a reference to a parameter of the
DAG's spec or to what another task of the DAG gave (`${{ steps.train.outputs.values… }}`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from loom.dialects.kfp import ir
from loom.dialects.kfp.scope import Context, Scope


@dataclass
class Bindings:
    """A task's inputs as Loom values: a reference string (`${{ … }}`), or a constant."""

    parameters: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)  # lists of artifact descriptors


def task_inputs(
    task: dict[str, Any],
    component: dict[str, Any],
    scope: Scope,
    context: Context,
    where: str,
) -> Bindings:
    inputs = task.get("inputs") or {}
    found = Bindings()
    for name, spec in (inputs.get("parameters") or {}).items():
        value = parameter(spec, scope, f"{where}.inputs.parameters.{name}")
        if value is not MISSING:
            found.parameters[name] = value
    for name, spec in (inputs.get("artifacts") or {}).items():
        value = _artifact(spec, scope, f"{where}.inputs.artifacts.{name}")
        if value is not MISSING:
            found.artifacts[name] = value
    return found


MISSING = object()


def parameter(spec: dict[str, Any], scope: Scope, where: str) -> Any:
    """One parameter input as a Loom value (a reference or a constant)."""
    if "runtimeValue" in spec:
        return (spec["runtimeValue"] or {}).get("constant")
    if "componentInputParameter" in spec:
        name = str(spec["componentInputParameter"])
        if name not in declared(scope):
            return MISSING  # the SDK passes some loop variables it never uses: nothing to bind
        value: Any = ref(f"parameters.{scope.inputs.of(name)}")
    elif "taskOutputParameter" in spec:
        out = spec["taskOutputParameter"] or {}
        value = output(
            str(out.get("producerTask")), str(out.get("outputParameterKey")), False, scope, where
        )
    elif "taskFinalStatus" in spec:
        producer = str((spec["taskFinalStatus"] or {}).get("producerTask"))
        if producer not in scope.kinds:
            raise ir.fail(f"{where}.taskFinalStatus", f"no task {producer!r} here")
        step = scope.steps.of(producer)
        return {
            "state": ref(f"steps.{step}.state"),
            "pipelineJobResourceName": ref("run.id"),
            "pipelineTaskName": producer,
            "error": {"message": ref(f"steps.{step}.message")},
        }
    else:
        raise ir.fail(where, "an input from a constant, a pipeline input or a task's output")
    selector = spec.get("parameterExpressionSelector")
    if selector:
        keys = ir.selector(str(selector), f"{where}.parameterExpressionSelector")
        value = ref(unref(value) + "".join(f".{k}" for k in keys))
    return value


def _artifact(spec: dict[str, Any], scope: Scope, where: str) -> Any:
    """One artifact input: a reference to a list of artifact descriptors, or a constant one."""
    if "componentInputArtifact" in spec:
        name = str(spec["componentInputArtifact"])
        if name not in declared(scope):
            return MISSING
        return ref(f"parameters.{scope.inputs.of(name)}")
    if "taskOutputArtifact" in spec:
        out = spec["taskOutputArtifact"] or {}
        return output(
            str(out.get("producerTask")), str(out.get("outputArtifactKey")), True, scope, where
        )
    raise ir.fail(where, "an artifact input from a task's output or a pipeline input")


def declared(scope: Scope) -> set[str]:
    definitions = scope.component.get("inputDefinitions") or {}
    return {*(definitions.get("parameters") or {}), *(definitions.get("artifacts") or {})}


def output(producer: str, key: str, artifact: bool, scope: Scope, where: str) -> Any:
    """A reference to what a task of this DAG gives (an importer's: its constant artifact)."""
    kind = scope.kinds.get(producer)
    if kind is None:
        raise ir.fail(where, f"names task {producer!r}, which this DAG does not have")
    if kind == "importer":
        return scope.imported[producer]
    step = scope.steps.of(producer)
    if kind == "dag":
        return ref(f"steps.{step}.outputs.{output_key(key, where)}")
    section = "artifacts" if artifact else "parameters"
    return ref(f"steps.{step}.outputs.values.{section}.{output_key(key, where)}")


def output_key(key: str, where: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", key):
        raise ir.fail(where, f"an output named {key!r}: Loom's names are letters, digits, - and _")
    return key


def ref(path: str) -> str:
    return f"${{{{ {path} }}}}"


def unref(reference: str) -> str:
    """The path of a reference `_ref` wrote."""
    return reference[3:-2].strip()


def input_value(task: dict[str, Any], name: str, scope: Scope, where: str) -> Any:
    spec = ((task.get("inputs") or {}).get("parameters") or {}).get(name)
    if not isinstance(spec, dict):
        raise ir.fail(f"{where}.triggerPolicy.condition", f"uses input {name!r}, not given")
    value = parameter(spec, scope, f"{where}.inputs.parameters.{name}")
    return None if value is MISSING else value


def literal(value: Any) -> str:
    """A value written into a condition: a reference as it is, a constant as a literal."""
    if isinstance(value, str) and value.startswith("${{"):
        return value
    return repr(value)
