"""Runs and projects as a service: who may see and change which, and the one path by which
params, tags and metrics are logged to a run — into a job's metric stream when the run is a
job's (its own run, or one its code started), else into the run's own rows.

Another user's run or project is as absent as a missing one (`NotFound`); a job's token may
change only its job's runs (`Forbidden`).
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from loom.domain.errors import Conflict, Forbidden, InvalidInput, NotFound, PayloadTooLarge
from loom.domain.run_search import PROJECTS, RUNS, OrderKey, parse_filter, parse_order_by
from loom.domain.runs import (
    DEFAULT_PROJECT,
    LARGEST_FLOAT,
    MAX_PROJECT_TAG_VALUE,
    MAX_RESULTS,
    MAX_RUN_NAME,
    MAX_TAG_VALUE,
    PARENT_TAG,
    RUN_NAME_TAG,
    Actor,
    Entry,
    Metric,
    Page,
    ProjectRecord,
    RunRecord,
    RunStatus,
    Stage,
    View,
    check_batch,
    check_name,
    check_project_name,
    check_run_id,
    check_unique_params,
    check_value,
    param_changed,
    split_key,
)
from loom.store import metrics as metric_rows
from loom.store import projects as project_rows
from loom.store import run_info as info_rows
from loom.store import run_search
from loom.store import runs as run_rows
from loom.store.db import Database
from loom.store.tables import Project, Run
from loom.tds.service import TrainingData


def now_ms() -> int:
    return int(time.time() * 1000)


def project_id(text: object, where: str = "experiment_id") -> int:
    """A project's id as MLflow's client sends it (a string of digits)."""
    try:
        number = int(str(text))
    except ValueError:
        raise InvalidInput(f"{where}: not an experiment id: {text!r:.60}", field=where) from None
    if number < 0 or number >= 2**63:
        raise InvalidInput(f"{where}: not an experiment id: {text!r:.60}", field=where)
    return number


def checked_page(max_results: object, *, most: int = MAX_RESULTS) -> int:
    if isinstance(max_results, bool) or not isinstance(max_results, int):
        raise InvalidInput("max_results: an integer", field="max_results")
    if not 1 <= max_results <= most:
        raise InvalidInput(
            f"max_results: between 1 and {most}, got {max_results}", field="max_results"
        )
    return max_results


class Runs:
    def __init__(self, db: Database, tds: TrainingData) -> None:
        self.db = db
        self.tds = tds

    # -- projects --------------------------------------------------------------------------------
    def create_project(self, actor: Actor, name: object, tags: Sequence[Entry] = ()) -> int:
        name = check_project_name(name)
        for tag in tags:
            self._check_project_tag(tag)
        with self.db.session() as session:
            project = project_rows.create(session, actor.user_id, name, now_ms())
            for tag in tags:
                project_rows.set_tag(session, project, tag.key, tag.value, project.created_at)
            return project.id

    def project(self, actor: Actor, key: object) -> ProjectRecord:
        with self.db.session() as session:
            return project_rows.records(session, [self._project(session, actor, key)])[0]

    def project_named(self, actor: Actor, name: str) -> ProjectRecord:
        with self.db.session() as session:
            found = project_rows.named(session, actor.user_id, name)
            if found is None:
                raise NotFound(f"no experiment (project) named {name!r}")
            return project_rows.records(session, [found])[0]

    def search_projects(
        self,
        actor: Actor,
        *,
        view: View = View.ACTIVE_ONLY,
        filter: str | None = None,
        order_by: list[str] | None = None,
        max_results: int = 1000,
        offset: int = 0,
    ) -> Page[ProjectRecord]:
        limit = checked_page(max_results)
        clauses = parse_filter(filter, PROJECTS)
        order = parse_order_by(order_by, PROJECTS)
        with self.db.session() as session:
            found = run_search.search_projects(
                session,
                owner_id=None if actor.is_admin else actor.user_id,
                with_default=True,
                stages=view.stages,
                clauses=clauses,
                order=order,
                offset=offset,
                limit=limit + 1,
            )
            more = len(found) > limit
            return Page(
                project_rows.records(session, found[:limit]), offset + limit if more else None
            )

    def visible_projects(self, actor: Actor, view: View = View.ACTIVE_ONLY) -> list[ProjectRecord]:
        """Every project the actor sees (theirs and the Default; an admin's: all), by name."""
        with self.db.session() as session:
            found = run_search.search_projects(
                session,
                owner_id=None if actor.is_admin else actor.user_id,
                with_default=True,
                stages=view.stages,
                clauses=[],
                order=[OrderKey("attribute", "name", True)],
                offset=0,
                limit=MAX_RESULTS,
            )
            return project_rows.records(session, found)

    def rename_project(self, actor: Actor, key: object, name: object) -> None:
        name = check_project_name(name, "new_name")
        with self.db.session() as session:
            project = self._own_project(session, actor, key)
            if project.stage != Stage.ACTIVE.value:
                raise Conflict(f"experiment {project.id} is deleted; restore it to rename it")
            project_rows.rename(session, project, name, now_ms())

    def set_project_stage(self, actor: Actor, key: object, stage: Stage) -> None:
        """Delete (or restore) a project and its runs."""
        with self.db.session() as session:
            project = self._own_project(session, actor, key)
            if project.stage == stage.value:
                raise NotFound(
                    f"no {'active' if stage is Stage.DELETED else 'deleted'} "
                    f"experiment {project.id}"
                )
            now = now_ms()
            project.stage, project.updated_at = stage.value, now
            for run in session.query(Run).filter(Run.project_id == project.id):
                run_rows.set_stage(session, run, stage, now)

    def set_project_tag(self, actor: Actor, key: object, tag: Entry) -> None:
        self._check_project_tag(tag)
        with self.db.session() as session:
            project = self._own_project(session, actor, key)
            if project.stage != Stage.ACTIVE.value:
                raise InvalidInput(f"experiment {project.id} is deleted; restore it first")
            project_rows.set_tag(session, project, tag.key, tag.value, now_ms())

    def delete_project_tag(self, actor: Actor, key: object, tag_key: str) -> None:
        with self.db.session() as session:
            project = self._own_project(session, actor, key)
            if not project_rows.delete_tag(session, project, tag_key):
                raise NotFound(f"experiment {project.id} has no tag {tag_key!r}")

    @staticmethod
    def _check_project_tag(tag: Entry) -> None:
        check_name("tag", tag.key)
        check_value("tag", tag.value, MAX_PROJECT_TAG_VALUE)

    def _project(self, session: Session, actor: Actor, key: object) -> Project:
        number = project_id(key)
        project = project_rows.get(session, number)
        if project is None or not (project.owner_id is None or actor.may_read(project.owner_id)):
            raise NotFound(f"no experiment (project) with id {number}")
        return project

    def _own_project(self, session: Session, actor: Actor, key: object) -> Project:
        project = self._project(session, actor, key)
        if project.owner_id is None:
            raise Forbidden(
                "the Default experiment (project 0) is everyone's: it cannot be "
                "changed; make one of your own"
            )
        # A job's token makes projects and runs, but renames, deletes or tags no project.
        actor.check_write(project.owner_id, None, f"experiment {project.id}")
        return project

    # -- runs ------------------------------------------------------------------------------------
    def create_run(
        self,
        actor: Actor,
        key: object,
        *,
        name: str | None = None,
        start_time: int | None = None,
        tags: Sequence[Entry] = (),
        user_id: str | None = None,
    ) -> RunRecord:
        """A new run (RUNNING). From a job's token it is a run of that job, a child of the job's
        run unless it names another run of the job as its parent, in the job's project unless
        it names another."""
        given = {t.key: t.value for t in tags}
        for tag in tags:
            self._check_tag(tag)
        named = given.get(RUN_NAME_TAG)
        if name and named and name != named:
            raise InvalidInput(
                f"run_name {name!r} and the tag {RUN_NAME_TAG} {named!r} differ", field="run_name"
            )
        name = name or named or f"run-{secrets.token_hex(3)}"
        check_value("run name", name, MAX_RUN_NAME, "run_name")
        with self.db.session() as session:
            project = self._project(session, actor, key)
            if actor.job_id is not None:
                project, given = self._in_job(session, actor, project, given)
            elif project.owner_id is not None:
                actor.check_write(project.owner_id, None, f"experiment {project.id}")
            if project.stage != Stage.ACTIVE.value:
                raise InvalidInput(f"experiment {project.id} is deleted; restore it first")
            run_id = run_rows.new_run_id()
            run = Run(
                id=run_id,
                project_id=project.id,
                owner_id=actor.user_id,
                job_id=actor.job_id,
                name=name,
                user_id=user_id or actor.user_name,
                status=RunStatus.RUNNING.value,
                start_time=start_time if start_time is not None else now_ms(),
                end_time=None,
                stage=Stage.ACTIVE.value,
                artifact_uri=run_rows.artifact_uri(project.id, run_id),
                inputs=[],
                outputs=[],
            )
            session.add(run)
            session.flush()
            at = time.time()
            given[RUN_NAME_TAG] = name
            info_rows.record(session, run_id, [("tag", k, v, at) for k, v in given.items()])
            return run_rows.record(session, run)

    def _in_job(
        self, session: Session, actor: Actor, project: Project, tags: dict[str, str]
    ) -> tuple[Project, dict[str, str]]:
        """A run a job's code starts: in the job's project if it asked for the Default one,
        a child of the job's run unless it is one of another run of the same job."""
        assert actor.job_id is not None
        job_run = run_rows.get_run(session, actor.job_id)
        if job_run is None:
            raise NotFound(f"no run of job {actor.job_id!r}")
        if project.id == DEFAULT_PROJECT:
            project = session.get(Project, job_run.project_id) or project
        elif project.owner_id is not None:
            actor.check_write(project.owner_id, actor.job_id, f"experiment {project.id}")
        parent = tags.get(PARENT_TAG)
        if parent is None:
            return project, {**tags, PARENT_TAG: actor.job_id}
        found = run_rows.get_run(session, parent)
        if found is None or found.job_id != actor.job_id:
            raise Forbidden(f"a job's runs are children of its own runs, not of {parent!r}")
        return project, tags

    def run(self, actor: Actor, run_id: object) -> RunRecord:
        with self.db.session() as session:
            return run_rows.record(session, self._run(session, actor, run_id))

    def update_run(
        self,
        actor: Actor,
        run_id: object,
        *,
        status: str | None = None,
        end_time: int | None = None,
        name: str | None = None,
    ) -> RunRecord:
        with self.db.session() as session:
            run = self._writable(session, actor, run_id)
            if status is not None:
                if status not in RunStatus.__members__:
                    raise InvalidInput(f"status: one of {', '.join(RunStatus)}, got {status!r}")
                if run.job_id == run.id and status != run.status:
                    raise Conflict(
                        f"run {run.id} is job {run.id}: its status follows the "
                        "job's state (halt the job to stop it)"
                    )
                run.status = status
            if end_time is not None and run.job_id != run.id:
                run.end_time = end_time
            if name:
                check_value("run name", name, MAX_RUN_NAME, "run_name")
                run.name = name
                info_rows.record(session, run.id, [("tag", RUN_NAME_TAG, name, time.time())])
            return run_rows.record(session, run)

    def set_run_stage(self, actor: Actor, run_id: object, stage: Stage) -> None:
        with self.db.session() as session:
            run = self._run(session, actor, run_id)
            actor.check_write(run.owner_id, run.job_id, f"run {run.id}")
            run_rows.set_stage(session, run, stage, now_ms())

    def log(
        self,
        actor: Actor,
        run_id: object,
        *,
        metrics: Sequence[Metric] = (),
        params: Sequence[Entry] = (),
        tags: Sequence[Entry] = (),
    ) -> None:
        """Log to a run: the one way params, tags and metrics get in from MLflow's API. A param
        keeps its first value (another is refused, as MLflow does), a tag its newest."""
        check_batch(len(metrics), len(params), len(tags))
        for key in {metric.key for metric in metrics}:
            check_name("metric", key)
        for param in params:
            check_name("param", param.key)
            check_value("param", param.value, 6000)
        for tag in tags:
            self._check_tag(tag)
        check_unique_params(list(params))
        at = time.time()
        entries = [("param", p.key, p.value, at) for p in params]
        entries += [("tag", t.key, t.value, at) for t in tags]
        with self.db.session() as session:
            run = self._writable(session, actor, run_id)
            stored = info_rows.params_of(session, run.id, {p.key for p in params})
            for param in params:
                before = stored.get(param.key)
                if before is not None and before != param.value:
                    raise param_changed(run.id, param.key, before, param.value)
            renamed = next((t.value for t in reversed(tags) if t.key == RUN_NAME_TAG), None)
            if renamed is not None and run.job_id != run.id:
                run.name = renamed[:MAX_RUN_NAME]
            if run.job_id is None:
                run_rows.insert_metrics(session, run.id, metrics)
                run_rows.keep_latest(session, run_rows.newest((run.id, m) for m in metrics))
                info_rows.record(session, run.id, entries)
                return
            job_id, own = run.job_id, run.job_id == run.id
        refused = self.tds.record_run(
            job_id, None if own else str(run_id), job_points(metrics), entries
        )
        if refused:
            raise PayloadTooLarge(
                f"{refused} of {len(entries)} parameters and tags were not logged: job {job_id} "
                "is over its budget for them (LOOM_MAX_RUN_INFO, LOOM_MAX_RUN_INFO_MB), which "
                "counts every run it starts"
            )

    def delete_tag(self, actor: Actor, run_id: object, key: str) -> None:
        with self.db.session() as session:
            run = self._writable(session, actor, run_id)
            if not info_rows.delete_tag(session, run.id, key):
                raise NotFound(f"run {run.id} has no tag {key!r}")

    def history(self, actor: Actor, run_id: object, key: str) -> list[Metric]:
        """Every value logged of one metric, by time, then step, then value."""
        with self.db.session() as session:
            run = self._run(session, actor, run_id)
            if run.job_id is None:
                return run_rows.history(session, run.id, key)
            group, name = split_key(key)
            own = None if run.job_id == run.id else run.id
            points = metric_rows.run_points(session, run.job_id, own, group, name)
        found = [
            Metric(
                key,
                math.nan if p.values.get(name) is None else p.values[name],
                round(p.time * 1000),
                p.step if p.step is not None else p.seq,
            )
            for p in points
        ]
        return sorted(found, key=lambda m: (m.timestamp, m.step, m.order[2]))

    def search_runs(
        self,
        actor: Actor,
        project_ids: Sequence[object],
        *,
        filter: str | None = None,
        view: View = View.ACTIVE_ONLY,
        order_by: list[str] | None = None,
        max_results: int = 1000,
        offset: int = 0,
    ) -> Page[RunRecord]:
        limit = checked_page(max_results)
        clauses = parse_filter(filter, RUNS)
        order = parse_order_by(order_by, RUNS)
        ids = [project_id(key, "experiment_ids") for key in project_ids]
        with self.db.session() as session:
            found = run_search.search_runs(
                session,
                project_ids=ids,
                owner_id=None if actor.is_admin else actor.user_id,
                stages=view.stages,
                clauses=clauses,
                order=order,
                offset=offset,
                limit=limit + 1,
            )
            more = len(found) > limit
            return Page(run_rows.records(session, found[:limit]), offset + limit if more else None)

    def set_io(self, actor: Actor, run_id: object, field: str, entries: list[Any]) -> None:
        """MLflow's run inputs (datasets) or outputs (logged models), kept as sent."""
        with self.db.session() as session:
            run = self._writable(session, actor, run_id)
            setattr(run, field, [*getattr(run, field), *entries][-1000:])

    def io(self, actor: Actor, run_id: object) -> tuple[list[Any], list[Any]]:
        with self.db.session() as session:
            run = self._run(session, actor, run_id)
            return list(run.inputs or []), list(run.outputs or [])

    @staticmethod
    def _check_tag(tag: Entry) -> None:
        check_name("tag", tag.key)
        check_value("tag", tag.value, MAX_TAG_VALUE)

    def _run(self, session: Session, actor: Actor, run_id: object) -> Run:
        run = run_rows.get_run(session, check_run_id(run_id))
        if run is None or not actor.may_read(run.owner_id):
            raise NotFound(f"no run with id {run_id}")
        return run

    def _writable(self, session: Session, actor: Actor, run_id: object) -> Run:
        run = self._run(session, actor, run_id)
        actor.check_write(run.owner_id, run.job_id, f"run {run.id}")
        if run.stage != Stage.ACTIVE.value:
            raise InvalidInput(f"run {run.id} is deleted; restore it first", field="run_id")
        return run


def job_points(metrics: Sequence[Metric]) -> list[dict[str, Any]]:
    """Metrics as points of a job's stream: one point a value, its group from its key, its time
    the metric's own; NaN kept as null, infinities as the largest floats."""
    points = []
    for metric in metrics:
        group, name = split_key(metric.key)
        value = metric.value  # NaN is stored as null
        if math.isinf(value):
            value = LARGEST_FLOAT if value > 0 else -LARGEST_FLOAT
        points.append(
            {
                "time": metric.timestamp / 1000,
                "group": group,
                "step": metric.step,
                "values": {name: value},
            }
        )
    return points
