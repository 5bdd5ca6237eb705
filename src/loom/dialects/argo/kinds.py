"""Argo's kinds through `loom apply`, `loom get` and `loom delete -f`: a Workflow is a pipeline
run, a WorkflowTemplate is kept for the workflows that name it (and checked as one would run),
a CronWorkflow is a pipeline schedule. Their status is Argo's: a phase, times, a message, and a
node per task (those of DAG templates' sub-runs too)."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from loom.api.routers.pipelines import steps_json
from loom.dialects.argo import templates as tp
from loom.dialects.argo.translate import translate
from loom.dialects.kinds import (
    Applied,
    Context,
    Document,
    Immutable,
    KindInfo,
    Note,
    Stored,
    timestamp,
)
from loom.domain.cron import parse_cron
from loom.domain.errors import Conflict, ManifestError, NotFound
from loom.domain.pipeline_dialects import Lookup

GROUP = "argoproj.io"
WORKFLOW = KindInfo(GROUP, ("v1alpha1",), "Workflow", "workflows", ("wf",))
TEMPLATE = KindInfo(GROUP, ("v1alpha1",), "WorkflowTemplate", "workflowtemplates", ("wftmpl",))
CLUSTER_TEMPLATE = KindInfo(
    GROUP, ("v1alpha1",), "ClusterWorkflowTemplate", "clusterworkflowtemplates", ("cwftmpl",)
)
CRON = KindInfo(GROUP, ("v1alpha1",), "CronWorkflow", "cronworkflows", ("cwf", "cronwf"))
# Loom's run and step states as Argo's node phases.
PHASES = {
    "PENDING": "Pending",
    "WAITING": "Pending",
    "RUNNING": "Running",
    "SUCCEEDED": "Succeeded",
    "CACHED": "Succeeded",
    "FAILED": "Failed",
    "SKIPPED": "Skipped",
    "HALTED": "Failed",
}


def lookup_of(ctx: Context) -> Lookup:
    """The WorkflowTemplates a document may name: this request's, then those applied before."""

    def found(kind: str, name: str) -> dict[str, Any] | None:
        stored = ctx.lookup(GROUP, kind, name) or ctx.lookup(GROUP, "ClusterWorkflowTemplate", name)
        return dict(stored.document) if stored is not None else None

    return found


def _notes(warnings: tuple[str, ...]) -> tuple[Note, ...]:
    """The translation's warnings as apply's notes: the field, then why."""
    found = []
    for warning in warnings:
        where, _, why = warning.partition(": ")
        found.append(Note(where if why else "", "approximated", why or warning))
    return tuple(found)


class Workflows(Immutable):
    """Argo's Workflow, WorkflowTemplate and CronWorkflow."""

    kinds = (WORKFLOW, TEMPLATE, CLUSTER_TEMPLATE, CRON)

    def check(self, ctx: Context, document: Document) -> None:
        kind = str(document["kind"])
        if kind in (TEMPLATE.kind, CLUSTER_TEMPLATE.kind):
            _check_template(document, lookup_of(ctx))
            return
        checked = ctx.platform.pipelines.check_documents(
            [document], None, ctx.user.id, lookup_of(ctx)
        )
        if kind == CRON.kind:
            parse_cron(str(checked.schedule["cron"]))

    def create(self, ctx: Context, document: Document) -> Applied:
        kind = str(document["kind"])
        if kind in (TEMPLATE.kind, CLUSTER_TEMPLATE.kind):
            return Applied({})
        pipelines = ctx.platform.pipelines
        checked = pipelines.check_documents([document], None, ctx.user.id, lookup_of(ctx))
        notes = _notes(checked.warnings)
        if kind == CRON.kind:
            name = _schedule_name(str(document["metadata"]["name"]))
            made = pipelines.schedules.create(
                ctx.user, name, str(checked.schedule["cron"]), checked, ctx.code,
                bool(checked.schedule.get("enabled", True)),
            )  # fmt: skip
            kept = tuple(n for n in notes if "runs once now" not in n.why)
            return Applied({"schedule": made.id, "schedule_name": made.name}, kept)
        run = pipelines.start_checked(ctx.user, checked, ctx.code)
        return Applied({"pipeline_run": run.id}, notes)

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied:
        """A template or a schedule is replaced; a workflow that ran cannot change."""
        if stored.kind == WORKFLOW.kind:
            return super().update(ctx, stored, document)
        self.delete(ctx, stored)
        return self.create(ctx, document)

    def status(self, ctx: Context, stored: Stored) -> dict[str, Any]:
        if stored.kind == WORKFLOW.kind:
            return workflow_status(ctx, str(stored.refs.get("pipeline_run")))
        if stored.kind == CRON.kind:
            return cron_status(ctx, stored)
        return {}

    def delete(self, ctx: Context, stored: Stored) -> None:
        pipelines = ctx.platform.pipelines
        if stored.refs.get("pipeline_run"):
            with contextlib.suppress(NotFound, Conflict):
                run = pipelines.find(ctx.user.id, str(stored.refs["pipeline_run"]))
                if run.state in ("PENDING", "RUNNING"):
                    pipelines.halt(run)
                pipelines.delete(run)
        if stored.refs.get("schedule"):
            with contextlib.suppress(NotFound):
                pipelines.schedules.delete(
                    pipelines.schedules.find(ctx.user.id, stored.refs["schedule"])
                )


def _check_template(document: Document, lookup: Lookup) -> None:
    """A template with an entrypoint is checked as a workflow would run (its arguments may
    wait for values); one without, template by template."""
    spec = document.get("spec") or {}
    if spec.get("entrypoint"):
        translate([document], None, lookup, require=False)
        return
    templates = spec.get("templates")
    if not isinstance(templates, list) or not templates:
        raise ManifestError(
            "spec.templates: a WorkflowTemplate holds templates", field="spec.templates"
        )
    for index, template in enumerate(templates):
        if not isinstance(template, dict) or not template.get("name"):
            raise ManifestError(
                f"spec.templates[{index}]: a template needs a name",
                field=f"spec.templates[{index}]",
            )
        tp.kind_of(template, f"templates.{template['name']}")


def _schedule_name(name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:63] or "cron"
    return clean if clean[0].isalpha() else f"c-{clean}"[:63]


def workflow_status(ctx: Context, run_id: str) -> dict[str, Any]:
    """Argo's status of the workflow's run: phase, times, progress, message, and its nodes."""
    pipelines = ctx.platform.pipelines
    try:
        run = pipelines.find(ctx.user.id, run_id)
    except NotFound:
        return {"phase": "Error", "message": f"its run {run_id} was deleted"}
    nodes: dict[str, Any] = {}
    _nodes(ctx, run, run.pipeline, nodes)
    done = sum(
        1 for n in nodes.values() if n["type"] == "Pod" and n["phase"] in ("Succeeded", "Skipped")
    )
    pods = sum(1 for n in nodes.values() if n["type"] == "Pod")
    status: dict[str, Any] = {
        "phase": PHASES.get(run.state, "Running"),
        "startedAt": _time(run.created_at),
        "finishedAt": _time(run.finished_at),
        "progress": f"{done}/{pods}",
        "nodes": nodes,
    }
    if run.message:
        status["message"] = run.message
    if run.outputs:
        status["outputs"] = {
            "parameters": [{"name": k, "value": v} for k, v in run.outputs.items()]
        }
    return status


def _nodes(ctx: Context, run: Any, prefix: str, nodes: dict[str, Any]) -> list[str]:
    pipelines = ctx.platform.pipelines
    steps = steps_json(run, pipelines.spec_of(run), pipelines.tasks(run.id))
    made = []
    for step in steps:
        for task in step["tasks"] or [{"index": 0, "state": step["state"]}]:
            suffix = f"({task['index']})" if step["fan_out"] else ""
            node_id = f"{prefix}.{step['name']}{suffix}"
            node: dict[str, Any] = {
                "id": node_id,
                "name": node_id,
                "displayName": f"{step['name']}{suffix}",
                "type": "DAG" if step["kind"] == "pipeline" else "Pod",
                "phase": PHASES.get(str(task.get("state")), "Pending"),
                "startedAt": task.get("started_at"),
                "finishedAt": task.get("finished_at"),
            }
            if task.get("message") or step.get("message"):
                node["message"] = task.get("message") or step.get("message")
            values = (task.get("outputs") or {}).get("values") or {}
            if values:
                node["outputs"] = {
                    "result": values.get("result"),
                    "exitCode": str(values.get("exit_code", "")),
                    "parameters": [
                        {"name": k, "value": v} for k, v in (values.get("parameters") or {}).items()
                    ],
                }
            if task.get("job_id"):
                node["podName"] = task["job_id"]
            if task.get("run_id"):
                with contextlib.suppress(NotFound):
                    sub = pipelines.find(ctx.user.id, task["run_id"])
                    node["children"] = _nodes(ctx, sub, node_id, nodes)
            nodes[node_id] = node
            made.append(node_id)
    return made


def _time(at: float | None) -> str | None:
    return timestamp(at)


def cron_status(ctx: Context, stored: Stored) -> dict[str, Any]:
    """The schedule's: its runs under way, its last time, how many succeeded and failed."""
    pipelines = ctx.platform.pipelines
    try:
        schedule = pipelines.schedules.find(ctx.user.id, str(stored.refs.get("schedule")))
    except NotFound:
        return {
            "phase": "Stopped",
            "conditions": [
                {"type": "SpecError", "status": "True", "message": "its Loom schedule was deleted"}
            ],
        }
    runs = [r for r in pipelines.listing(ctx.user.id) if r.schedule == schedule.name]
    return {
        "phase": "Active" if schedule.enabled else "Stopped",
        "active": [
            {"kind": "Workflow", "name": r.id} for r in runs if r.state in ("PENDING", "RUNNING")
        ],
        "lastScheduledTime": _time(schedule.last_run_at),
        "succeeded": sum(r.state == "SUCCEEDED" for r in runs),
        "failed": sum(r.state == "FAILED" for r in runs),
        "conditions": [],
    }
