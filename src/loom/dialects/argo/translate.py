"""Argo Workflows as Loom pipelines (pure): a Workflow, a WorkflowTemplate run as one, or a
CronWorkflow (whose schedule comes along for `loom pipelines schedule`).

The workflow's parameters are the pipeline's; its entrypoint's tasks are the pipeline's steps
(an entrypoint that is a container or script is one step); `onExit` is the pipeline's exit
handler; `activeDeadlineSeconds` its `timeout_s`. Templates named by `workflowTemplateRef` or a
task's `templateRef` come from WorkflowTemplates in the same file, or those the owner stored.
What Kubernetes alone would do (volumes, service accounts, pod placement) is refused or said
to be ignored, each with its field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from loom.dialects.argo import tasks
from loom.dialects.argo import templates as tp
from loom.dialects.argo.expressions import Scope, fail, ref
from loom.domain import quantities
from loom.domain.errors import ManifestError
from loom.domain.pipeline_dialects import Lookup, Translation

DIALECT = "argo"
KINDS = ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow")
_SPEC_IGNORED = {
    "serviceAccountName": "a job has no Kubernetes service account",
    "automountServiceAccountToken": "a job has no Kubernetes service account",
    "executor": "a job has no Kubernetes service account",
    "ttlStrategy": "Loom keeps a run until it is deleted",
    "podGC": "a job's processes end with it",
    "podMetadata": "a job has no pod labels",
    "nodeSelector": "Loom places jobs by their resources",
    "tolerations": "Loom places jobs by their resources",
    "affinity": "Loom places jobs by their resources",
    "imagePullSecrets": "no image is pulled",
    "securityContext": "every job runs in Loom's sandbox",
    "priority": "Loom queues jobs by their own priority",
    "podPriorityClassName": "Loom queues jobs by their own priority",
    "schedulerName": "Loom places jobs itself",
    "artifactRepositoryRef": "artifacts are kept in Loom's own store",
    "archiveLogs": "a job's logs are always kept",
    "workflowMetadata": "a run has no Kubernetes labels",
    "metrics": "Prometheus metrics of a workflow are not kept",
    "hostNetwork": "every job has its own network",
    "dnsPolicy": "every job has its own network",
    "synchronization": "Loom has no workflow semaphores",
    "shutdown": "stop a run with `loom pipelines halt`",
}
_SPEC_REFUSED = {
    "volumes": "Loom shares no disk between jobs; pass files as artifacts",
    "volumeClaimTemplates": "Loom shares no disk between jobs; pass files as artifacts",
    "volumeClaimGC": "Loom shares no disk between jobs",
    "hooks": "a workflow's hooks are not run by Loom; use onExit",
    "templateDefaults": "write each template's fields in it",
    "podSpecPatch": "a job is not a pod",
    "suspend": "a run starts when it is submitted (pause a schedule instead)",
}


class ArgoDialect:
    """Argo's Workflow, WorkflowTemplate and CronWorkflow as a Loom pipeline."""

    name = DIALECT
    group = "argoproj.io"

    def recognises(self, documents: Sequence[Any]) -> bool:
        return any(
            isinstance(d, dict) and str(d.get("apiVersion", "")).startswith("argoproj.io/")
            for d in documents
        )

    def translate(
        self, documents: Sequence[Any], parameters: dict[str, Any] | None, lookup: Lookup
    ) -> Translation:
        try:
            return translate(list(documents), parameters, lookup)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            # a shape the checks did not foresee: refused, never a server error
            raise ManifestError(
                f"the workflow is not one Loom can read: {type(exc).__name__}: {exc}"
            ) from None


def translate(
    documents: list[Any], parameters: dict[str, Any] | None, lookup: Lookup, require: bool = True
) -> Translation:
    """The file's workflow as a Loom spec (its parameters as given, each declared; `require`:
    each without a value given, as a run needs; a WorkflowTemplate is checked without)."""
    chosen, stored = _documents(documents)
    warnings: list[str] = []
    kind = chosen["kind"]
    schedule: dict[str, Any] = {}
    spec = dict(chosen.get("spec") or {})
    if kind == "CronWorkflow":
        schedule = _cron(spec, warnings)
        spec = dict(spec.get("workflowSpec") or {})
        warnings.append(
            "a CronWorkflow run by `loom pipelines run` runs once now; "
            "`loom pipelines schedule` (or loom apply) keeps its schedule"
        )
    spec = _with_template(spec, stored, lookup)
    library = tp.Library(own=_templates(spec.get("templates"), "spec.templates"))
    library.stored = _stored_templates(spec, stored, lookup)
    document = _workflow(spec, _name(chosen), library, parameters, require)
    values = _values(parameters, document["parameters"])
    return Translation(document, values, tuple(warnings + library.warnings), DIALECT, schedule)


def _documents(documents: list[Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The document to run (the Workflow, else the CronWorkflow, else the one
    WorkflowTemplate) and the file's WorkflowTemplates by name."""
    stored: dict[str, dict[str, Any]] = {}
    runnable: list[dict[str, Any]] = []
    for index, document in enumerate(documents):
        if not isinstance(document, dict):
            raise fail(f"document {index + 1}", "an Argo object is a mapping")
        kind = document.get("kind")
        if kind not in KINDS:
            raise fail(f"document {index + 1}.kind", f"{kind!r}: Loom runs {', '.join(KINDS)}")
        if kind in ("WorkflowTemplate", "ClusterWorkflowTemplate"):
            stored[_name(document)] = document
        else:
            runnable.append(document)
    if len(runnable) > 1:
        raise fail(
            "kind", "one Workflow or CronWorkflow a file (with the WorkflowTemplates it uses)"
        )
    if runnable:
        return runnable[0], stored
    if len(stored) == 1:
        return next(iter(stored.values())), stored
    raise fail(
        "kind", "no Workflow to run: give one (WorkflowTemplates alone are stored with loom apply)"
    )


def _name(document: dict[str, Any]) -> str:
    metadata = document.get("metadata") or {}
    given = str(metadata.get("name") or metadata.get("generateName") or "workflow")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", given).strip("-.")[:100] or "workflow"


def _cron(spec: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    schedules = list(spec.get("schedules") or []) or [spec.get("schedule")]
    if len(schedules) != 1 or not schedules[0]:
        raise fail("spec.schedules", "Loom's schedule has one cron; give one `schedule`")
    zone = spec.get("timezone")
    if zone and zone not in ("UTC", "Etc/UTC"):
        raise fail("spec.timezone", f"{zone}: Loom's crons are in UTC; write the time in UTC")
    for key in (
        "concurrencyPolicy",
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
        "stopStrategy",
        "when",
    ):
        if key in spec:
            warnings.append(
                f"spec.{key}: not kept; Loom starts a run at each time and keeps them all"
            )
    return {"cron": str(schedules[0]), "enabled": not spec.get("suspend")}


def _with_template(
    spec: dict[str, Any], stored: dict[str, dict[str, Any]], lookup: Lookup
) -> dict[str, Any]:
    """A workflow that is a WorkflowTemplate's: its spec, with the workflow's own fields over."""
    reference = spec.get("workflowTemplateRef")
    if not reference:
        return spec
    name = str(reference.get("name"))
    template = stored.get(name) or lookup("WorkflowTemplate", name)
    if template is None:
        raise fail(
            "spec.workflowTemplateRef.name",
            f"no WorkflowTemplate {name!r} in the file or stored (loom apply -f it first)",
        )
    merged = {
        **(template.get("spec") or {}),
        **{k: v for k, v in spec.items() if k != "workflowTemplateRef"},
    }
    given = {p.get("name"): p for p in (spec.get("arguments") or {}).get("parameters") or []}
    base = ((template.get("spec") or {}).get("arguments") or {}).get("parameters") or []
    merged["arguments"] = {
        "parameters": [given.pop(p.get("name"), p) for p in base] + list(given.values())
    }
    return merged


def _templates(found: Any, where: str) -> dict[str, dict[str, Any]]:
    if not isinstance(found, list):
        raise fail(where, "a list of templates")
    named: dict[str, dict[str, Any]] = {}
    for index, template in enumerate(found):
        if not isinstance(template, dict) or not template.get("name"):
            raise fail(f"{where}[{index}]", "a template needs a name")
        named[str(template["name"])] = template
    return named


def _stored_templates(
    spec: dict[str, Any], stored: dict[str, dict[str, Any]], lookup: Lookup
) -> dict[str, dict[str, dict[str, Any]]]:
    """The templates of every WorkflowTemplate a `templateRef` names, wherever it is."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    pending = list(_referenced(spec.get("templates") or []))
    while pending:
        name = pending.pop()
        if name in found:
            continue
        document = stored.get(name) or lookup("WorkflowTemplate", name)
        if document is None:
            raise fail(
                "templateRef.name",
                f"no WorkflowTemplate {name!r} in the file or stored (loom apply -f it first)",
            )
        templates = (document.get("spec") or {}).get("templates")
        found[name] = _templates(templates, f"WorkflowTemplate {name}.spec.templates")
        pending += _referenced(templates or [])
    return found


def _referenced(templates: list[Any]) -> list[str]:
    names = []
    for template in templates:
        body = (template.get("dag") or {}).get("tasks") or [
            s
            for group in template.get("steps") or []
            for s in (group if isinstance(group, list) else [group])
        ]
        names += [
            str(t["templateRef"]["name"])
            for t in body
            if isinstance(t, dict) and t.get("templateRef")
        ]
    return names


def _workflow(
    spec: dict[str, Any],
    name: str,
    library: tp.Library,
    given: dict[str, Any] | None,
    require: bool = True,
) -> dict[str, Any]:
    """The workflow's Loom spec: its parameters, its entrypoint's steps, its exit handler."""
    for key in spec:
        if key in _SPEC_REFUSED:
            raise fail(f"spec.{key}", _SPEC_REFUSED[key])
        if key in _SPEC_IGNORED:
            library.warn(f"spec.{key}: ignored; {_SPEC_IGNORED[key]}")
    arguments = spec.get("arguments") or {}
    if arguments.get("artifacts"):
        raise fail(
            "spec.arguments.artifacts",
            "a workflow's own artifacts are not fetched by Loom; make them in a first task",
        )
    parameters = _parameters(arguments.get("parameters") or [], given, require)
    library.workflow_parameters = list(parameters)
    if spec.get("parallelism"):
        library.parallelism = int(spec["parallelism"])
        library.warn("spec.parallelism: bounds each fan-out, not every task of the run together")
    entry = str(spec.get("entrypoint") or "")
    if not entry:
        raise fail("spec.entrypoint", "a workflow names the template it starts with")
    scope = Scope("spec", root=True)
    template = library.template(entry, "", "spec.entrypoint")
    kind = tp.kind_of(template, f"templates.{entry}")
    if kind in ("dag", "steps"):
        scope.inputs = _entry_inputs(template, parameters)
        document = tasks.body(template, kind, "", scope, library, f"templates.{entry}")
        tp.template_fields(template, f"templates.{entry}", library)
    else:
        step = {"name": tp.step_name(entry, set())}
        arguments_of = {
            "parameters": [{"name": n, "value": ref(f"parameters.{n}")} for n in parameters]
        }
        step |= tasks.call(
            entry, "", _only_declared(arguments_of, template), scope, library, "spec.entrypoint"
        )
        document = {"name": name, "steps": [step]}
    document["name"] = name
    document["parameters"] = parameters
    _on_exit(spec, document, scope, library)
    if spec.get("activeDeadlineSeconds") is not None:
        try:
            document["timeout_s"] = quantities.duration(spec["activeDeadlineSeconds"])
        except ValueError as exc:
            raise fail("spec.activeDeadlineSeconds", str(exc)) from None
    return document


def _parameters(
    declared: list[Any], given: dict[str, Any] | None, require: bool = True
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for index, parameter in enumerate(declared):
        name = str(parameter.get("name"))
        if "valueFrom" in parameter:
            raise fail(
                f"spec.arguments.parameters[{index}].valueFrom",
                "Loom has no ConfigMaps; give the value",
            )
        value = parameter.get("value", parameter.get("default"))
        if require and value is None and name not in (given or {}):
            raise fail(f"parameters.{name}", "the workflow needs a value for it (-p name=value)")
        found[name] = value
    return found


def _values(given: dict[str, Any] | None, declared: dict[str, Any]) -> dict[str, Any] | None:
    for name in given or {}:
        if name not in declared:
            have = ", ".join(sorted(declared)) or "none"
            raise fail(f"parameters.{name}", f"the workflow has no such parameter (it has: {have})")
    return dict(given) if given else None


def _entry_inputs(template: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    """The entrypoint's inputs: the workflow's parameters of the same names, else defaults."""
    found: dict[str, Any] = {}
    for index, declared in enumerate((template.get("inputs") or {}).get("parameters") or []):
        name = str(declared.get("name"))
        if name in parameters:
            found[name] = ref(f"parameters.{name}")
        elif "value" in declared or "default" in declared:
            found[name] = declared.get("value", declared.get("default"))
        else:
            raise fail(
                f"templates.{template.get('name')}.inputs.parameters[{index}]",
                f"the entrypoint's input {name!r} is not a workflow parameter and has no default",
            )
    return found


def _only_declared(arguments: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    declared = {p.get("name") for p in (template.get("inputs") or {}).get("parameters") or []}
    return {"parameters": [p for p in arguments["parameters"] if p["name"] in declared]}


def _on_exit(
    spec: dict[str, Any], document: dict[str, Any], scope: Scope, library: tp.Library
) -> None:
    """`onExit`: a step after every other, whatever they came to (`{{workflow.status}}` is how
    they ended)."""
    exit_template = spec.get("onExit")
    if not exit_template:
        return
    taken = {s["name"] for s in document["steps"]}
    step = {"name": tp.step_name(f"on-exit-{exit_template}", taken)}
    step |= tasks.call(
        str(exit_template), "", {}, Scope("spec.onExit", root=True), library, "spec.onExit"
    )
    document["steps"].append(step)
    document["on_exit"] = step["name"]
