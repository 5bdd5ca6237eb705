"""Runs of sub-pipelines: a `pipeline` step's task starts one (one per item of a fan-out) and
follows it as it would a job. A sub-run is an ordinary run of the same owner, with the parent's
code and its own part of the parent's sealed credentials; it is listed under its parent."""

from __future__ import annotations

import time

from loom.domain.errors import InvalidInput
from loom.domain.pipeline import Step
from loom.domain.pipeline_states import ACTIVE_RUN, RunState
from loom.pipelines.records import RunRecords, inner
from loom.pipelines.steps import Finished, StepFailed
from loom.store import pipelines as rows
from loom.store.db import Database
from loom.store.tables import PipelineRun


class SubRuns:
    def __init__(self, db: Database, records: RunRecords) -> None:
        self.db = db
        self.records = records

    def start(
        self, parent: PipelineRun, step: Step, run_id: str, parameters: dict[str, object]
    ) -> None:
        """The step's sub-run under the id stored for its task (at most once)."""
        assert step.sub is not None
        with self.db.session() as session:
            if rows.get(session, run_id) is not None:
                return
        try:
            values = step.sub.with_parameters(dict(parameters))
        except InvalidInput as exc:
            raise StepFailed(exc.message) from None
        credentials = inner(self.records.credentials(parent), step.name)
        run = self.records.new_run(
            parent.owner_id,
            step.sub,
            step.fields["pipeline"],  # as the parent stored it: credentials already out
            credentials,
            values,
            parent.code_digest,
            run_id=run_id,
            parent_id=parent.id,
        )
        with self.db.session() as session:
            session.add(run)

    def follow(self, run_id: str) -> Finished | None:
        """The sub-run's end, with its outputs and id, once it has ended and stopped."""
        with self.db.session() as session:
            run = rows.get(session, run_id)
            running = run is not None and any(
                t.state == "RUNNING" for t in rows.tasks_of(session, run_id)
            )
        if run is None:
            return Finished("FAILED", f"its run {run_id} was deleted", {})
        if run.state in ACTIVE_RUN or running:
            return None
        outputs = {**(run.outputs or {}), "run_id": run.id}
        if run.state == RunState.SUCCEEDED:
            return Finished("SUCCEEDED", "", outputs)
        said = f": {run.message}" if run.message else ""
        if run.state == RunState.HALTED:
            return Finished("HALTED", f"its run {run_id} was halted{said}", outputs)
        return Finished("FAILED", f"its run {run_id} failed{said}", outputs)

    def halt(self, run_id: str, message: str) -> None:
        """The sub-run halted: nothing new starts in it, its running steps are halted."""
        with self.db.session() as session:
            run = session.get(PipelineRun, run_id)
            if run is not None and RunState(run.state) in ACTIVE_RUN:
                run.state = RunState.HALTED.value
                run.message = message
                if not any(t.state == "RUNNING" for t in rows.tasks_of(session, run_id)):
                    run.finished_at = time.time()
