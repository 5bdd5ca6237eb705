"""A KFP task that runs a container, as a Loom step (pure).

The step is a `shell` step that runs `python -m loom.dialects.kfp.executor`, which does inside the
job what KFP's launcher does inside a pod (see `executor.py`). What it needs travels in the
step's `values`: the container's command and args (without the lightweight component's `pip
install` preamble, which becomes the step's `environment`, built once and cached by Loom), the
task's parameters and input artifacts (references the driver resolves when the step starts),
and the types of its outputs. Input artifacts' files come in through the step's `inputs`.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

from loom.dialects.kfp import ir
from loom.domain.manifest import RESERVED_ENV

if TYPE_CHECKING:
    from loom.dialects.kfp.bindings import Bindings
    from loom.dialects.kfp.scope import Context

COMMAND = "python -m loom.dialects.kfp.executor"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
_CONTAINER = ("image", "command", "args", "env", "resources")
# Placeholders whose value is the run's own: a step using them is never taken from the cache
# of another run, as it would not be in KFP either.
_RUN_PLACEHOLDERS = ("pipeline_job_name", "pipeline_job_uuid", "pipeline_job_resource_name")
# Kubernetes settings of an executor (kfp-kubernetes) that change nothing a job on Loom does.
_IGNORED_KUBERNETES = {
    "nodeSelector": "Loom places jobs by their resources",
    "tolerations": "Loom places jobs by their resources",
    "nodeAffinity": "Loom places jobs by their resources",
    "podAffinity": "Loom places jobs by their resources",
    "imagePullSecret": "no image is pulled",
    "imagePullPolicy": "no image is pulled",
    "podMetadata": "a job has no pod labels or annotations here",
    "enabledSharedMemory": "a job's /dev/shm is the sandbox's",
}
_REFUSED_KUBERNETES = {
    "secretAsEnv": "Loom keeps no Kubernetes Secrets; pass the value as a pipeline parameter",
    "secretAsVolume": "Loom keeps no Kubernetes Secrets; pass the value as a pipeline parameter",
    "configMapAsEnv": "Loom keeps no ConfigMaps; pass the value as a pipeline parameter",
    "configMapAsVolume": "Loom keeps no ConfigMaps; pass the value as a pipeline parameter",
    "pvcMount": "Loom shares no disk between jobs; artifacts carry files from task to task",
    "genericEphemeralVolume": "a job has its own folders, not volumes",
    "emptyDirMounts": "a job has its own folders (and a private /tmp), not volumes",
    "fieldPathAsEnv": "a job is not a pod: it has no pod fields",
}


def leaf_step(
    task: str,
    label: str,
    executor: dict[str, Any],
    component: dict[str, Any],
    bindings: Bindings,
    context: Context,
    where: str,
) -> dict[str, Any]:
    """The step's kind, command, values, inputs, environment and resources."""
    container = executor.get("container")
    if not isinstance(container, dict):
        kinds = ", ".join(sorted(executor)) or "nothing"
        raise ir.fail(where, f"an executor of {kinds}: Loom runs containers and importers")
    for key in container:
        if key not in _CONTAINER:
            raise ir.fail(f"{where}.container.{key}", "a container field Loom does not run")
    command, preamble = ir.strip_preamble(list(container.get("command") or []))
    args = [str(a) for a in container.get("args") or []]
    environment = _environment(container, preamble, where, context)
    values = {
        "task": task,
        "pipeline": context.pipeline,
        "command": command,
        "args": args,
        **_inputs(component, bindings, f"{where} (task {task})"),
        "outputs": _outputs(component, task, context),
    }
    if any(p in word for word in [*command, *args] for p in _RUN_PLACEHOLDERS):
        values["run"] = "${{ run.id }}"
    step: dict[str, Any] = {"kind": "shell", "command": COMMAND, "values": values}
    if any(t["schemaTitle"] == "system.Model" for t in values["outputs"]["artifacts"].values()):
        step["model_name"] = f"{context.pipeline}-{task}"[:100]
    files = {name: ref for name, ref in values["artifacts"].items() if ref is not None}
    if files:
        step["inputs"] = files
    if environment:
        step["environment"] = environment
    step |= _resources(container.get("resources") or {}, f"{where}.container.resources", context)
    step |= _kubernetes(label, context)
    return step


def _environment(
    container: dict[str, Any], preamble: ir.Preamble | None, where: str, context: Context
) -> dict[str, Any]:
    environment: dict[str, Any] = {}
    image = str(container.get("image") or "")
    if preamble is not None:
        environment["pip"] = preamble.pip
        environment["pip_no_deps"] = preamble.no_deps
        for ignored in preamble.ignored:
            context.warn(
                f"{where}.container.command: {ignored} is not used; packages come "
                "from the platform's package index"
            )
        version = re.match(r"^(?:docker\.io/)?(?:library/)?python:(\d+\.\d+)", image)
        if version is None:
            context.warn(
                f"{where}.container.image: {image} is not pulled; the component runs "
                f"on the platform's Python {PYTHON} with its packages installed"
            )
        elif version.group(1) != PYTHON:
            context.warn(
                f"{where}.container.image: {image} asks for Python {version.group(1)};"
                f" the component runs on the platform's Python {PYTHON}"
            )
    elif image:
        context.warn(
            f"{where}.container.image: {image} is not pulled; its command runs in a "
            "sandboxed job with the platform's Python and this machine's programs"
        )
    env = _env(container.get("env") or [], f"{where}.container.env")
    if env:
        environment["env"] = env
    return {k: v for k, v in environment.items() if v}


def _env(entries: list[Any], where: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ir.fail(at, "a variable is {name, value}")
        name = entry["name"]
        if name in RESERVED_ENV or name.startswith("LOOM_"):
            raise ir.fail(f"{at}.name", f"{name!r} is set by Loom for every job")
        found[name] = str(entry.get("value", ""))
    return found


def _inputs(component: dict[str, Any], bindings: Bindings, where: str) -> dict[str, Any]:
    """The task's parameters (given, or the component's defaults) with their types, and its
    artifacts with theirs; a required input not given is refused."""
    definitions = component.get("inputDefinitions") or {}
    parameters: dict[str, Any] = {}
    types: dict[str, str] = {}
    for name, definition in (definitions.get("parameters") or {}).items():
        types[name] = str(definition.get("parameterType") or "STRING")
        if name in bindings.parameters:
            parameters[name] = bindings.parameters[name]
        elif "defaultValue" in definition:
            parameters[name] = definition["defaultValue"]
        elif not definition.get("isOptional"):
            raise ir.fail(where, f"input {name!r} is required and not given")
    artifacts: dict[str, Any] = {}
    artifact_types: dict[str, Any] = {}
    for name, definition in (definitions.get("artifacts") or {}).items():
        artifact_types[name] = _type(definition)
        if name in bindings.artifacts:
            artifacts[name] = bindings.artifacts[name]
        elif not definition.get("isOptional"):
            raise ir.fail(where, f"input artifact {name!r} is required and not given")
    return {
        "parameters": parameters,
        "types": types,
        "artifacts": artifacts,
        "artifact_types": artifact_types,
    }


def _type(definition: dict[str, Any]) -> dict[str, Any]:
    kind = definition.get("artifactType") or {}
    return {
        "schemaTitle": str(kind.get("schemaTitle") or "system.Artifact"),
        "schemaVersion": str(kind.get("schemaVersion") or "0.0.1"),
        "list": bool(definition.get("isArtifactList")),
    }


def _outputs(component: dict[str, Any], task: str, context: Context) -> dict[str, Any]:
    definitions = component.get("outputDefinitions") or {}
    parameters = {
        name: str(d.get("parameterType") or "STRING")
        for name, d in (definitions.get("parameters") or {}).items()
    }
    artifacts = {name: _type(d) for name, d in (definitions.get("artifacts") or {}).items()}
    models = sorted(n for n, t in artifacts.items() if t["schemaTitle"] == "system.Model")
    if len(models) > 1:
        context.warn(
            f"task {task}: of its models ({', '.join(models)}) the first one written "
            "is registered in Loom's model registry"
        )
    return {"parameters": parameters, "artifacts": artifacts}


def _resources(resources: dict[str, Any], where: str, context: Context) -> dict[str, Any]:
    """cpus, memory and gpus: the limit where one is given (Loom reserves what it enforces),
    else the request."""
    found: dict[str, Any] = {}
    cpu = resources.get("resourceCpuLimit") or resources.get("cpuLimit")
    cpu = cpu or resources.get("resourceCpuRequest") or resources.get("cpuRequest")
    if cpu:
        found["cpus"] = ir.cpus(cpu, f"{where}.resourceCpuLimit")
    memory = resources.get("resourceMemoryLimit") or resources.get("resourceMemoryRequest")
    if memory:
        found["memory"] = ir.memory(memory, f"{where}.resourceMemoryLimit")
    elif resources.get("memoryLimit") or resources.get("memoryRequest"):
        gigabytes = float(resources.get("memoryLimit") or resources.get("memoryRequest") or 0)
        found["memory"] = f"{round(gigabytes * 1000)}MB"
    if (resources.get("resourceCpuRequest") or resources.get("resourceMemoryRequest")) and (
        resources.get("resourceCpuLimit") or resources.get("resourceMemoryLimit")
    ):
        context.warn(
            f"{where}: a request below its limit is the limit here (Loom reserves what it enforces)"
        )
    accelerator = resources.get("accelerator") or {}
    count = accelerator.get("resourceCount") or accelerator.get("count")
    if count:
        try:
            found["gpus"] = int(count)
        except (TypeError, ValueError):
            raise ir.fail(f"{where}.accelerator.count", f"a number, got {count!r}") from None
        kind = accelerator.get("resourceType") or accelerator.get("type")
        if kind:
            context.warn(
                f"{where}.accelerator.type: {kind} is not chosen; Loom gives the "
                "job any of its GPUs"
            )
    return found


def _kubernetes(label: str, context: Context) -> dict[str, Any]:
    """What kfp-kubernetes says of this executor: a deadline becomes the step's timeout; what
    places a pod is ignored (said in the warnings); volumes and secrets are refused."""
    platforms = context.platform.get("platforms") or {}
    executors = ((platforms.get("kubernetes") or {}).get("deploymentSpec") or {}).get(
        "executors"
    ) or {}
    spec = executors.get(label) or {}
    where = f"platforms.kubernetes.deploymentSpec.executors.{label}"
    found: dict[str, Any] = {}
    for key, value in spec.items():
        if key in _REFUSED_KUBERNETES:
            raise ir.fail(f"{where}.{key}", _REFUSED_KUBERNETES[key])
        if key in _IGNORED_KUBERNETES:
            context.warn(f"{where}.{key}: ignored; {_IGNORED_KUBERNETES[key]}")
        elif key == "activeDeadlineSeconds":
            found["timeout_s"] = float(value)
        else:
            raise ir.fail(f"{where}.{key}", "a Kubernetes setting Loom does not know")
    return found
