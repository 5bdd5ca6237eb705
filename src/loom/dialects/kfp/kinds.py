"""A compiled KFP pipeline through `loom apply -f pipeline.yaml`: the file (which has no kind)
is taken as a `PipelineRun` of it (`ir.as_applied`), run as `loom pipelines run` would run it;
`loom get pipelineruns` shows its state and its tasks', `loom delete` removes the run. Applied
again unchanged, nothing happens; changed, it runs again."""

from __future__ import annotations

import contextlib
from typing import Any

from loom.api.routers.pipelines import steps_json
from loom.dialects.kfp.ir import APPLIED_GROUP
from loom.dialects.kinds import Applied, Context, Document, KindInfo, Note, Stored, timestamp
from loom.domain import spec_checks as check
from loom.domain.errors import Conflict, NotFound

RUN = KindInfo(APPLIED_GROUP, ("v2beta1",), "PipelineRun", "pipelineruns", ("kfprun",))
_STATES = {"HALTED": "CANCELED", "WAITING": "PENDING", "CACHED": "SUCCEEDED"}


class PipelineRuns:
    kinds = (RUN,)

    def _checked(self, ctx: Context, document: Document) -> Any:
        spec = check.mapping(document.get("spec"), "spec")
        check.known(spec, ("pipelineSpec", "platformSpec", "parameters"), "spec")
        documents = [check.mapping(spec.get("pipelineSpec"), "spec.pipelineSpec")]
        if spec.get("platformSpec"):
            documents.append(check.mapping(spec["platformSpec"], "spec.platformSpec"))
        parameters = check.mapping(spec.get("parameters") or {}, "spec.parameters")
        return ctx.platform.pipelines.check_documents(documents, parameters or None, ctx.user.id)

    def check(self, ctx: Context, document: Document) -> None:
        self._checked(ctx, document)

    def create(self, ctx: Context, document: Document) -> Applied:
        checked = self._checked(ctx, document)
        run = ctx.platform.pipelines.start_checked(ctx.user, checked, ctx.code)
        notes = tuple(
            Note(w.partition(": ")[0], "approximated", w.partition(": ")[2] or w)
            for w in checked.warnings
        )
        return Applied({"pipeline_run": run.id}, notes)

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied:
        """A changed pipeline runs again (the earlier run stays, as a KFP run would)."""
        return self.create(ctx, document)

    def status(self, ctx: Context, stored: Stored) -> dict[str, Any]:
        pipelines = ctx.platform.pipelines
        try:
            run = pipelines.find(ctx.user.id, str(stored.refs.get("pipeline_run")))
        except NotFound:
            return {"state": "FAILED", "error": {"message": "its run was deleted"}}
        steps = steps_json(run, pipelines.spec_of(run), pipelines.tasks(run.id))
        found: dict[str, Any] = {
            "runId": run.id,
            "state": _STATES.get(run.state, run.state),
            "createdAt": timestamp(run.created_at),
            "finishedAt": timestamp(run.finished_at),
            "tasks": [
                {"name": s["name"], "state": _STATES.get(str(s["state"]), s["state"])}
                for s in steps
            ],
        }
        if run.message:
            found["message"] = run.message
        return found

    def delete(self, ctx: Context, stored: Stored) -> None:
        pipelines = ctx.platform.pipelines
        with contextlib.suppress(NotFound, Conflict):
            run = pipelines.find(ctx.user.id, str(stored.refs.get("pipeline_run")))
            if run.state in ("PENDING", "RUNNING"):
                pipelines.halt(run)
            pipelines.delete(run)
