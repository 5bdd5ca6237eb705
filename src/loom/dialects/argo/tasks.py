"""Argo's DAG tasks and steps as Loom steps, and a call of any template (pure).

Each task or step calls a template: a container or script one is a `shell` step (see
`templates.leaf`), a DAG or steps one a `pipeline` step holding the template's own tasks. A
DAG's `dependencies` are the step's `after` (with Argo's rule: a skipped task does not stop
those after it, `trigger: none_failed`); `depends` is `trigger: all_done` with a condition over
the tasks' states; a steps template's groups each wait for the group before. `when`,
`withItems`, `withParam` and `withSequence` are the step's `when` and `for_each`.
"""

from __future__ import annotations

import json
from typing import Any

from loom.dialects.argo import expressions as ex
from loom.dialects.argo import templates as tp
from loom.dialects.argo.expressions import Scope, fail, ref
from loom.domain.pipeline import MAX_NESTING


def call(
    template_name: str,
    home: str,
    arguments: dict[str, Any],
    caller: Scope,
    library: tp.Library,
    where: str,
) -> dict[str, Any]:
    """The step fields of a call of a template with `arguments`, expanded in the caller's
    scope: its kind, what that kind takes, and the template's retries and deadline."""
    template = library.template(template_name, home, where)
    at = f"templates.{template_name}" if not home else f"{home}.templates.{template_name}"
    kind = tp.kind_of(template, at)
    tp.template_fields(template, at, library)
    parameters = tp.parameters(template, arguments, caller, at, where)
    artifacts = tp.artifacts(template, arguments, caller, at, where)
    if kind in ("container", "script"):
        step = tp.leaf(template, kind, parameters, artifacts, caller, library, at)
    else:
        called = (home, template_name)
        if called in library.calling:
            raise fail(
                where,
                f"{at} calls itself: a recursive template is not run by Loom (a "
                "run's steps are known when it starts); unroll it",
            )
        if len(library.calling) >= MAX_NESTING:
            raise fail(where, f"templates nested more than {MAX_NESTING} deep")
        library.calling.append(called)
        try:
            step = _body_call(template, kind, home, parameters, artifacts, caller, library, at)
        finally:
            library.calling.pop()
    return step | tp.policies(template, at, library)


def _body_call(
    template: dict[str, Any],
    kind: str,
    home: str,
    parameters: dict[str, Any],
    artifacts: dict[str, dict[str, Any]],
    caller: Scope,
    library: tp.Library,
    at: str,
) -> dict[str, Any]:
    """A `pipeline` step whose spec is the template's tasks, given its inputs and (under the
    `workflow--` prefix) the workflow's parameters and name."""
    inner = Scope(at, root=False)
    inner.inputs = {n: ref(f"parameters.{n}") for n in parameters}
    inner.artifact_inputs = {n: ref(f"parameters.artifact--{n}") for n in artifacts}
    document = body(template, kind, home, inner, library, at)
    passed = dict(parameters)
    for name, artifact in artifacts.items():
        passed[f"artifact--{name}"] = artifact.get("from")
    prefix = ex.WORKFLOW_PREFIX
    for name in library.workflow_parameters:
        passed[f"{prefix}{name}"] = ref(
            f"parameters.{name}" if caller.root else f"parameters.{prefix}{name}"
        )
    passed[f"{prefix}name"] = ref("run.id" if caller.root else f"parameters.{prefix}name")
    document["parameters"] = dict.fromkeys(passed)
    return {"kind": "pipeline", "pipeline": document, "parameters": passed}


def body(
    template: dict[str, Any], kind: str, home: str, scope: Scope, library: tp.Library, at: str
) -> dict[str, Any]:
    """The template's tasks (or steps) as a Loom spec, with its outputs."""
    if kind == "dag":
        steps = _dag(template["dag"], home, scope, library, f"{at}.dag")
    else:
        steps = _steps(template["steps"], home, scope, library, f"{at}.steps")
    name = tp.step_name(at.rsplit(".", 1)[-1], set())
    document: dict[str, Any] = {"name": name, "steps": steps}
    outputs = _outputs(template, scope, at)
    if outputs:
        document["outputs"] = outputs
    if template.get("parallelism"):
        library.warn(
            f"{at}.parallelism: bounds each fan-out of the template, not all its tasks together"
        )
    return document


# -- DAG tasks ---------------------------------------------------------------------------------
_TASK_FIELDS = (
    *("name", "template", "templateRef", "arguments", "dependencies", "depends", "when"),
    *("withItems", "withParam", "withSequence", "continueOn"),
)


def _dag(
    dag: dict[str, Any], home: str, scope: Scope, library: tp.Library, where: str
) -> list[dict[str, Any]]:
    tasks = dag.get("tasks") or []
    if not isinstance(tasks, list) or not tasks:
        raise fail(f"{where}.tasks", "a DAG needs at least one task")
    if dag.get("failFast") is not None or dag.get("target"):
        library.warn(
            f"{where}: failFast and target are not read; every task runs as its dependencies allow"
        )
    _name_all(tasks, scope, f"{where}.tasks", library, home)
    steps = []
    for index, task in enumerate(tasks):
        at = f"{where}.tasks[{index}]"
        step = _one(task, home, scope, library, at)
        after = [
            scope.steps[str(d)] for d in task.get("dependencies") or [] if _known(d, scope, at)
        ]
        condition = None
        if task.get("depends"):
            if task.get("dependencies"):
                raise fail(at, "give dependencies or depends, not both")
            condition, after = ex.depends(str(task["depends"]), scope.steps, f"{at}.depends")
            step["trigger"] = "all_done"
        elif after:
            step["trigger"] = "none_failed"
        if after:
            step["after"] = after
        _condition(step, condition)
        steps.append(step)
    return steps


def _known(name: Any, scope: Scope, where: str) -> bool:
    if str(name) not in scope.steps:
        raise fail(f"{where}.dependencies", f"{name!r} is not a task of this DAG")
    return True


def _name_all(items: list[Any], scope: Scope, where: str, library: tp.Library, home: str) -> None:
    """Every task's Loom name, and which ones run a sub-pipeline or once per item, before any
    is translated: a task may refer to one written after it."""
    taken = set(scope.steps.values())
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if not isinstance(item, dict) or not item.get("name"):
            raise fail(at, "a task needs a name")
        name = str(item["name"])
        if name in scope.steps:
            raise fail(f"{at}.name", f"{name!r} is the name of another task here")
        scope.steps[name] = tp.step_name(name, taken)
        template_name, template_home = _target(item, at)
        place = template_home or home
        named = f"{place}.templates.{template_name}" if place else f"templates.{template_name}"
        kind = tp.kind_of(library.template(template_name, place, at), named)
        if kind in ("dag", "steps"):
            scope.subs.add(name)
        if any(k in item for k in ("withItems", "withParam", "withSequence")):
            scope.fanned.add(name)


def _target(item: dict[str, Any], where: str) -> tuple[str, str]:
    """The template a task calls, and the WorkflowTemplate it is in ('' for the workflow's)."""
    if item.get("templateRef"):
        found = item["templateRef"]
        if found.get("clusterScope"):
            raise fail(
                f"{where}.templateRef.clusterScope",
                "Loom keeps WorkflowTemplates per user; leave clusterScope out",
            )
        return str(found.get("template")), str(found.get("name"))
    if item.get("inline"):
        raise fail(f"{where}.inline", "an inline template: name it in the workflow's templates")
    if not item.get("template"):
        raise fail(where, "a task names its template (`template` or `templateRef`)")
    return str(item["template"]), ""


def _one(
    item: dict[str, Any], home: str, scope: Scope, library: tp.Library, where: str
) -> dict[str, Any]:
    """One task or step: its name, its call, `when` and fan-out."""
    for key in item:
        if key in ("onExit", "hooks"):
            raise fail(
                f"{where}.{key}",
                "a task's own exit hook is not run by Loom; use the workflow's onExit",
            )
        if key not in _TASK_FIELDS:
            raise fail(f"{where}.{key}", "a task field Loom does not know")
    template_name, template_home = _target(item, where)
    fanned = str(item["name"]) in scope.fanned
    caller = Scope(
        scope.where,
        scope.inputs,
        scope.artifacts,
        scope.steps,
        scope.subs,
        scope.fanned,
        scope.root,
        item=fanned,
        artifact_inputs=scope.artifact_inputs,
    )
    step: dict[str, Any] = {"name": scope.steps[str(item["name"])]}
    step |= call(
        template_name, template_home or home, item.get("arguments") or {}, caller, library, where
    )
    if fanned:
        step["for_each"] = _items(item, scope, where)
        if library.parallelism:
            step["parallelism"] = library.parallelism
    if item.get("when"):
        step["when"] = ex.when(str(item["when"]), caller, f"{where}.when")
    if (item.get("continueOn") or {}).get("failed") or (item.get("continueOn") or {}).get("error"):
        library.warn(
            f"{where}.continueOn: the tasks after it run, but the run still ends "
            "FAILED if it fails (Loom does not ignore a failure)"
        )
    return step


def _items(item: dict[str, Any], scope: Scope, where: str) -> Any:
    if "withItems" in item:
        return ex.expand(item["withItems"], scope, f"{where}.withItems")
    if "withParam" in item:
        found = ex.expand(item["withParam"], scope, f"{where}.withParam")
        if isinstance(found, str) and not found.startswith("${{"):
            try:
                return json.loads(found)
            except ValueError:
                raise fail(f"{where}.withParam", f"not a JSON list: {found!r}") from None
        return found
    sequence = item["withSequence"] or {}
    if sequence.get("format"):
        raise fail(f"{where}.withSequence.format", "Loom counts in plain numbers")
    try:
        start = int(sequence.get("start", 0))
        end = (
            int(sequence["end"]) if "end" in sequence else start + int(sequence.get("count", 0)) - 1
        )
    except (TypeError, ValueError):
        raise fail(f"{where}.withSequence", "start, end and count are numbers here") from None
    step = 1 if end >= start else -1
    return [str(n) for n in range(start, end + step, step)]


def _condition(step: dict[str, Any], extra: str | None) -> None:
    if extra is None:
        return
    step["when"] = f"({extra}) and ({step['when']})" if step.get("when") else extra


# -- steps templates ---------------------------------------------------------------------------
def _steps(
    groups: Any, home: str, scope: Scope, library: tp.Library, where: str
) -> list[dict[str, Any]]:
    """Each group of steps after the group before it (a skipped step does not stop it)."""
    if not isinstance(groups, list) or not groups:
        raise fail(where, "a steps template needs at least one group of steps")
    flat = []
    for index, group in enumerate(groups):
        members = group if isinstance(group, list) else [group]
        flat += [(index, member) for member in members]
    _name_all([m for _, m in flat], scope, where, library, home)
    steps: list[dict[str, Any]] = []
    before: list[str] = []
    for index, group in enumerate(groups):
        members = group if isinstance(group, list) else [group]
        names = []
        for offset, member in enumerate(members):
            step = _one(member, home, scope, library, f"{where}[{index}][{offset}]")
            if before:
                step["after"], step["trigger"] = list(before), "none_failed"
            steps.append(step)
            names.append(step["name"])
        before = names
    return steps


def _outputs(template: dict[str, Any], scope: Scope, at: str) -> dict[str, Any]:
    """A DAG's (or steps template's) outputs: its tasks' parameters and artifacts."""
    outputs = template.get("outputs") or {}
    found: dict[str, Any] = {}
    for index, declared in enumerate(outputs.get("parameters") or []):
        spot = f"{at}.outputs.parameters[{index}]"
        source = (declared.get("valueFrom") or {}).get("parameter")
        if source is None:
            raise fail(
                f"{spot}.valueFrom",
                "a DAG's output parameter is one of its tasks' (`valueFrom.parameter`)",
            )
        found[str(declared.get("name"))] = ex.expand(source, scope, f"{spot}.valueFrom.parameter")
    for index, declared in enumerate(outputs.get("artifacts") or []):
        spot = f"{at}.outputs.artifacts[{index}]"
        if "from" not in declared:
            raise fail(spot, "a DAG's output artifact is one of its tasks' (`from`)")
        found[f"artifact--{declared.get('name')}"] = ex.expand(
            declared["from"], scope, f"{spot}.from"
        )
    return found
