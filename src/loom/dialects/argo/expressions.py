"""Argo's `{{…}}` variables, `when` conditions and `depends` expressions as Loom's references
and conditions (pure).

`{{inputs.parameters.x}}` is what the template was given (a Loom reference or text), a task's
outputs are its step's (`{{tasks.a.outputs.result}}` is `${{ steps.a.outputs.values.result }}`),
`{{item}}` is the fan-out's item, and workflow-wide values (its parameters, name, status) are
the run's. A variable Loom has no value for is refused, naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from loom.domain.errors import ManifestError

VARIABLE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
STATUS_WORDS = {  # Argo's node phases as Loom's step states
    "Succeeded": "SUCCEEDED",
    "Failed": "FAILED",
    "Error": "FAILED",
    "Errored": "FAILED",
    "Skipped": "SKIPPED",
    "Omitted": "SKIPPED",
    "Running": "RUNNING",
}
WORKFLOW_PREFIX = "workflow--"  # a sub-pipeline's copy of a workflow parameter


def fail(where: str, message: str) -> ManifestError:
    return ManifestError(f"{where}: {message}", field=where)


def ref(path: str) -> str:
    return f"${{{{ {path} }}}}"


@dataclass
class Scope:
    """What variables mean where a text is: the template's inputs (Loom text), its tasks'
    Loom step names and whether each runs a template of its own (a sub-pipeline), and whether
    this is the workflow's own spec (the root) or a sub-pipeline's."""

    where: str
    inputs: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # input artifact → its path
    steps: dict[str, str] = field(default_factory=dict)
    subs: set[str] = field(default_factory=set)  # tasks that run a DAG or steps template
    fanned: set[str] = field(default_factory=set)  # tasks run once per item
    root: bool = True
    item: bool = False
    artifact_inputs: dict[str, Any] = field(default_factory=dict)  # a DAG template's, passed on


def expand(value: Any, scope: Scope, where: str) -> Any:
    """A value (text, or lists and mappings of it) with its variables as Loom references."""
    if isinstance(value, str):
        return _text(value, scope, where)
    if isinstance(value, list):
        return [expand(v, scope, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: expand(v, scope, f"{where}.{k}") for k, v in value.items()}
    return value


def _text(text: str, scope: Scope, where: str) -> Any:
    whole = VARIABLE.fullmatch(text.strip())
    if whole is not None:  # a whole value keeps its type (a list for withParam)
        return variable(whole.group(1), scope, where)
    return VARIABLE.sub(lambda m: _as_text(variable(m.group(1), scope, where)), text)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value)


def variable(name: str, scope: Scope, where: str) -> Any:
    """One variable's Loom value: a reference, text, or a constant."""
    if name.startswith("="):
        raise fail(
            where,
            f"`{{{{{name}}}}}`: Argo's expression syntax is not read by Loom; use simple variables",
        )
    parts = name.split(".")
    if parts[0] == "item":
        if not scope.item:
            raise fail(where, f"`{{{{{name}}}}}`: there is no item here (no withItems/withParam)")
        return ref(name)
    if parts[0] == "inputs":
        return _input(parts, name, scope, where)
    if parts[0] == "workflow":
        return _workflow(parts, name, scope, where)
    if parts[0] in ("tasks", "steps") and len(parts) >= 3:
        return _task(parts, name, scope, where)
    raise fail(where, f"`{{{{{name}}}}}` is not a variable Loom gives a value")


def _input(parts: list[str], name: str, scope: Scope, where: str) -> Any:
    if len(parts) == 3 and parts[1] == "parameters":
        if parts[2] not in scope.inputs:
            have = ", ".join(sorted(scope.inputs)) or "none"
            raise fail(
                where,
                f"`{{{{{name}}}}}`: the template has no input parameter "
                f"{parts[2]!r} (it has: {have})",
            )
        return scope.inputs[parts[2]]
    if len(parts) == 3 and parts[1] == "artifacts" and parts[2] in scope.artifact_inputs:
        return scope.artifact_inputs[parts[2]]
    if len(parts) == 4 and parts[1] == "artifacts" and parts[3] == "path":
        if parts[2] not in scope.artifacts:
            raise fail(where, f"`{{{{{name}}}}}`: the template has no input artifact {parts[2]!r}")
        return scope.artifacts[parts[2]]
    raise fail(where, f"`{{{{{name}}}}}` is not a variable Loom gives a value")


def _workflow(parts: list[str], name: str, scope: Scope, where: str) -> Any:
    if len(parts) == 3 and parts[1] == "parameters":
        return ref(
            f"parameters.{parts[2]}" if scope.root else f"parameters.{WORKFLOW_PREFIX}{parts[2]}"
        )
    if name in ("workflow.name", "workflow.uid"):
        return ref("run.id") if scope.root else ref(f"parameters.{WORKFLOW_PREFIX}name")
    if name == "workflow.status" and scope.root:
        return ref("run.state")
    if name == "workflow.namespace":
        return "loom"
    raise fail(where, f"`{{{{{name}}}}}` is not a variable Loom gives a value here")


def _task(parts: list[str], name: str, scope: Scope, where: str) -> Any:
    task = parts[1]
    if task not in scope.steps:
        raise fail(where, f"`{{{{{name}}}}}`: there is no {parts[0][:-1]} {task!r} here")
    step = scope.steps[task]
    rest = parts[2:]
    if rest == ["status"]:
        return ref(f"steps.{step}.state")
    if rest == ["exitCode"]:
        return ref(f"steps.{step}.outputs.values.exit_code")
    if rest == ["outputs", "result"] and task not in scope.subs:
        return ref(f"steps.{step}.outputs.values.result")
    if len(rest) == 3 and rest[:2] == ["outputs", "parameters"]:
        if task in scope.subs:
            return ref(f"steps.{step}.outputs.{rest[2]}")
        return ref(f"steps.{step}.outputs.values.parameters.{rest[2]}")
    if len(rest) == 3 and rest[:2] == ["outputs", "artifacts"]:
        return artifact(task, rest[2], scope, where)
    raise fail(where, f"`{{{{{name}}}}}` is not a variable Loom gives a value")


def artifact(task: str, name: str, scope: Scope, where: str) -> Any:
    """What the step's `inputs` take for a task's output artifact: its job and path, or (for a
    sub-pipeline's) the descriptor its run gave as an output."""
    step = scope.steps[task]
    if task in scope.subs:
        return ref(f"steps.{step}.outputs.artifact--{name}")
    if task in scope.fanned:
        raise fail(
            where,
            f"an artifact of {task}, which runs once per item: Loom does not "
            "gather a fan-out's artifacts; pass them through a template that does",
        )
    return {"job_id": ref(f"steps.{step}.outputs.job_id"), "path": f"artifacts/{name}"}


# -- conditions --------------------------------------------------------------------------------
_WHEN_TOKEN = re.compile(
    r"""(?P<var>\{\{[^{}]*\}\})|(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    r"""|(?P<number>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|=~|!~|&&|\|\||[<>!()])"""
    r"""|(?P<word>[A-Za-z_][A-Za-z0-9_./:-]*)|(?P<space>\s+)|(?P<other>.)"""
)


def when(text: str, scope: Scope, where: str) -> str:
    """An Argo `when` as Loom's: variables as references, bare words as quoted text (Argo
    compares `{{…result}} == heads`), `&&`/`||`/`!` as and/or/not; a node phase compared with a
    status (`== Succeeded`) as Loom's state name."""
    out: list[str] = []
    statuses = ".status}}" in text.replace(" ", "")
    for match in _WHEN_TOKEN.finditer(text):
        kind, token = match.lastgroup, match.group()
        if kind == "var":
            value = variable(token[2:-2].strip(), scope, where)
            out.append(value if isinstance(value, str) and value.startswith("${{") else repr(value))
        elif kind == "word":
            lowered = {"true": "true", "false": "false"}.get(token.lower())
            if lowered:
                out.append(lowered)
            elif statuses and token in STATUS_WORDS:
                out.append(repr(STATUS_WORDS[token]))
            else:
                out.append(repr(token))
        elif kind == "op":
            if token in ("=~", "!~"):
                raise fail(where, f"`{token}` (a regular expression) is not evaluated by Loom")
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(token, f" {token} "))
        elif kind == "other":
            raise fail(where, f"{token!r} is not understood in a condition")
        elif kind != "space":
            out.append(token)
    return " ".join("".join(out).split())


_DEPENDS_TOKEN = re.compile(
    r"(?P<task>[A-Za-z0-9][A-Za-z0-9_-]*)(?:\.(?P<result>[A-Za-z]+))?"
    r"|(?P<op>&&|\|\||[!()])|(?P<space>\s+)|(?P<other>.)"
)
_RESULTS = {
    None: ("SUCCEEDED", "CACHED", "SKIPPED"),  # Succeeded || Skipped || Daemoned
    "Succeeded": ("SUCCEEDED", "CACHED"),
    "Failed": ("FAILED",),
    "Errored": ("FAILED",),
    "Skipped": ("SKIPPED",),
    "Omitted": ("SKIPPED",),
}


def depends(text: str, steps: dict[str, str], where: str) -> tuple[str, list[str]]:
    """An Argo `depends` as a Loom condition over the tasks' states, and the tasks it names."""
    out: list[str] = []
    named: list[str] = []
    for match in _DEPENDS_TOKEN.finditer(text):
        if match.group("task"):
            task, result = match.group("task"), match.group("result")
            if task not in steps:
                raise fail(where, f"{task!r} is not a task of this DAG")
            if result not in _RESULTS:
                raise fail(
                    where,
                    f"`{task}.{result}`: Loom tells a task's Succeeded, Failed, "
                    "Errored, Skipped and Omitted, not this",
                )
            named.append(steps[task])
            states = ", ".join(repr(s) for s in _RESULTS[result])
            out.append(f"{ref(f'steps.{steps[task]}.state')} in [{states}]")
        elif match.group("op"):
            op = match.group("op")
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(op, op))
        elif match.group("other"):
            raise fail(where, f"{match.group('other')!r} is not understood in `depends`")
    return " ".join("".join(out).split()), list(dict.fromkeys(named))
