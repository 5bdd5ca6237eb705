"""Runs as a service: MLflow's search grammar over runs (filters, order, pages), MLflow's rule
for a run's latest metric and its params, every job a run and a job's child runs in its
stream, and who may see and change which run."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loom.domain.errors import Conflict, Forbidden, InvalidInput, NotFound, PayloadTooLarge
from loom.domain.runs import Actor, Entry, Metric, Stage, View
from loom.store import jobs as job_rows
from loom.store import users as user_rows
from loom.store.db import Database, migrate
from loom.store.tables import Job
from loom.tds.budgets import Allowance, Limits
from loom.tds.metrics import MetricQuery
from loom.tds.runs import Runs
from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals
from tests.conftest import database_url

T0 = 1_700_000_000_000


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    db = Database(database_url(tmp_path))
    migrate(db.engine)
    yield Runs(db, TrainingData(db, JobSignals()))
    db.close()


def user(runs: Runs, name: str, admin: bool = False) -> Actor:
    with runs.db.session() as session:
        found = user_rows.add_user(session, name, is_admin=admin)
        return Actor(found.id, found.name, admin)


def three(runs: Runs, who: Actor) -> tuple[int, list[str]]:
    """A project with runs a (lr 0.1, loss 0.5, team Vision), b (lr 0.2, loss NaN) and c (lr
    0.1, no loss), started in that order."""
    project = runs.create_project(who, "p")
    made = []
    for n, (lr, loss, team) in enumerate(
        [("0.1", 0.5, "Vision"), ("0.2", math.nan, "nlp"), ("0.1", None, None)]
    ):
        run = runs.create_run(who, str(project), name="abc"[n], start_time=T0 + n)
        metrics = [] if loss is None else [Metric("loss", loss, T0, 1)]
        tags = [] if team is None else [Entry("team", team)]
        runs.log(who, run.id, metrics=metrics, params=[Entry("lr", lr)], tags=tags)
        made.append(run.id)
    return project, made


def names(runs: Runs, who: Actor, project: int, **asked: object) -> list[str]:
    page = runs.search_runs(who, [str(project)], **asked)  # type: ignore[arg-type]
    return [run.name for run in page.items]


def test_search_with_mlflows_grammar(runs: Runs) -> None:
    """Each kind of comparison selects as MLflow's does: a run without the key never matches
    (not even `!=`); a NaN metric matches only `!=`; LIKE is case-sensitive, ILIKE is not."""
    ana = user(runs, "ana")
    project, made = three(runs, ana)
    assert names(runs, ana, project) == ["c", "b", "a"]  # newest first
    assert names(runs, ana, project, filter="metrics.loss < 1") == ["a"]
    assert names(runs, ana, project, filter="metrics.loss != 1") == ["b", "a"]
    assert names(runs, ana, project, filter="params.lr = '0.1'") == ["c", "a"]
    assert names(runs, ana, project, filter="params.lr != '0.1'") == ["b"]
    assert names(runs, ana, project, filter="tags.team LIKE 'vis%'") == []
    assert names(runs, ana, project, filter="tags.team ILIKE 'vis%'") == ["a"]
    assert names(runs, ana, project, filter="tags.team LIKE 'Vis_on'") == ["a"]
    assert names(runs, ana, project, filter="tags.team IS NULL") == ["c"]
    assert names(runs, ana, project, filter=f"run_id IN ('{made[0]}', '{made[2]}')") == ["c", "a"]
    with pytest.raises(InvalidInput, match="IN does not compare attribute 'run_name'"):
        names(runs, ana, project, filter="attributes.run_name IN ('a', 'c')")
    assert names(runs, ana, project, filter="run_name = 'b' and status = 'RUNNING'") == ["b"]
    assert names(runs, ana, project, filter=f"attributes.start_time >= {T0 + 1}") == ["c", "b"]
    with pytest.raises(InvalidInput, match="AND only"):
        names(runs, ana, project, filter="params.lr = '0.1' OR params.lr = '0.2'")


def test_ordering_and_pages(runs: Runs) -> None:
    """Ordered by a metric, runs without it come last and a NaN before them, whichever the
    direction; pages follow each other without a gap or a repeat."""
    ana = user(runs, "ana")
    project, _made = three(runs, ana)
    assert names(runs, ana, project, order_by=["metrics.loss ASC"]) == ["a", "b", "c"]
    assert names(runs, ana, project, order_by=["metrics.loss DESC"]) == ["a", "b", "c"]
    assert names(runs, ana, project, order_by=["params.lr DESC", "run_name"]) == ["b", "a", "c"]
    first = runs.search_runs(ana, [str(project)], max_results=2)
    assert first.next_offset == 2
    second = runs.search_runs(ana, [str(project)], max_results=2, offset=2)
    assert [r.name for r in first.items + second.items] == ["c", "b", "a"]
    assert second.next_offset is None


def test_latest_metric_and_params(runs: Runs) -> None:
    """The latest value is the one of the highest step, then time, then value, whatever the
    order they came in; a param keeps its value, and another is refused in MLflow's words."""
    ana = user(runs, "ana")
    run = runs.create_run(ana, "0", name="r").id
    runs.log(ana, run, metrics=[Metric("m", 3.0, T0 + 9, 1), Metric("m", 1.0, T0, 2)])
    runs.log(ana, run, metrics=[Metric("m", 2.0, T0 + 5, 2), Metric("m", 9.0, T0 + 99, 0)])
    assert runs.run(ana, run).metrics == [Metric("m", 2.0, T0 + 5, 2)]
    history = [(m.step, m.value) for m in runs.history(ana, run, "m")]
    assert history == [(2, 1.0), (2, 2.0), (1, 3.0), (0, 9.0)]  # by time, then step, value
    runs.log(ana, run, params=[Entry("lr", "0.1")])
    runs.log(ana, run, params=[Entry("lr", "0.1")])  # the same again: fine
    with pytest.raises(InvalidInput, match="Changing param values is not allowed"):
        runs.log(ana, run, params=[Entry("lr", "0.2")])
    with pytest.raises(InvalidInput, match="would read as the path"):
        runs.log(ana, run, params=[Entry("../x", "1")])


def job_of(runs: Runs, who: Actor, job_id: str = "training-a") -> str:
    with runs.db.session() as session:
        job_rows.add_job(
            session,
            Job(
                id=job_id,
                owner_id=who.user_id,
                name="digits",
                state="QUEUED",
                manifest="{}",
                code_digest="x",
                learners=1,
                cpus=1,
                memory=1,
                gpus=0,
                submitted_at=time.time(),
            ),
        )
    return job_id


def test_a_job_is_a_run_and_its_code_starts_child_runs(runs: Runs) -> None:
    """A job's run has the job's id; a run its token starts is a child of it, in its project,
    with its metrics in the job's stream (and read back from there); the token cannot write to
    another run nor change a project; the job's run's status follows the job alone."""
    ana = user(runs, "ana")
    job_id = job_of(runs, ana)
    job_run = runs.run(ana, job_id)
    assert (job_run.is_job, job_run.name, job_run.status) == (True, "digits", "SCHEDULED")
    learner = Actor(ana.user_id, ana.user_name, job_id=job_id)
    child = runs.create_run(learner, "0", name="inner")
    assert (child.job_id, child.project_id, child.tags["mlflow.parentRunId"]) == (
        job_id,
        job_run.project_id,
        job_id,
    )
    runs.log(
        learner,
        child.id,
        metrics=[Metric("test/acc", 0.5, T0, 1), Metric("test/acc", 0.7, T0 + 1, 2)],
    )
    assert [m.value for m in runs.history(ana, child.id, "test/acc")] == [0.5, 0.7]
    assert runs.history(ana, job_id, "test/acc") == []  # the job's own run has none
    series = runs.tds.metrics.series(job_id, MetricQuery())
    assert series["series"]["test"]["acc"]["values"] == [0.5, 0.7]  # in the job's charts too
    elsewhere = runs.create_run(ana, "0", name="notebook")
    with pytest.raises(Forbidden):
        runs.log(learner, elsewhere.id, params=[Entry("x", "1")])
    kept = runs.create_project(ana, "kept")
    with pytest.raises(Forbidden):  # the owner's projects are not the job's to change
        runs.set_project_stage(learner, kept, Stage.DELETED)
    assert runs.create_run(learner, str(kept), name="there").project_id == kept
    with pytest.raises(Conflict):
        runs.update_run(ana, job_id, status="FINISHED")
    found = runs.search_runs(
        ana, [str(job_run.project_id)], filter=f"tags.mlflow.parentRunId = '{job_id}'"
    )
    assert [r.id for r in found.items] == [child.id]


def test_tenancy(runs: Runs) -> None:
    """Another user's run and project are absent; the Default project is no one's to change;
    an admin sees every run."""
    ana, bo, root = user(runs, "ana"), user(runs, "bo"), user(runs, "root", admin=True)
    project, made = three(runs, ana)
    for action in (
        lambda: runs.run(bo, made[0]),
        lambda: runs.project(bo, project),
        lambda: runs.set_run_stage(bo, made[0], Stage.DELETED),
    ):
        with pytest.raises(NotFound):
            action()
    with pytest.raises(Forbidden):
        runs.rename_project(bo, "0", "mine")
    assert runs.search_runs(bo, [str(project)]).items == []
    assert len(runs.search_runs(root, [str(project)]).items) == 3
    runs.set_project_stage(ana, project, Stage.DELETED)  # its runs go with it
    assert runs.search_runs(ana, [str(project)]).items == []
    assert len(runs.search_runs(ana, [str(project)], view=View.DELETED_ONLY).items) == 3


def test_a_jobs_runs_share_its_budget_for_params_and_tags(tmp_path: Path) -> None:
    """Params a job's code logs into runs it started count against the job's budget with its
    own run's: past it they are refused (413, PayloadTooLarge), what fitted is kept, and the
    job's log says where they were cut."""
    db = Database(database_url(tmp_path))
    migrate(db.engine)
    limits = Limits(run_info=Allowance(rows=5))
    runs = Runs(db, TrainingData(db, JobSignals(), limits=limits))
    try:
        ana = user(runs, "ana")
        job_id = job_of(runs, ana)
        learner = Actor(ana.user_id, ana.user_name, job_id=job_id)
        runs.log(learner, job_id, params=[Entry("own", "1"), Entry("lr", "0.1")])
        first = runs.create_run(learner, "0", name="first")
        runs.log(learner, first.id, params=[Entry("a", "1"), Entry("b", "2")])
        second = runs.create_run(learner, "0", name="second")
        with pytest.raises(PayloadTooLarge, match="LOOM_MAX_RUN_INFO"):
            runs.log(learner, second.id, params=[Entry("c", "3"), Entry("d", "4")])
        kept = runs.run(ana, second.id).params
        assert len(kept) == 1  # the fifth entry fitted, the sixth did not
        said = [line.text for line in runs.tds.logs.after(job_id, 0, None, 100)]
        assert any("parameters and tags of this job were cut" in s for s in said)
    finally:
        db.close()
