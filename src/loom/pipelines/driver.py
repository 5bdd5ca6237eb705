"""The pipelines' driver: one thread, on the leading server, that moves every run on.

Each pass, per run: running tasks follow their jobs or experiments (a failure is retried after
its backoff, a task past its timeout is halted and fails); waiting steps whose needs have ended
open (skipped if a need did not succeed or the condition is false, otherwise expanded into one
task per item); waiting tasks start within their step's parallelism, from the cache when an
earlier run did the same; steps and the run end when their parts have. A job's id is stored
before the job is submitted: after a crash the pass submits what is missing, and never twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from loom.domain.errors import Conflict, InvalidInput, LoomError, NotFound, TooManyRequests
from loom.domain.pipeline import MAX_ITEMS, OPAQUE, PipelineSpec, Step
from loom.domain.pipeline_refs import UnresolvedReference, condition, render, walk
from loom.domain.pipeline_states import (
    ACTIVE_RUN,
    DONE,
    ENDED_STEP,
    RunState,
    StepState,
    run_state,
    step_state,
)
from loom.domain.states import TERMINAL_STATES, JobState
from loom.lifecycle.ticker import RowDriver
from loom.pipelines.records import RunRecords
from loom.pipelines.steps import Finished, StepFailed, StepKinds
from loom.pipelines.subruns import SubRuns
from loom.store import jobs as job_rows
from loom.store import pipelines as rows
from loom.store.db import Database
from loom.store.tables import PipelineRun, PipelineTask, User

log = logging.getLogger("loom.pipelines")
TIMED_OUT = "timed out"
MAX_ROUNDS = 20  # passes over one run in one call, at most
# Passes in a row that may fail on one run before it is ended: a run the driver cannot move
# on (whatever the cause) fails with the reason and its running steps are halted, instead of
# failing again at every pass for ever.
MAX_FAILED_PASSES = 3
DEPLOY_WAIT_S = 600.0  # a deploy step without timeout_s fails if not serving by then


@dataclass
class View:
    """One run as read at the start of a pass, detached from its session."""

    run: PipelineRun
    spec: PipelineSpec
    tasks: list[PipelineTask]

    def state(self, step: str) -> StepState:
        return StepState(self.run.steps[step]["state"])

    def tasks_of(self, step: str) -> list[PipelineTask]:
        return [t for t in self.tasks if t.step == step]

    def outputs(self, step: str) -> Any:
        """A step's outputs: one mapping, or a list (one per item) for a fan-out."""
        done = sorted(self.tasks_of(step), key=lambda t: t.index)
        if self.spec.step(step).for_each is not None:
            return [dict(t.outputs) for t in done]
        return dict(done[0].outputs) if done else {}


class PipelineDriver(RowDriver):
    def __init__(
        self, db: Database, records: RunRecords, kinds: StepKinds, interval_s: float
    ) -> None:
        super().__init__("pipelines", db, interval_s, log)
        self.records = records
        self.kinds = kinds
        self.subruns = SubRuns(db, records)
        self.before_pass: Callable[[], None] | None = None  # the schedules' firing
        self._failures: dict[str, int] = {}  # a run's failed passes in a row

    def step(self) -> None:
        if self.before_pass is not None:
            with self.db.session() as session:
                leading = self.fence(session)
            if leading:
                try:
                    self.before_pass()
                except Exception:  # the runs go on all the same
                    log.exception("starting the scheduled pipeline runs failed")
        super().step()

    def pending(self, session: Session) -> list[str]:
        return rows.to_drive(session)

    def view(self, run_id: str) -> View | None:
        with self.db.session() as session:
            run = rows.get(session, run_id)
            if run is None:
                return None
            tasks = rows.tasks_of(session, run_id)
        return View(run, self.records.spec_of(run), tasks)

    def advance(self, run_id: str) -> None:
        """The run moved on; past MAX_FAILED_PASSES failures in a row, ended (`_abandon`)."""
        try:
            self._advance(run_id)
        except Exception as exc:
            failed = self._failures.get(run_id, 0) + 1
            if failed < MAX_FAILED_PASSES:
                self._failures[run_id] = failed
                raise  # logged by the loop; tried again next pass
            self._failures.pop(run_id, None)
            log.exception("pipeline run %s could not be moved on; ending it", run_id)
            self._abandon(run_id, f"{type(exc).__name__}: {str(exc)[:300]}")
        else:
            self._failures.pop(run_id, None)

    def _abandon(self, run_id: str, why: str) -> None:
        """End a run the driver cannot move on, from its rows alone (its spec or its steps'
        values may be what fails): its running jobs and experiments halted, its open tasks
        ended, the run FAILED saying why (HALTED if its owner had halted it)."""
        now = time.time()
        with self.db.session() as session:
            run = rows.get(session, run_id)
            if run is None:
                return
            tasks = rows.tasks_of(session, run_id)
            owner = run.owner_id
            halted = run.state == RunState.HALTED
            for task in tasks:
                if task.state in (StepState.RUNNING, StepState.WAITING):
                    task.state = (StepState.HALTED if halted else StepState.FAILED).value
                    task.message = task.message or "its run was ended"
                    task.finished_at = now
            if run.state in ACTIVE_RUN:
                run.state = RunState.FAILED.value
                run.message = f"the pipeline driver could not move this run on: {why}"
            run.finished_at = run.finished_at or now
            refs = [t.ref for t in tasks if t.ref]
        for ref in refs:
            self._stop(owner, ref)

    def _stop(self, owner_id: str, ref: str) -> None:
        """Halt a job or an experiment by its name alone, if it still runs."""
        with contextlib.suppress(Conflict, NotFound, InvalidInput):
            with self.db.session() as session:
                job = job_rows.get_job(session, ref)
            if job is not None:
                if not job.halt_requested and JobState(job.state) not in TERMINAL_STATES:
                    self.kinds.lifecycle.halt(ref)
                return
            found = self.kinds.experiments.find(owner_id, ref)
            if found.state in ("CREATED", "RUNNING"):
                self.kinds.experiments.halt(found)

    def _advance(self, run_id: str) -> None:
        """Pass after pass while one changes something: a step that ends opens the next in
        the same call (a select or a deploy step ends as it starts)."""
        before = None
        for _ in range(MAX_ROUNDS):
            for part in (self._follow, self._open, self._start, self._close):
                view = self.view(run_id)
                if view is None:
                    return
                part(view)
            after = _fingerprint(view) if view is not None else None
            if after == before:
                return
            before = after

    # -- running tasks -----------------------------------------------------------------------
    def _follow(self, view: View) -> None:
        self._deadline(view)
        halted = halting(view.run)
        for task in view.tasks:
            if task.state != StepState.RUNNING:
                continue
            step = view.spec.step(task.step)
            if task.submitted_at is None:  # stored, not yet submitted: a crash came between
                if halted:  # its job may have been stored just before the crash
                    self._halt(view, task)
                    self._update(task, state=StepState.HALTED, finished_at=time.time())
                else:
                    self._submit(view, step, task)
                continue
            finished = self._finished(view, step, task)
            if finished is None:
                if halted:
                    self._halt(view, task)
                elif self._late(step, task):
                    self._update(task, message=f"{TIMED_OUT} after {step.timeout_s:g} s")
                    self._halt(view, task)
                continue
            self._ended(view, step, task, finished)

    def _deadline(self, view: View) -> None:
        """A run past its `timeout_s` is FAILED at once, saying so, and its steps' jobs are
        halted; it has ended (`finished_at`) once they have stopped. It never reads HALTED on
        the way: a client waiting for the run to end must not stop at a state it then leaves."""
        limit = view.spec.timeout_s
        if limit is None or view.run.state not in ACTIVE_RUN:
            return
        if time.time() - view.run.created_at <= limit:
            return
        with self.db.session() as session:
            row = session.get_one(PipelineRun, view.run.id)
            if row.state in ACTIVE_RUN:
                row.state = RunState.FAILED.value
                row.message = f"{TIMED_OUT} after {limit:g} s"
            view.run.state, view.run.message = row.state, row.message

    def _finished(self, view: View, step: Step, task: PipelineTask) -> Finished | None:
        if step.kind == "pipeline":
            return self.subruns.follow(task.ref)
        if step.kind == "experiment":
            return self.kinds.follow_experiment(view.run.owner_id, task.ref)
        if step.kind == "deploy":
            waited = time.time() - (task.started_at or time.time())
            limit = step.timeout_s or DEPLOY_WAIT_S
            return self.kinds.follow_deploy(
                view.run.owner_id, task.ref, task.outputs, waited, limit
            )
        return self.kinds.follow_job(task.ref)

    def _late(self, step: Step, task: PipelineTask) -> bool:
        if step.kind == "deploy":  # its own wait has a limit: see `_finished`
            return False
        if step.timeout_s is None or task.started_at is None or task.message.startswith(TIMED_OUT):
            return False
        return time.time() - task.started_at > step.timeout_s

    def _ended(self, view: View, step: Step, task: PipelineTask, finished: Finished) -> None:
        state, message = StepState(finished.state), finished.message
        if state == StepState.HALTED and task.message.startswith(TIMED_OUT):
            state, message = StepState.FAILED, f"{task.message}; {message}"
        retry = state == StepState.FAILED and task.attempt <= step.retry.limit
        if retry and not halting(view.run):
            delay = step.retry.delay(task.attempt - 1)
            self._update(
                task,
                state=StepState.WAITING,
                attempt=task.attempt + 1,
                ref="",
                submitted_at=None,
                not_before=time.time() + delay,
                message=f"retry {task.attempt} of {step.retry.limit} in {delay:g} s: {message}",
            )
            return
        self._update(
            task, state=state, message=message, outputs=finished.outputs, finished_at=time.time()
        )

    def _halt(self, view: View, task: PipelineTask) -> None:
        step = view.spec.step(task.step)
        if step.kind == "deploy":  # the deployment stays; the step stops waiting for it
            message = "halted before the deployment served the version"
            self._update(task, state=StepState.HALTED, message=message, finished_at=time.time())
            return
        if step.kind == "pipeline":
            why = task.message if task.message.startswith(TIMED_OUT) else "its parent was halted"
            self.subruns.halt(task.ref, why)
            return
        with contextlib.suppress(Conflict, NotFound):
            if step.kind == "experiment":
                found = self.kinds.experiments.find(view.run.owner_id, task.ref)
                if found.state in ("CREATED", "RUNNING"):
                    self.kinds.experiments.halt(found)
            else:
                with self.db.session() as session:
                    job = job_rows.get_job(session, task.ref)
                if job is not None and not job.halt_requested:
                    self.kinds.lifecycle.halt(task.ref)

    # -- opening steps -----------------------------------------------------------------------
    def _open(self, view: View) -> None:
        if view.run.state not in ACTIVE_RUN:
            return
        ended = {s.name for s in view.spec.steps if view.state(s.name) in ENDED_STEP}
        for step in view.spec.steps:
            if view.state(step.name) != StepState.WAITING:
                continue
            if step.exit_handler:
                others = [s.name for s in view.spec.steps if not s.exit_handler]
                if set(others) <= ended:
                    self._expand(view, step)
                continue
            if not set(step.needs) <= ended:
                continue
            missing = [n for n in step.needs if not _satisfies(step, view.run.steps[n])]
            if missing:
                said = ", ".join(f"{n} ({view.state(n).value.lower()})" for n in missing)
                self._set_step(view.run, step.name, StepState.SKIPPED, f"it needs {said}")
                ended.add(step.name)
                continue
            try:
                if step.when is not None and not condition(
                    step.when, self._resolver(view, None), "when"
                ):
                    why = f"when: `{step.when}` is false"
                    self._set_step(view.run, step.name, StepState.SKIPPED, why, "when")
                    ended.add(step.name)
                    continue
            except UnresolvedReference as exc:
                self._set_step(view.run, step.name, StepState.FAILED, exc.message)
                ended.add(step.name)
                continue
            self._expand(view, step)

    def _expand(self, view: View, step: Step) -> None:
        """One task per item (kept: those a retried run already has done)."""
        try:
            items = self._items(view, step)
        except (UnresolvedReference, StepFailed) as exc:
            self._set_step(view.run, step.name, StepState.FAILED, exc.message)
            return
        have = {t.index for t in view.tasks_of(step.name)}
        now = time.time()
        with self.db.session() as session:
            for index, item in enumerate(items):
                if index in have:
                    continue
                session.add(
                    PipelineTask(
                        run_id=view.run.id,
                        step=step.name,
                        index=index,
                        item=item,
                        state=StepState.WAITING.value,
                        attempt=1,
                        ref="",
                        cache_key="",
                        outputs={},
                        message="",
                    )
                )
            run = session.get_one(PipelineRun, view.run.id)
            state = StepState.RUNNING if items else StepState.SUCCEEDED
            _step_entry(run, step.name, state, "" if items else "for_each gave no items", now)
            if run.state == RunState.PENDING:
                run.state = RunState.RUNNING.value

    def _items(self, view: View, step: Step) -> list[Any]:
        if step.for_each is None:
            return [None]
        items = render(step.for_each, self._resolver(view, None))
        if not isinstance(items, list):
            raise StepFailed(f"for_each: a list was expected, got {json.dumps(items)[:200]}")
        if len(items) > MAX_ITEMS:
            raise StepFailed(f"for_each: at most {MAX_ITEMS} items, got {len(items)}")
        return items

    # -- starting tasks ----------------------------------------------------------------------
    def _start(self, view: View) -> None:
        if view.run.state not in ACTIVE_RUN:
            return
        now = time.time()
        for step in view.spec.steps:
            if view.state(step.name) != StepState.RUNNING:
                continue
            tasks = view.tasks_of(step.name)
            room = (step.parallelism or len(tasks)) - sum(
                t.state == StepState.RUNNING for t in tasks
            )
            for task in sorted(tasks, key=lambda t: t.index):
                if room <= 0:
                    break
                if task.state != StepState.WAITING or (task.not_before or 0) > now:
                    continue
                self._begin(view, step, task)
                room -= 1

    def _begin(self, view: View, step: Step, task: PipelineTask) -> None:
        resolve = self._resolver(view, task)
        try:
            fields = _rendered(step, resolve)
            if step.kind == "select":
                self._done(
                    task, self.kinds.select(view.run.owner_id, fields, self._models(view, fields))
                )
                return
            if step.kind == "deploy":  # done once it serves the version: see `_finished`
                outputs = self.kinds.deploy(view.run.owner_id, fields)
                now = time.time()
                self._update(
                    task,
                    state=StepState.RUNNING,
                    ref=str(fields["deployment"]),
                    outputs=outputs,
                    started_at=now,
                    submitted_at=now,
                    message="waiting for the deployment to serve the version",
                )
                return
            key = self._cache_key(view, step, task, fields)
            if key and self._from_cache(view, step, task, key):
                return
            ref = self._ref(view, step, task)
            self._update(
                task,
                state=StepState.RUNNING,
                ref=ref,
                cache_key=key,
                started_at=time.time(),
                finished_at=None,
                message="",
            )
        except (UnresolvedReference, StepFailed) as exc:
            self._update(task, state=StepState.FAILED, message=exc.message, finished_at=time.time())
            return
        self._submit(view, step, task)

    def _ref(self, view: View, step: Step, task: PipelineTask) -> str:
        if step.kind == "pipeline":
            return rows.new_run_id()
        if step.kind != "experiment":
            return job_rows.new_job_id()
        suffix = f"-{task.index}" if step.for_each is not None else ""
        return f"{view.run.id}-{step.name}{suffix}"

    def _submit(self, view: View, step: Step, task: PipelineTask) -> None:
        """The task's job or experiment, under the id or name stored for it (again after a
        crash: at most once)."""
        resolve = self._resolver(view, task)
        try:
            fields = _rendered(step, resolve)
            if step.kind == "pipeline":
                self.subruns.start(view.run, step, task.ref, fields.get("parameters") or {})
                self._update(task, submitted_at=time.time(), message="")
                self.wake()  # the sub-run is driven from the next pass
                return
            credentials = self.records.credentials(view.run).get(step.name, {})
            if step.kind == "experiment":
                owner = self._owner(view)
                self.kinds.create_experiment(owner, view.run, fields, credentials, task.ref)
                self._update(task, submitted_at=time.time(), message="")
                return
            manifest, code = self.kinds.job_of(
                view.run, step, fields, credentials, lambda v: render(v, resolve)
            )
            lineage = {
                "kind": "pipeline",
                "pipeline": view.run.pipeline,
                "run": view.run.id,
                "step": step.name,
                "index": task.index,
            }
            self.kinds.submit(self._owner(view), task.ref, manifest, code, lineage)
        except TooManyRequests as exc:  # the owner's queue is full: again next pass
            self._update(task, message=f"waiting to be submitted: {exc.message}")
            return
        except (UnresolvedReference, StepFailed, InvalidInput, LoomError) as exc:
            self._update(task, state=StepState.FAILED, message=exc.message, finished_at=time.time())
            return
        self._update(task, submitted_at=time.time(), message="")

    def _models(self, view: View, fields: dict[str, Any]) -> list[str]:
        found = []
        for name in fields.get("from") or []:
            for task in view.tasks_of(str(name)):
                if task.state in DONE and task.outputs.get("model"):
                    found.append(str(task.outputs["model"]))
        return found

    def _done(self, task: PipelineTask, outputs: dict[str, Any]) -> None:
        now = time.time()
        self._update(
            task,
            state=StepState.SUCCEEDED,
            outputs=outputs,
            started_at=now,
            finished_at=now,
            message="",
        )

    # -- the cache ---------------------------------------------------------------------------
    def _cache_key(self, view: View, step: Step, task: PipelineTask, fields: Any) -> str:
        if not step.cache or step.kind not in ("job", "python", "shell", "experiment"):
            return ""
        inputs = {
            "kind": step.kind,
            "fields": fields,
            "item": task.item,
            "code": self.kinds.code_identity(view.run.code_digest),
            "credentials": self.records.credentials_digest(view.run, step.name),
        }
        text = json.dumps(inputs, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def _from_cache(self, view: View, step: Step, task: PipelineTask, key: str) -> bool:
        since = time.time() - step.cache_max_age_s if step.cache_max_age_s else None
        with self.db.session() as session:
            found = rows.cached(session, view.run.owner_id, key, since)
            if found is None:
                return False
            origin = {"run": found.run_id, "step": found.step, "index": found.index}
            outputs = dict(found.outputs)
        now = time.time()
        self._update(
            task,
            state=StepState.CACHED,
            cache_key=key,
            outputs={**outputs, "cached_from": origin},
            ref=str(outputs.get("job_id") or outputs.get("experiment") or ""),
            started_at=now,
            finished_at=now,
            message=f"reused the outputs of run {origin['run']}",
        )
        return True

    # -- closing -----------------------------------------------------------------------------
    def _close(self, view: View) -> None:
        now = time.time()
        changed: dict[str, tuple[StepState, str]] = {}
        for step in view.spec.steps:
            if view.state(step.name) != StepState.RUNNING:
                continue
            tasks = view.tasks_of(step.name)
            state = step_state([StepState(t.state) for t in tasks])
            if state is not None:
                bad = next((t for t in tasks if t.state == state and t.message), None)
                changed[step.name] = (state, bad.message if bad else "")
        with self.db.session() as session:
            run = session.get_one(PipelineRun, view.run.id)
            for name, (state, message) in changed.items():
                _step_entry(run, name, state, message, now)
            states = [StepState(run.steps[s.name]["state"]) for s in view.spec.steps]
            running = any(t.state == StepState.RUNNING for t in view.tasks)
            if halting(run):
                if not running and run.finished_at is None:
                    run.finished_at = now
                    if run.message.startswith(TIMED_OUT):  # a sub-run's deadline, not a request
                        run.state = RunState.FAILED.value
                return
            ended = run_state(states)
            if ended is None or run.state not in ACTIVE_RUN:
                return
            run.state = ended.value
            run.finished_at = now
            failed = [s.name for s in view.spec.steps if run.steps[s.name]["state"] == "FAILED"]
            run.message = f"failed steps: {', '.join(failed)}" if failed else ""
            if ended == RunState.SUCCEEDED and view.spec.outputs:
                try:
                    run.outputs = render(view.spec.outputs, self._resolver(view, None))
                except UnresolvedReference as exc:
                    ended = RunState.FAILED
                    run.state, run.message = ended.value, f"outputs: {exc.message}"
        log.info("pipeline run %s (%s) ended: %s", view.run.id, view.run.pipeline, ended.value)

    # -- helpers -----------------------------------------------------------------------------
    def _resolver(self, view: View, task: PipelineTask | None) -> Callable[[str], Any]:
        def resolve(path: str) -> Any:
            parts = path.split(".")
            if parts[0] == "parameters":
                return walk(view.run.parameters, parts[1:], path)
            if parts[0] == "run":
                if parts[1] == "state":
                    return _ending(view)
                return {"id": view.run.id, "name": view.run.pipeline}[parts[1]]
            if parts[0] == "item":
                if task is None:
                    raise UnresolvedReference(f"`${{{{ {path} }}}}`: no item here")
                return walk(task.item, parts[1:], path)
            if parts[2] == "state":
                return view.state(parts[1]).value
            if parts[2] == "message":
                return str(view.run.steps[parts[1]].get("message") or "")
            return walk(view.outputs(parts[1]), parts[3:], path)

        return resolve

    def _owner(self, view: View) -> User:
        with self.db.session() as session:
            return session.get_one(User, view.run.owner_id)

    def _update(self, task: PipelineTask, **values: Any) -> None:
        with self.db.session() as session:
            row = session.get_one(PipelineTask, task.id)
            for key, given in values.items():
                value = given.value if isinstance(given, StepState) else given
                setattr(row, key, value)
                setattr(task, key, value)

    def _set_step(
        self, run: PipelineRun, name: str, state: StepState, message: str, cause: str = ""
    ) -> None:
        with self.db.session() as session:
            row = session.get_one(PipelineRun, run.id)
            _step_entry(row, name, state, message, time.time(), cause)
            if row.state == RunState.PENDING:
                row.state = RunState.RUNNING.value
            run.steps = row.steps


def halting(run: PipelineRun) -> bool:
    """Nothing new starts in the run and its running steps are halted: halted by its owner
    (or its parent), or past its own deadline (FAILED at once) while its steps stop."""
    if run.state == RunState.HALTED:
        return True
    timed_out = run.state == RunState.FAILED and run.message.startswith(TIMED_OUT)
    return timed_out and run.finished_at is None


def _ending(view: View) -> str:
    """The state the run's steps (its exit handler aside) come to, or the run's own until
    they have all ended."""
    states = [view.state(s.name) for s in view.spec.steps if not s.exit_handler]
    ended = run_state(states)
    return ended.value if ended is not None else view.run.state


def _fingerprint(view: View) -> tuple[Any, ...]:
    steps = tuple(sorted((k, v.get("state")) for k, v in view.run.steps.items()))
    tasks = tuple(sorted((t.step, t.index, t.state, t.attempt) for t in view.tasks))
    return view.run.state, steps, tasks


def _rendered(step: Step, resolve: Callable[[str], Any]) -> dict[str, Any]:
    """The step's fields with their references resolved (a sub-pipeline's spec kept as it is:
    its references are its own)."""
    opaque = OPAQUE.get(step.kind)
    return {
        key: value if key == opaque else render(value, resolve)
        for key, value in step.fields.items()
    }


def _satisfies(step: Step, need: dict[str, Any]) -> bool:
    """Whether a need that has ended lets the step run, by the step's trigger: a skip counts
    for `none_failed` only where a condition was false (not where a need failed)."""
    state = StepState(need["state"])
    if step.trigger == "all_done":
        return True
    if step.trigger == "none_failed" and state == StepState.SKIPPED:
        return need.get("cause") == "when"
    return state in DONE


def _step_entry(
    run: PipelineRun, name: str, state: StepState, message: str, now: float, cause: str = ""
) -> None:
    """Store a step's new state (a new mapping, so the JSON column sees the change); `cause`:
    why a step was skipped (`when`: its condition was false)."""
    entry = dict(run.steps.get(name) or {})
    if state == StepState.RUNNING:
        entry["started_at"] = entry.get("started_at") or now
        entry["finished_at"] = None
    elif state in ENDED_STEP:
        entry["finished_at"] = now
    entry["state"], entry["message"] = state.value, message
    if cause:
        entry["cause"] = cause
    else:
        entry.pop("cause", None)
    run.steps = {**run.steps, name: entry}
