"""Argo templates as Loom steps (pure).

A call of a `container` or `script` template is a `shell` step that runs
`loom.dialects.argo.executor` with the template's command, its inputs substituted (Loom
references where they come from other tasks), and what it outputs; input artifacts come in
through the step's `inputs`. A call of a `dag` or `steps` template is a `pipeline` step whose
spec is the template's tasks; a `steps` template's groups run one after the other. Argo's
dependency rule (a skipped task does not stop those after it) is `trigger: none_failed`; a
`depends` expression is `trigger: all_done` with a condition over the tasks' states.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from loom.dialects.argo import expressions as ex
from loom.dialects.argo.expressions import Scope, fail
from loom.domain import quantities
from loom.domain.manifest import RESERVED_ENV

COMMAND = "python -m loom.dialects.argo.executor"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_LEAF = ("container", "script")
_BODY = ("dag", "steps")
_REFUSED_KINDS = ("resource", "suspend", "data", "http", "containerSet", "plugin")
_IGNORED = {
    "metadata": "labels and annotations of a pod",
    "nodeSelector": "Loom places jobs by their resources",
    "tolerations": "Loom places jobs by their resources",
    "affinity": "Loom places jobs by their resources",
    "serviceAccountName": "a job has no Kubernetes service account",
    "automountServiceAccountToken": "a job has no Kubernetes service account",
    "securityContext": "every job runs in Loom's sandbox",
    "priority": "Loom queues jobs by their own priority",
    "priorityClassName": "Loom queues jobs by their own priority",
    "schedulerName": "Loom places jobs itself",
    "archiveLocation": "artifacts are kept in Loom's own store",
    "synchronization": "Loom has no workflow semaphores",
    "failFast": "Loom stops nothing early: each task ends as it does",
    "hostAliases": "a job has no pod network of its own",
    "metrics": "Prometheus metrics of a template are not kept",
}
_REFUSED = {
    "volumes": "Loom shares no disk between jobs; pass files as artifacts",
    "initContainers": "a job runs one command",
    "sidecars": "a job runs one command",
    "podSpecPatch": "a job is not a pod",
    "daemon": "a job ends when its command does",
    "executor": "a job has no Kubernetes service account",
}


@dataclass
class Library:
    """Where templates are found: the workflow's own, and those of WorkflowTemplates (the
    file's, or ones the owner stored)."""

    own: dict[str, dict[str, Any]]
    stored: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    parallelism: int | None = None  # the workflow's, a bound on each fan-out
    workflow_parameters: list[str] = field(default_factory=list)
    calling: list[tuple[str, str]] = field(default_factory=list)  # DAG templates being entered

    def template(self, name: str, home: str, where: str) -> dict[str, Any]:
        found = (self.stored.get(home) if home else self.own) or {}
        if name not in found:
            place = f"WorkflowTemplate {home}" if home else "the workflow"
            raise fail(where, f"{name!r} is not a template of {place}")
        return found[name]

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


def kind_of(template: dict[str, Any], where: str) -> str:
    for kind in _REFUSED_KINDS:
        if kind in template:
            raise fail(
                f"{where}.{kind}",
                f"a {kind} template is not run by Loom (it runs container, script, dag and "
                "steps templates)",
            )
    kinds = [kind for kind in (*_LEAF, *_BODY) if kind in template]
    if len(kinds) != 1:
        said = " and ".join(kinds) if kinds else "none"
        raise fail(where, f"a template has one of container, script, dag or steps (it has {said})")
    return kinds[0]


def step_name(name: str, taken: set[str]) -> str:
    clean = _UNSAFE.sub("-", name).strip("-") or "step"
    if not clean[0].isalpha():
        clean = f"s-{clean}"
    clean = clean[:63]
    base, n = clean, 2
    while clean in taken:
        clean = f"{base[:58]}-{n}"
        n += 1
    taken.add(clean)
    return clean


# -- a container or script template ------------------------------------------------------
def template_fields(template: dict[str, Any], at: str, library: Library) -> None:
    for key in template:
        if key in _REFUSED:
            raise fail(f"{at}.{key}", _REFUSED[key])
        if key in _IGNORED:
            library.warn(f"{at}.{key}: ignored; {_IGNORED[key]}")
        if key == "memoize":
            library.warn(
                f"{at}.memoize: Loom's cache is keyed by the step's inputs, not by "
                "the memoize key; its maxAge is not read"
            )


def parameters(
    template: dict[str, Any], arguments: dict[str, Any], caller: Scope, at: str, where: str
) -> dict[str, Any]:
    """The template's input parameters: the call's argument (expanded), else the template's
    value or default; one with neither is refused."""
    given = {}
    for index, argument in enumerate(arguments.get("parameters") or []):
        name = str(argument.get("name"))
        if "valueFrom" in argument:
            raise fail(
                f"{where}.arguments.parameters[{index}].valueFrom",
                "Loom has no ConfigMaps; give the value",
            )
        given[name] = ex.expand(
            argument.get("value"), caller, f"{where}.arguments.parameters[{index}]"
        )
    found: dict[str, Any] = {}
    for declared in (template.get("inputs") or {}).get("parameters") or []:
        name = str(declared.get("name"))
        if name in given:
            value = given[name]
        elif "value" in declared or "default" in declared:
            value = declared.get("value", declared.get("default"))
        else:
            raise fail(where, f"input parameter {name!r} of {at} is not given and has no default")
        enum = declared.get("enum")
        if enum and isinstance(value, str) and "${{" not in value and value not in map(str, enum):
            raise fail(f"{where}.arguments", f"{name}: {value!r} is not one of {enum}")
        found[name] = value
    return found


def artifacts(
    template: dict[str, Any], arguments: dict[str, Any], caller: Scope, at: str, where: str
) -> dict[str, dict[str, Any]]:
    """The template's input artifacts: where each goes (`path`) and where it comes from (the
    call's `from`, as the step's `inputs` take it) or its `raw` data."""
    given = {str(a.get("name")): (i, a) for i, a in enumerate(arguments.get("artifacts") or [])}
    found: dict[str, dict[str, Any]] = {}
    for index, declared in enumerate((template.get("inputs") or {}).get("artifacts") or []):
        name = str(declared.get("name"))
        spot = f"{at}.inputs.artifacts[{index}]"
        entry: dict[str, Any] = {"name": name, "path": declared.get("path")}
        source = given[name][1] if name in given else declared
        there = f"{where}.arguments.artifacts[{given[name][0]}]" if name in given else spot
        _artifact_location(declared, spot)
        _artifact_location(source, there)
        if "raw" in source:
            entry["raw"] = ex.expand(
                (source.get("raw") or {}).get("data", ""), caller, f"{there}.raw"
            )
        elif "from" in source:
            entry["from"] = ex.expand(source["from"], caller, f"{there}.from")
        elif not declared.get("optional"):
            raise fail(where, f"input artifact {name!r} of {at} is not given")
        found[name] = entry
    return found


_LOCATIONS = ("s3", "gcs", "http", "git", "hdfs", "oss", "artifactory", "azure", "hf")


def _artifact_location(source: dict[str, Any], where: str) -> None:
    for key in _LOCATIONS:
        if key in source:
            raise fail(
                f"{where}.{key}",
                "Loom fetches no artifact from outside; pass it from "
                "a task (`from`) or inline (`raw`)",
            )


def leaf(
    template: dict[str, Any],
    kind: str,
    parameters: dict[str, Any],
    artifacts: dict[str, dict[str, Any]],
    caller: Scope,
    library: Library,
    at: str,
) -> dict[str, Any]:
    """A `shell` step running the executor with the template's command."""
    body = template[kind]
    scope = Scope(
        at,
        inputs=parameters,
        artifacts={n: str(a["path"]) for n, a in artifacts.items()},
        root=caller.root,
    )
    command = [str(ex.expand(c, scope, f"{at}.{kind}.command")) for c in body.get("command") or []]
    args = [
        ex.expand(a, scope, f"{at}.{kind}.args[{i}]") for i, a in enumerate(body.get("args") or [])
    ]
    source = (
        ex.expand(body.get("source"), scope, f"{at}.script.source") if kind == "script" else None
    )
    if not command:
        raise fail(
            f"{at}.{kind}.command",
            "Loom runs no image, so it cannot know its entry point: give the command",
        )
    _container_fields(body, f"{at}.{kind}", library)
    for name, artifact in artifacts.items():
        _writable(artifact.get("path"), f"{at}.inputs.artifacts.{name}.path")
    values = {
        "template": at.split(".", 1)[1],
        "command": command,
        "args": args,
        "source": source,
        "inputs": [{k: v for k, v in a.items() if k != "from"} for a in artifacts.values()],
        "outputs": _outputs(template, at),
    }
    step: dict[str, Any] = {"kind": "shell", "command": COMMAND, "values": values}
    files = {n: a["from"] for n, a in artifacts.items() if "from" in a}
    if files:
        step["inputs"] = files
    env = _env(body.get("env") or [], f"{at}.{kind}.env", scope)
    if env:
        step["environment"] = {"env": env}
    step |= _resources(body.get("resources") or {}, f"{at}.{kind}.resources")
    return step


def _container_fields(body: dict[str, Any], where: str, library: Library) -> None:
    image = str(body.get("image") or "")
    python = re.match(r"^(?:docker\.io/)?(?:library/)?python:(\d+\.\d+)", image)
    if python is None and image:
        library.warn(
            f"{where}.image: {image} is not pulled; the command runs in a sandboxed job "
            f"with the platform's Python {PYTHON} and this machine's programs"
        )
    elif python is not None and python.group(1) != PYTHON:
        library.warn(
            f"{where}.image: {image} asks for Python {python.group(1)}; the command "
            f"runs on the platform's Python {PYTHON}"
        )
    for key in ("volumeMounts", "volumeDevices", "envFrom", "lifecycle", "ports"):
        if body.get(key):
            raise fail(
                f"{where}.{key}",
                f"a job is not a pod: it has no {key} (files come in as artifacts)",
            )
    for key in (
        "workingDir",
        "imagePullPolicy",
        "securityContext",
        "readinessProbe",
        "livenessProbe",
        "stdin",
        "tty",
        "name",
    ):
        if key in body:
            library.warn(f"{where}.{key}: ignored; a job runs in its own folder, sandboxed")


def _writable(path: Any, where: str) -> None:
    """A path a job may write: under /tmp (its own, in the sandbox) or its working folder."""
    text = str(path or "")
    if not text:
        raise fail(where, "an artifact needs a path")
    if text.startswith("/") and not text.startswith("/tmp/"):
        raise fail(
            where,
            f"{text}: in Loom's sandbox a job writes under /tmp or its own folder "
            "(a relative path)",
        )


def _outputs(template: dict[str, Any], at: str) -> dict[str, Any]:
    outputs = template.get("outputs") or {}
    parameters = []
    for index, declared in enumerate(outputs.get("parameters") or []):
        spot = f"{at}.outputs.parameters[{index}]"
        source = declared.get("valueFrom") or {}
        if "path" not in source:
            raise fail(
                f"{spot}.valueFrom",
                "a container's or script's output parameter is read from a file (`valueFrom.path`)",
            )
        _writable(source["path"], f"{spot}.valueFrom.path")
        entry = {"name": declared.get("name"), "path": source["path"]}
        if "default" in source:
            entry["default"] = source["default"]
        parameters.append(entry)
    artifacts = []
    for index, declared in enumerate(outputs.get("artifacts") or []):
        spot = f"{at}.outputs.artifacts[{index}]"
        _artifact_location(declared, spot)
        _writable(declared.get("path"), f"{spot}.path")
        artifacts.append(
            {
                "name": declared.get("name"),
                "path": declared.get("path"),
                "optional": bool(declared.get("optional")),
            }
        )
    return {"parameters": parameters, "artifacts": artifacts}


def _env(entries: list[Any], where: str, scope: Scope) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        if "valueFrom" in entry:
            raise fail(
                f"{at}.valueFrom",
                "Loom keeps no Secrets or ConfigMaps; give the value (a workflow parameter)",
            )
        name = str(entry.get("name"))
        if name in RESERVED_ENV or name.startswith("LOOM_"):
            raise fail(f"{at}.name", f"{name!r} is set by Loom for every job")
        found[name] = ex.expand(str(entry.get("value", "")), scope, f"{at}.value")
    return found


def _resources(resources: dict[str, Any], where: str) -> dict[str, Any]:
    """The limits (Loom reserves what it enforces), else the requests."""
    limits = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    found: dict[str, Any] = {}
    readers = {"cpu": ("cpus", quantities.cpus), "memory": ("memory", quantities.memory)}
    for key, value in limits.items():
        if key in readers:
            field_name, reader = readers[key]
            try:
                found[field_name] = reader(value)
            except ValueError as exc:
                raise fail(f"{where}.limits.{key}", str(exc)) from None
        elif key.endswith("/gpu"):
            found["gpus"] = int(value)
        elif key != "ephemeral-storage":
            raise fail(f"{where}.limits.{key}", "Loom gives jobs cpu, memory and GPUs")
    return found


def policies(template: dict[str, Any], at: str, library: Library) -> dict[str, Any]:
    """Retries, deadlines and memoization (Argo does not cache otherwise)."""
    found: dict[str, Any] = {"cache": "memoize" in template}
    strategy = template.get("retryStrategy")
    if strategy:
        found["retry"] = _retry(strategy, f"{at}.retryStrategy", library)
    for key, reader in (
        ("activeDeadlineSeconds", quantities.duration),
        ("timeout", quantities.duration),
    ):
        if template.get(key) is not None:
            try:
                found["timeout_s"] = reader(template[key]) or None
            except ValueError as exc:
                raise fail(f"{at}.{key}", str(exc)) from None
    if found.get("timeout_s") is None:
        found.pop("timeout_s", None)
    return found


def _retry(strategy: dict[str, Any], where: str, library: Library) -> dict[str, Any]:
    try:
        limit = int(strategy.get("limit", 0))
    except (TypeError, ValueError):
        raise fail(
            f"{where}.limit", f"a number of retries, got {strategy.get('limit')!r}"
        ) from None
    if not 0 <= limit <= 20:
        raise fail(f"{where}.limit", f"Loom retries 0 to 20 times, got {limit}")
    if strategy.get("expression"):
        raise fail(f"{where}.expression", "Loom retries every failure; it evaluates no expression")
    policy = strategy.get("retryPolicy") or "OnFailure"
    if policy not in ("Always", "OnFailure"):
        library.warn(
            f"{where}.retryPolicy: {policy} is approximated: Loom retries a step whose "
            "job failed, whatever the cause"
        )
    retry: dict[str, Any] = {"limit": limit}
    backoff = strategy.get("backoff") or {}
    try:
        if backoff.get("duration") is not None:
            retry["backoff_s"] = quantities.duration(backoff["duration"])
        if backoff.get("factor") is not None:
            retry["factor"] = float(backoff["factor"])
        if backoff.get("cap") is not None:
            retry["max_backoff_s"] = quantities.duration(backoff["cap"])
    except ValueError as exc:
        raise fail(f"{where}.backoff", str(exc)) from None
    if backoff.get("maxDuration") is not None:
        library.warn(f"{where}.backoff.maxDuration: not kept; Loom stops after `limit` retries")
    return retry
