"""The lifecycle manager over the in-memory launcher: admission, state changes, halt, reconcile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loom.domain.errors import InvalidInput
from loom.domain.manifest import load_manifest
from loom.domain.resources import Resources
from loom.launchers.base import LearnerStatus, Liveness
from loom.launchers.fake import FakeLauncher
from loom.lifecycle.manager import LifecycleManager
from loom.lifecycle.workspace import Workspace
from loom.settings import Settings
from loom.storage.artifacts import ArtifactStore
from loom.store import jobs as job_rows
from loom.store import users as user_rows
from loom.store.db import Database, migrate
from loom.store.secret_keys import SecretKeys
from loom.store.tables import User
from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals
from tests.conftest import database_url, make_zip, manifest

GIB = 2**30


class Rig:
    def __init__(self, tmp: Path, launcher: FakeLauncher) -> None:
        self.settings = Settings(home=tmp, database_url=database_url(tmp))
        self.db = Database(self.settings.db_url)
        migrate(self.db.engine)
        self.launcher = launcher
        self.tds = TrainingData(self.db, JobSignals())
        self.manager = LifecycleManager(
            self.settings,
            self.db,
            launcher,
            ArtifactStore(tmp / "artifacts"),
            self.tds,
            SecretKeys.ephemeral(),
        )
        with self.db.session() as session:
            self.user: User = user_rows.add_user(session, "ada")

    def submit(self, **fields: object) -> str:
        m, original = load_manifest(manifest("python t.py", **fields))
        return self.manager.submit(self.user, m, original, make_zip({"t.py": ""})).id

    def state(self, job_id: str) -> str:
        with self.db.session() as session:
            job = job_rows.get_job(session, job_id)
            assert job is not None
            return job.state

    def state_message(self, job_id: str) -> str:
        with self.db.session() as session:
            job = job_rows.get_job(session, job_id)
            assert job is not None
            return job.status_message

    def handles(self, job_id: str) -> list[str]:
        with self.db.session() as session:
            return [lr.handle for lr in job_rows.learners_of(session, job_id)]

    def write_model(self, job_id: str) -> None:
        """What a learner that trained a model leaves: a file in RESULT_DIR/model/."""
        model = Workspace(self.settings.jobs_dir, job_id).results / "model"
        model.mkdir(parents=True, exist_ok=True)
        (model / "weights.bin").write_bytes(b"w")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    launcher = FakeLauncher(Resources(cpus=2, memory=8 * GIB, gpus=0))
    made = Rig(tmp_path, launcher)
    yield made
    made.db.close()


def test_admits_and_follows_a_job_to_completion(rig: Rig) -> None:
    """A queued job is launched, follows its learner's reports and completes, with history."""
    job_id = rig.submit()
    rig.manager.step()
    assert rig.state(job_id) == "PENDING"
    (handle,) = rig.handles(job_id)
    rig.manager.report(job_id, 1, 1, {"state": "PROCESSING"})
    assert rig.state(job_id) == "PROCESSING"
    rig.launcher.finish(handle, {"state": "COMPLETED", "exit_code": 0})
    rig.manager.step()
    assert rig.state(job_id) == "COMPLETED"
    with rig.db.session() as session:
        states = [e.state for e in job_rows.history(session, job_id)]
    assert states == ["QUEUED", "PENDING", "PROCESSING", "COMPLETED"]


def test_a_storing_wrapper_is_heard_from_itself_not_its_file(rig: Rig) -> None:
    """A running wrapper whose file says STORING (written, not told, when the results stay
    here) is left to report: a step meanwhile does not take STORING from the file ahead of its
    PROCESSING report still on the way, which would then be dropped as stale."""
    job_id = rig.submit()
    rig.manager.step()
    (handle,) = rig.handles(job_id)
    rig.launcher.states[handle] = LearnerStatus(Liveness.RUNNING, {"state": "STORING"})
    rig.manager.step()
    assert rig.state(job_id) == "PENDING"
    rig.manager.report(job_id, 1, 1, {"state": "PROCESSING"})
    rig.launcher.finish(handle, {"state": "COMPLETED", "exit_code": 0})
    rig.manager.step()
    with rig.db.session() as session:
        states = [e.state for e in job_rows.history(session, job_id)]
    assert states == ["QUEUED", "PENDING", "PROCESSING", "COMPLETED"]


def test_waiting_job_records_why(rig: Rig) -> None:
    """A job that does not fit stays queued with the reason."""
    first = rig.submit(cpus=2)
    second = rig.submit(cpus=1)
    rig.manager.step()
    assert rig.state(first) == "PENDING"
    assert rig.state(second) == "QUEUED"
    with rig.db.session() as session:
        job = job_rows.get_job(session, second)
        assert job is not None
        assert job.queue_reason == "needs 1 CPUs, 0 free"


def test_one_failed_learner_fails_the_gang_and_stops_the_rest(rig: Rig) -> None:
    """When one learner fails, the job fails with its code and the others are terminated."""
    job_id = rig.submit(learners=2, cpus=1)
    rig.manager.step()
    first, second = rig.handles(job_id)
    report = {"state": "FAILED", "exit_code": 3, "error_code": "C201", "message": "boom"}
    rig.launcher.finish(first, report)
    rig.manager.step()
    assert rig.state(job_id) == "FAILED"
    assert second in rig.launcher.terminated


def test_lost_learner_fails_with_platform_code(rig: Rig) -> None:
    """A learner whose process vanished without a word fails the job with S200."""
    job_id = rig.submit()
    rig.manager.step()
    (handle,) = rig.handles(job_id)
    rig.launcher.lose(handle)
    rig.manager.step()
    with rig.db.session() as session:
        job = job_rows.get_job(session, job_id)
        assert job is not None
        assert (job.state, job.error_code) == ("FAILED", "S200")


def test_halt_queued_and_running(rig: Rig) -> None:
    """A queued job halts at once; a running one once its learners stopped."""
    running = rig.submit(cpus=2)
    queued = rig.submit(cpus=2)
    rig.manager.step()
    rig.manager.halt(queued)
    assert rig.state(queued) == "HALTED"
    rig.manager.halt(running)
    rig.manager.step()
    assert rig.state(running) == "HALTED"


def test_impossible_job_is_refused_at_submission(rig: Rig) -> None:
    """A job bigger than the whole platform is a 400 naming the field, never queued."""
    with pytest.raises(InvalidInput) as caught:
        rig.submit(cpus=64)
    assert caught.value.field == "cpus" and "needs 64 CPUs" in caught.value.message
    assert caught.value.code is not None and caught.value.code.value == "S100"
    with rig.db.session() as session:
        assert job_rows.list_jobs(session).total == 0


def test_a_job_the_platform_shrank_under_fails_with_s100(rig: Rig) -> None:
    """A queued job that no longer fits the whole platform (it shrank) fails with FfDL's
    insufficient-resources code."""
    job_id = rig.submit(cpus=2)
    rig.launcher._capacity = Resources(1, rig.launcher._capacity.memory, 0)
    rig.manager.step()
    with rig.db.session() as session:
        job = job_rows.get_job(session, job_id)
        assert job is not None
        assert (job.state, job.error_code) == ("FAILED", "S100")
        assert "2 CPUs" in job.status_message


def test_launch_failure_is_a_platform_failure(tmp_path: Path) -> None:
    """A launcher that cannot start learners fails the job with S101, not the user's code."""
    made = Rig(tmp_path, FakeLauncher(fail_launch=True))
    job_id = made.submit()
    made.manager.step()
    with made.db.session() as session:
        job = job_rows.get_job(session, job_id)
        assert job is not None
        assert (job.state, job.error_code) == ("FAILED", "S101")


def test_reconcile_requeues_a_job_whose_learners_never_started(rig: Rig) -> None:
    """After a crash between admission and launch the job is queued again, not lost."""
    job_id = rig.submit()
    with rig.manager._lock, rig.manager._session() as session:
        job = job_rows.get_job(session, job_id)
        assert job is not None
        rig.manager._admit(session, job, set())  # admitted, but the launch never happened
    assert rig.state(job_id) == "PENDING"
    rig.manager.reconcile()
    assert rig.state(job_id) == "QUEUED"
    rig.manager.step()
    assert rig.state(job_id) == "PENDING"
    assert len(rig.launcher.launched) == 1


def test_backfill_of_a_finished_learner_stores_what_it_never_sent(rig: Rig) -> None:
    """A learner that ended while the platform was away is read from its spool: lines and
    points it had not delivered are stored once, in the same transaction as its outcome."""
    job_id = rig.submit()
    rig.manager.step()
    (handle,) = rig.handles(job_id)
    rig.tds.ingest(job_id, 1, 1, [{"seq": 1, "time": 1.0, "text": "one"}], [])
    rig.launcher.lines[handle] = [
        {"seq": 1, "time": 1.0, "text": "one"},
        {"seq": 2, "time": 2.0, "text": "two"},
        {"k": "m", "seq": 1, "time": 2.0, "group": "train", "step": 1, "values": {"loss": 0.5}},
    ]
    rig.launcher.finish(
        handle, {"state": "COMPLETED", "exit_code": 0, "last_seq": 2, "last_mseq": 1}
    )
    rig.manager.step()
    assert rig.state(job_id) == "COMPLETED"
    from loom.tds.logs import LogQuery
    from loom.tds.metrics import MetricQuery

    assert [r.text for r in rig.tds.logs.query(job_id, LogQuery())] == ["one", "two"]
    assert [r.values for r in rig.tds.metrics.query(job_id, MetricQuery())] == [{"loss": 0.5}]


def restartable(rig: Rig) -> str:
    return rig.submit(learners=2, cpus=1, restart_policy="OnFailure", max_restarts=3)


def test_gang_restart_then_halt_then_resume_still_stops_peers(rig: Rig) -> None:
    """A halt during a gang restart, then a resume: the next failure still stops the peers."""
    job_id = restartable(rig)
    rig.manager.step()
    first, second = rig.handles(job_id)
    rig.launcher.stop_on_terminate = False
    rig.launcher.finish(first, {"state": "FAILED", "exit_code": 137, "error_code": "C201"})
    rig.manager.step()  # the peer is told to stop and takes its time
    rig.manager.halt(job_id)
    rig.launcher.finish(second, {"state": "HALTED"})
    rig.manager.step()
    assert rig.state(job_id) == "HALTED"
    rig.launcher.stop_on_terminate = True
    rig.manager.resume(job_id)
    rig.manager.step()
    handles = [h for h in rig.handles(job_id) if "attempt-2" in h]
    rig.launcher.terminated.clear()
    rig.launcher.finish(handles[0], {"state": "FAILED", "exit_code": 137, "error_code": "C201"})
    rig.manager.step()
    assert handles[1] in rig.launcher.terminated


def test_first_failure_decides_under_exit_code(rig: Rig) -> None:
    """A peer's exit 1 after its partner was killed (137) does not make the failure permanent."""
    job_id = rig.submit(learners=2, cpus=1, restart_policy="ExitCode", max_restarts=2)
    rig.manager.step()
    first, second = rig.handles(job_id)
    rig.launcher.finish(second, {"state": "FAILED", "exit_code": 137, "error_code": "C201"})
    rig.manager.step()
    rig.launcher.finish(first, {"state": "FAILED", "exit_code": 1, "error_code": "C201"})
    rig.manager.step()
    assert rig.state(job_id) in {"QUEUED", "PENDING"}  # restarted, as the killed learner allows


def test_halt_arriving_while_storing_keeps_completed(rig: Rig) -> None:
    """A halt that arrives once every learner completed does not turn the job into HALTED."""
    job_id = rig.submit()
    rig.manager.step()
    (handle,) = rig.handles(job_id)
    rig.manager.report(job_id, 1, 1, {"state": "STORING"})
    rig.manager.halt(job_id)
    rig.launcher.states[handle] = rig.launcher.states[handle].__class__(
        rig.launcher.states[handle].liveness.EXITED, {"state": "COMPLETED", "exit_code": 0}
    )
    rig.manager.step()
    assert rig.state(job_id) == "COMPLETED"


class RecordingRegistry:
    """Stands in for the model registry: notes the job's state when asked to register."""

    def __init__(self, rig: Rig, fail: bool = False) -> None:
        self.rig, self.fail = rig, fail
        self.seen: list[str] = []

    def register(self, job: object, *_args: object) -> object:
        self.seen.append(self.rig.state(job.id))  # type: ignore[attr-defined]
        if self.fail:
            raise OSError("artifact store unreachable")
        return type("Version", (), {"version": 3})()


@pytest.mark.parametrize("fail", [False, True])
def test_completed_only_once_the_model_is_registered(rig: Rig, fail: bool) -> None:
    """A client that sees COMPLETED finds the model version: the job is STORING while its model
    is registered; a registry failure still completes the job, and says so."""
    registry = RecordingRegistry(rig, fail)
    rig.manager.registry = registry  # type: ignore[assignment]
    job_id = rig.submit()
    rig.manager.step()
    (handle,) = rig.handles(job_id)
    rig.write_model(job_id)
    rig.launcher.finish(handle, {"state": "COMPLETED", "exit_code": 0})
    rig.manager.step()
    assert registry.seen == ["STORING"]
    with rig.db.session() as session:
        states = [e.state for e in job_rows.history(session, job_id)]
        job = job_rows.get_job(session, job_id)
        assert job is not None
    assert states[-2:] == ["STORING", "COMPLETED"]
    expected = "could not be registered" if fail else "registered model version 3"
    assert expected in job.status_message


def test_a_job_with_nothing_to_register_completes_with_its_learners(rig: Rig) -> None:
    """A job that left no model and no evaluations completes in the transaction that applied
    its learner's outcome: no STORING round, no registry call, no step needed."""
    registry = RecordingRegistry(rig)
    rig.manager.registry = registry  # type: ignore[assignment]
    job_id = rig.submit()
    rig.manager.step()
    rig.manager.report(job_id, 1, 1, {"state": "PROCESSING"})
    rig.manager.report(job_id, 1, 1, {"state": "COMPLETED", "exit_code": 0})
    assert rig.state(job_id) == "COMPLETED"
    assert registry.seen == []
    with rig.db.session() as session:
        states = [e.state for e in job_rows.history(session, job_id)]
    assert states == ["QUEUED", "PENDING", "PROCESSING", "COMPLETED"]


def test_an_outcome_wakes_the_loop_and_progress_does_not(rig: Rig) -> None:
    """A learner's report changes its job's state in the call that carries it; only an outcome
    (which frees resources for the queue) wakes the lifecycle's loop, progress never does."""
    woken: list[str] = []
    rig.manager.on_wake = lambda: woken.append("wake")
    job_id = rig.submit()
    rig.manager.step()
    woken.clear()
    for state in ("DOWNLOADING", "PROCESSING", "STORING"):
        rig.manager.report(job_id, 1, 1, {"state": state})
        assert rig.state(job_id) == state
    assert woken == []
    rig.manager.report(job_id, 1, 1, {"state": "COMPLETED", "exit_code": 0})
    assert rig.state(job_id) == "COMPLETED"
    assert woken == ["wake"]


def test_only_a_trials_or_a_steps_job_wakes_the_drivers(rig: Rig) -> None:
    """The experiments' and pipelines' drivers are told the kinds of the jobs that moved: a
    plain job's moves tell them nothing (each wake was a pass over their rows for nothing)."""
    told: list[set[str]] = []
    rig.manager.on_change = lambda kinds: told.append(set(kinds))
    plain = rig.submit()
    m, original = load_manifest(manifest("python t.py"))
    lineage = {"kind": "experiment", "experiment": "e", "trial": 0}
    trial = rig.manager.submit(rig.user, m, original, make_zip({"t.py": ""}), lineage=lineage)
    rig.manager.step()  # both launched: PENDING
    assert told == [{"experiment"}]
    told.clear()
    rig.manager.report(plain, 1, 1, {"state": "PROCESSING"})
    assert told == []
    rig.manager.report(trial.id, 1, 1, {"state": "PROCESSING"})
    assert told == [{"experiment"}]


def test_credentials_are_stored_sealed_and_opened_only_to_launch(rig: Rig) -> None:
    """The stored manifest shows `***`; the launch gets the credentials; a key that does not
    open them keeps the job queued, saying why, until the right key is back."""
    store = "[{id: s, type: s3_datastore, connection: {auth_url: 'http://s3', password: pw-1}}]"
    job_id = rig.submit(data_stores=store)
    with rig.db.session() as session:
        job = job_rows.get_job(session, job_id)
        assert job is not None and "pw-1" not in job.manifest
    right, rig.manager.keys = rig.manager.keys, SecretKeys.ephemeral()
    rig.manager.step()
    assert rig.state(job_id) == "QUEUED" and not rig.launcher.launched
    with rig.db.session() as session:
        job = job_rows.get_job(session, job_id)
        assert job is not None and "cannot be opened" in job.queue_reason
    rig.manager.keys = right
    rig.manager.step()
    (launch,) = rig.launcher.launched.values()
    assert launch.secrets == {"s": {"password": "pw-1"}}


def test_a_job_left_storing_is_finished_by_the_next_step(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the transaction that would complete a job fails (here: the database is busy once),
    the job is not left STORING: the next step registers its model and completes it."""
    registry = RecordingRegistry(rig)
    rig.manager.registry = registry  # type: ignore[assignment]
    job_id = rig.submit()
    rig.manager.step()
    (handle,) = rig.handles(job_id)
    rig.write_model(job_id)
    rig.launcher.finish(handle, {"state": "COMPLETED", "exit_code": 0})
    real, calls = rig.manager._register, []

    def busy_once(job: str) -> None:
        calls.append(job)
        if len(calls) == 1:
            raise OSError("database is locked")
        real(job)

    monkeypatch.setattr(rig.manager, "_register", busy_once)
    with pytest.raises(OSError):
        rig.manager.step()
    assert rig.state(job_id) == "STORING"
    rig.manager.step()
    assert rig.state(job_id) == "COMPLETED"
    assert registry.seen == ["STORING"]


def test_queue_wait_counts_from_the_last_time_a_job_was_queued(rig: Rig) -> None:
    """A job queued long ago, halted, then resumed waits from its resumption: the queue wait is
    observed each time it leaves the queue, and the admission and the scheduler pass counted."""
    job_id = rig.submit()
    with rig.db.session() as session:
        (submitted,) = job_rows.history(session, job_id)
        submitted.at -= 1000  # submitted 1000 s ago
    rig.manager.halt(job_id)
    rig.manager.resume(job_id)
    rig.manager.step()
    assert rig.state(job_id) == "PENDING"
    sample = rig.manager.platform_metrics.registry.get_sample_value
    assert sample("loom_queue_wait_seconds_count") == 2  # halted, then admitted
    assert 1000 <= (sample("loom_queue_wait_seconds_sum") or 0) < 1060
    # The second wait is seconds at most, however busy the machine: it is not the 1000 s one.
    assert sample("loom_queue_wait_seconds_bucket", {"le": "60.0"}) == 1
    assert sample("loom_admissions_total") == 1
    assert sample("loom_scheduler_pass_seconds_count") == 1


def test_a_pass_reads_the_queue_only_up_to_its_horizon(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind `scheduler_horizon` waiting jobs the queue is not read job by job: those jobs are
    told there are more ahead, one that could never fit still fails, and the head still
    starts when room appears."""
    from loom.lifecycle import queue_pass

    monkeypatch.setattr(queue_pass, "CHUNK", 3)
    rig.manager.settings = rig.settings.model_copy(update={"scheduler_horizon": 5})
    running = rig.submit(cpus=2)
    rig.manager.step()
    queued = [rig.submit(cpus=1) for _ in range(12)]
    room = rig.launcher._capacity
    rig.launcher._capacity = Resources(64, room.memory, room.gpus)  # accepted, then shrunk
    impossible = rig.submit(cpus=64)
    rig.launcher._capacity = room
    rig.manager.step()

    def reason(job_id: str) -> str:
        with rig.db.session() as session:
            job = job_rows.get_job(session, job_id)
            assert job is not None
            return job.queue_reason

    assert rig.state(running) == "PENDING"
    assert reason(queued[0]) == "needs 1 CPUs, 0 free"
    assert reason(queued[4]) == "waiting for 4 jobs ahead in the queue to start (yours: " + (
        ", ".join(queued[:3]) + ", …)"
    )
    assert reason(queued[5]) == "waiting for 5 jobs ahead in the queue to start (yours: " + (
        ", ".join(queued[:3]) + ", …)"
    )
    behind = "waiting for more than 5 jobs ahead in the queue to start"
    assert [reason(j) for j in queued[6:]] == [behind] * 6
    assert rig.state(impossible) == "FAILED" and "64 CPUs" in rig.state_message(impossible)
    rig.launcher._capacity = Resources(cpus=3, memory=8 * GIB, gpus=0)
    rig.manager.step()
    assert [rig.state(j) for j in queued[:2]] == ["PENDING", "QUEUED"]
    assert reason(queued[-1]) == behind


def test_on_a_cluster_a_job_too_big_for_it_now_waits(rig: Rig) -> None:
    """A cluster's nodes come and go (one lost, one added): a job more than it has now is
    taken and waits with the reason, where one machine would refuse it or fail it."""
    rig.launcher.elastic = True
    big = rig.submit(cpus=64)
    rig.manager.step()
    assert rig.state(big) == "QUEUED"
    with rig.db.session() as session:
        job = job_rows.get_job(session, big)
        assert job is not None
        assert job.queue_reason == (
            "waiting for the cluster to grow: needs more than this platform has: "
            "needs 64 CPUs, 2 in total"
        )
