"""The lifecycle manager: one thread that admits queued jobs and follows running ones.

It is woken by events (a submission, a learner's report, a halt) and, as a safety net, every
`watchdog_interval_s` to notice learners that died without a word. Every change of a job's state
happens under one lock, through `_transition`, which stores it in the job's history.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from loom.domain.credentials import merge, split
from loom.domain.errors import (
    Conflict,
    ErrorCode,
    LaunchError,
    ManifestError,
    NotFound,
    SecretKeyError,
)
from loom.domain.manifest import Manifest, manifest_from_dict
from loom.domain.restarts import Failure, decide
from loom.domain.states import (
    HALTABLE_STATES,
    RUNNING_STATES,
    TERMINAL_STATES,
    JobState,
    aggregate,
    can_transition,
)
from loom.launchers.base import Launcher, LearnerLaunch, LearnerStatus, Liveness
from loom.lifecycle import queue_pass
from loom.lifecycle.admission import (
    capacity_report,
    check_fits,
    check_host_paths,
    check_queue_room,
    queued_job,
)
from loom.lifecycle.attempt import Attempt, gang_of
from loom.lifecycle.environments import check_learner_image, plan_for, spec_section
from loom.lifecycle.registration import has_results_to_register, register_model
from loom.lifecycle.scheduler import allocate_devices
from loom.lifecycle.ticker import Ticker
from loom.lifecycle.workspace import Workspace, api_certificates
from loom.observability import PlatformMetrics
from loom.registry.models import ModelRegistry
from loom.settings import Settings
from loom.storage.artifacts import ArtifactStore
from loom.store import jobs as job_rows
from loom.store import runs as run_rows
from loom.store import sealed
from loom.store import users as user_rows
from loom.store.db import Database
from loom.store.secret_keys import SecretKeys
from loom.store.tables import Job, Learner, User
from loom.tds.service import TrainingData

LEARNER_STATES = (RUNNING_STATES | TERMINAL_STATES) - {JobState.PENDING}
TIMEOUT = '"timeout_s"'  # in a stored manifest: only those jobs' manifests are parsed
log = logging.getLogger("loom.lifecycle")


class LifecycleManager:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        launcher: Launcher,
        artifacts: ArtifactStore,
        tds: TrainingData,
        keys: SecretKeys,
        registry: ModelRegistry | None = None,
        platform_metrics: PlatformMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.platform_metrics = platform_metrics or PlatformMetrics()
        self.keys = keys  # seals jobs' credentials
        self.db = db
        self.launcher = launcher
        self.artifacts = artifacts
        self.tds = tds
        self.registry = registry
        self.signals = tds.signals
        self._lock = threading.RLock()
        self._queueing = threading.Lock()  # counting a user's queued jobs, then adding one
        self._api_ca = api_certificates(settings.tls)
        self._ticker = Ticker("lifecycle", settings.watchdog_interval_s, self.step, log)
        self._local = threading.local()
        # With several servers on one database (`lifecycle.leadership`): whether this one may
        # still act as the leader, checked in the step's transaction, and how to wake the leader.
        self.fence: Callable[[Session], bool] = lambda _session: True
        self.on_wake: Callable[[], None] | None = None
        self.api_urls: Callable[[Session], list[str]] = lambda _session: []
        # Some jobs' states moved; told the kinds of what made them (`lineage["kind"]`: an
        # experiment's trial, a pipeline's step), so that a plain job wakes no driver.
        self.on_change: Callable[[set[str]], None] | None = None

    # -- running -----------------------------------------------------------------------------
    def start(self) -> None:
        """Lead: find the unfinished jobs' learners again, then run the loop. A launcher that
        can get ready for the first job beforehand (`warm`: the local one's spawner) does."""
        warm = getattr(self.launcher, "warm", None)
        if callable(warm):
            warm()
        self.reconcile()
        self._ticker.start()

    def step_down(self) -> None:
        """Stop the loop; learners go on running, and the API still takes requests."""
        self._ticker.stop()

    def stop(self) -> None:
        self.step_down()
        self.launcher.close()

    def wake(self) -> None:
        """Something changed: run a step soon, on whichever server leads."""
        self._ticker.wake()
        if self.on_wake is not None:
            self.on_wake()

    def wake_here(self) -> None:
        self._ticker.wake()

    def step(self) -> None:
        """Follow running jobs, then start what fits."""
        with self._lock:
            with self._session() as session:
                if not self.fence(session):
                    return
                self._watch(session)
                self._finish_storing(session)
                with self.platform_metrics.scheduler_pass.time():
                    batches = self._schedule(session)
                overdue = _overdue(job_rows.jobs_in_states(session, RUNNING_STATES))
            for job_id, timeout in overdue:
                with contextlib.suppress(Conflict, NotFound):  # it ended meanwhile
                    self.halt(job_id, f"it ran past its timeout_s ({timeout} s)")
            self.platform_metrics.admissions.inc(len(batches))
            for job_id, launches in batches:
                if not self._still_leading():  # the new leader finds them unstarted, and queues
                    return
                self._launch(job_id, launches)

    def _still_leading(self) -> bool:
        with self.db.session() as session:
            return self.fence(session)

    def reconcile(self) -> None:
        """After a restart: find every unfinished job's learners again, or queue it again."""
        with self._lock, self._session() as session:
            for job in job_rows.jobs_in_states(session, RUNNING_STATES):
                learners = self._current(session, job)
                statuses = [self.launcher.status(lr.handle) for lr in learners]
                if not learners or any(s.liveness == Liveness.NOT_STARTED for s in statuses):
                    self._requeue(session, job, learners)
            self._watch(session)
        self.wake()

    # -- what the API asks -------------------------------------------------------------------
    def submit(
        self,
        owner: User,
        manifest: Manifest,
        original: dict[str, Any],
        code: bytes,
        *,
        job_id: str | None = None,
        lineage: dict[str, Any] | None = None,
    ) -> Job:
        """Queue a job; `original` is the manifest mapping as the user wrote it. It is stored
        with its credentials redacted; they are stored sealed. A `job_id` chosen beforehand
        (an experiment's trial) is submitted once: again, the job already stored is returned."""
        if job_id is not None:
            with self._session() as session:
                found = job_rows.get_job(session, job_id)
            if found is not None:
                return found
        self.check_submission(manifest, code)
        with self._session() as session:  # before storing the code, to refuse cheaply
            check_queue_room(session, owner, self.settings.max_queued_jobs)
        digest = self.artifacts.put(code)
        redacted, credentials = split(original)
        job = queued_job(owner, manifest, redacted, digest, job_id, lineage)
        with self._queueing, self._session() as session:
            check_queue_room(session, owner, self.settings.max_queued_jobs)
            job_rows.add_job(session, job)
            sealed.seal_job(session, self.keys, job.id, credentials)
        self.wake()
        return job

    def check_submission(self, manifest: Manifest, code: bytes) -> None:
        """What would refuse the job here, whoever submits it: host folders it may not mount,
        a gang larger than the platform, a framework or package it cannot install."""
        check_host_paths(manifest, self.settings.host_mount_roots)
        if not self.launcher.elastic:  # a cluster may grow: the queue says what it waits for
            check_fits(manifest, self.launcher.capacity())
        plan_for(manifest, code)  # refuses a framework or a package this platform cannot install
        check_learner_image(manifest, self.launcher.name)

    def halt(self, job_id: str, why: str = "") -> Job:
        """Stop a job's learners (SIGTERM, SIGKILL after the grace); `why`, when not a user's
        request, is said in its state's message ("halted: it ran past its timeout_s")."""
        with self._lock, self._session() as session:
            job = self._job(session, job_id)
            state = JobState(job.state)
            if state not in HALTABLE_STATES:
                raise Conflict(f"job {job_id} is {state.value}; only a queued or running job halts")
            if state == JobState.QUEUED:
                said = f"halted: {why}" if why else "halted by request"
                self._transition(session, job, JobState.HALTED, said)
                return job
            job.halt_requested = True
            job.status_message = f"halting: {why}" if why else "halting"
            for learner in self._current(session, job):
                if learner.state not in TERMINAL_STATES:
                    self.launcher.terminate(learner.handle, self.settings.halt_grace_s)
            return job

    def resume(self, job_id: str) -> Job:
        """Queue a halted job again; its learners restart with the same CHECKPOINT_DIR."""
        with self._lock, self._queueing, self._session() as session:
            job = self._job(session, job_id)
            if JobState(job.state) != JobState.HALTED:
                raise Conflict(f"job {job_id} is {job.state}; only a halted job resumes")
            check_queue_room(
                session, session.get_one(User, job.owner_id), self.settings.max_queued_jobs
            )
            job.halt_requested = False
            job.error_code = None
            job.finished_at = None  # it is not finished any more; its history keeps the halt
            job.queue_reason = "resumed; waiting for the scheduler"
            self._transition(session, job, JobState.QUEUED, "resumed by request")
        self.wake()
        return job

    def capacity(self) -> dict[str, Any]:
        """What the platform has, what running learners hold, and how many jobs wait."""
        with self._session() as session:
            return capacity_report(session, self.launcher)

    def delete(self, job_id: str) -> None:
        """Stop the job if it runs, then remove it, its logs and its files."""
        with self._lock, self._session() as session:
            self._job(session, job_id)
            active = job_rows.active_learners_of(session, job_id, TERMINAL_STATES)
            for learner in active:
                self.launcher.terminate(learner.handle, 0.0)  # of any attempt, in any state
            self.launcher.release([learner.handle for learner in active])
            job_rows.delete_job(session, job_id)
        Workspace(self.settings.jobs_dir, job_id).remove()
        self.signals.notify(job_id)
        self.wake()

    def report(self, job_id: str, attempt: int, learner_id: int, report: dict[str, Any]) -> None:
        """A learner's wrapper says where it is. Its outcome is applied here, in the request
        that carries it (the job's state changes now, not at the next tick); only an outcome
        wakes the loop, for what it frees (resources for the queue, a gang to restart):
        progress frees nothing, and a step run for it would hold the lock the learner's next
        report waits on."""
        with self._lock, self._session() as session:
            job = self._job(session, job_id)
            learner = job_rows.get_learner(session, job_id, attempt, learner_id)
            if learner is None:
                raise Conflict(f"job {job_id} has no learner {learner_id} in attempt {attempt}")
            self._apply(session, job, learner, report)
        if report.get("state") in TERMINAL_STATES:
            self.wake()

    def heartbeat(self, job_id: str, attempt: int, learner_id: int) -> None:
        """A learner's wrapper is alive and can reach the platform."""
        with self._session() as session:
            learner = job_rows.get_learner(session, job_id, attempt, learner_id)
            if learner is not None:
                learner.heartbeat_at = time.time()

    # -- inside ------------------------------------------------------------------------------
    @contextmanager
    def _session(self) -> Iterator[Session]:
        """A transaction; followers of the jobs it changed are woken once it has committed."""
        local = self._local
        outer = tuple(getattr(local, n, None) for n in ("changed", "completed", "moved"))
        changed: set[str] = set()
        completed: list[str] = []
        moved: set[str] = set()
        local.changed, local.completed, local.moved = changed, completed, moved
        try:
            with self.db.session() as session:
                yield session
        finally:
            local.changed, local.completed, local.moved = outer
        for job_id in completed:
            self._register(job_id)
        for job_id in changed:
            self.signals.notify(job_id)
        if moved and self.on_change is not None:
            self.on_change(moved)

    def _register(self, job_id: str) -> None:
        """A completed job's model becomes a new version in the registry (in the registry's own
        transaction, after the one that saw the learners complete), then the job COMPLETED."""
        assert self.registry is not None
        message = register_model(self.db, self.registry, self.tds, self.settings, job_id)
        if message is None:
            return
        with self._session() as session:
            job = self._job(session, job_id)
            if job.state == JobState.STORING.value:
                self._transition(session, job, JobState.COMPLETED, message)

    def _job(self, session: Session, job_id: str) -> Job:
        job = job_rows.get_job(session, job_id, lock=True)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        return job

    def _current(self, session: Session, job: Job) -> list[Learner]:
        return job_rows.learners_of(session, job.id, job.attempt)

    def _transition(
        self,
        session: Session,
        job: Job,
        new: JobState,
        message: str = "",
        error_code: str | None = None,
    ) -> bool:
        if not can_transition(JobState(job.state), new):
            return False
        if job.state == JobState.QUEUED.value:
            self.platform_metrics.queue_wait.observe(job_rows.queued_for(session, job))
        job.state = new.value
        job.status_message = message  # of this state: an earlier one's progress is stale now
        if error_code:
            job.error_code = error_code
        now = time.time()
        if new == JobState.QUEUED or new in TERMINAL_STATES:
            job.restart_pending = False
        if new in TERMINAL_STATES:
            job.finished_at = now
            job.queue_reason = ""
            self._revoke_when_done(session, job)
        job_rows.record_event(session, job, new.value, message)
        run_rows.follow_job(session, job)
        self._local.changed.add(job.id)
        if job.lineage:
            self._local.moved.add(str(job.lineage.get("kind", "")))
        return True

    def _apply(self, session: Session, job: Job, learner: Learner, report: dict[str, Any]) -> None:
        try:
            new = JobState(str(report.get("state")))
        except ValueError:
            return
        if new not in LEARNER_STATES:
            return
        old = JobState(learner.state)
        if new == old and report.get("message") and old not in TERMINAL_STATES:
            learner.message = str(report["message"])[:500]  # progress, e.g. of a download
            if job.state not in TERMINAL_STATES:
                job.status_message = learner.message
                self._local.changed.add(job.id)
            return
        if old in TERMINAL_STATES or not can_transition(old, new):
            return
        stopped_by_us = job.halt_requested or job.restart_pending
        if new == JobState.HALTED and not stopped_by_us and job.state not in TERMINAL_STATES:
            # Stopped from outside the platform: for the gang, that is a lost learner.
            report = {
                **report,
                "state": JobState.FAILED.value,
                "error_code": ErrorCode.LEARNER_LOST.value,
                "message": f"learner {learner.learner_id} was stopped from outside the platform",
            }
            new = JobState.FAILED
        if new in TERMINAL_STATES:
            self._backfill(session, job, learner, report)
            learner.finished_at = time.time()
        learner.state = new.value
        if report.get("exit_code") is not None:
            learner.exit_code = int(report["exit_code"])
        learner.error_code = report.get("error_code") or learner.error_code
        learner.message = str(report.get("message") or learner.message or "")
        ended_before = job.state in TERMINAL_STATES
        if learner.attempt == job.attempt:
            self._follow_learners(session, job)
        # A job that ends with this report has had its tokens looked at by its transition.
        if new in TERMINAL_STATES and ended_before:
            self._revoke_when_done(session, job)

    def _revoke_when_done(self, session: Session, job: Job) -> None:
        """A job that has ended, and whose learners have all ended, keeps no live token:
        nothing may speak for it any more. Called when either of the two happens last."""
        session.flush()
        if not job_rows.active_learners_of(session, job.id, TERMINAL_STATES):
            user_rows.revoke_job_tokens(session, job.id)

    def _backfill(
        self, session: Session, job: Job, learner: Learner, report: dict[str, Any]
    ) -> None:
        """Store, in this transaction, what a finished learner spooled but never delivered."""
        ids = (job.id, learner.attempt, learner.learner_id)
        sent = (int(report.get("last_seq") or 0), int(report.get("last_mseq") or 0))
        stored = self.tds.delivered(session, *ids)
        if sent != (0, 0) and all(have >= want for have, want in zip(stored, sent, strict=True)):
            return
        if self.tds.backfill(session, *ids, self.launcher.spooled_lines(learner.handle)):
            self._local.changed.add(job.id)

    def _follow_learners(self, session: Session, job: Job) -> None:
        """Move the job to where its gang of learners is."""
        learners = self._current(session, job)
        states = [JobState(lr.state) for lr in learners]
        new = aggregate(states)
        stopped = all(s in TERMINAL_STATES for s in states)
        if stopped:  # what the engine holds for this attempt (a placement group) is freed
            self.launcher.release([lr.handle for lr in learners])
        if job.halt_requested and stopped and new != JobState.COMPLETED:
            new = JobState.HALTED
        if new is None or new.value == job.state:
            return
        if new == JobState.FAILED:
            self._gang_failed(session, job, learners)
            return
        if (
            new == JobState.COMPLETED
            and self.registry is not None
            and has_results_to_register(self.settings, job.id)
        ):
            # Completed once its model is registered, just after this commit: a client that
            # sees COMPLETED finds the version. STORING until then (again after a crash).
            # A job that left nothing to register completes in this transaction instead.
            if job.state != JobState.STORING.value:
                self._transition(session, job, JobState.STORING, "registering the model")
            self._local.completed.append(job.id)
            return
        why = job.status_message.removeprefix("halting: ")
        messages = {
            JobState.HALTED: f"halted: {why}" if why != job.status_message else "halted by request",
            JobState.COMPLETED: "all learners completed",
        }
        self._transition(session, job, new, messages.get(new, ""))

    def _gang_failed(self, session: Session, job: Job, learners: list[Learner]) -> None:
        """One learner failed: stop the others within seconds (none may hang in an
        all-reduce), then restart the gang from its checkpoint or fail, per the policy."""
        # The first failure is the cause; the others' (a peer's broken all-reduce) follow from it.
        failed = sorted(
            (lr for lr in learners if lr.state == JobState.FAILED.value),
            key=lambda lr: lr.finished_at or 0.0,
        )[:1]
        running = [lr for lr in learners if lr.state not in TERMINAL_STATES]
        if not job.restart_pending:
            for other in running:
                self.launcher.terminate(other.handle, self.settings.gang_stop_grace_s)
        manifest = json.loads(job.manifest)
        policy = str(manifest.get("restart_policy", "Never"))
        decision = decide(
            policy,
            int(manifest.get("max_restarts", 0)),
            job.attempt,
            [Failure(lr.learner_id, lr.exit_code, lr.error_code) for lr in failed],
        )
        first = failed[0]
        if not decision.restart:
            message = first.message if policy == "Never" else f"{decision.reason}: {first.message}"
            self._transition(session, job, JobState.FAILED, message, first.error_code)
            return
        job.restart_pending = True
        job.status_message = f"{decision.reason}; stopping the other learners"
        if not running:  # the whole gang has stopped: queue the next attempt
            job.restart_pending = False
            job.queue_reason = decision.reason
            self._transition(session, job, JobState.QUEUED, decision.reason)

    def _watch(self, session: Session) -> None:
        """Ask the launcher about every learner not known to have ended, including those of a
        job that already failed: they hold resources until they are gone."""
        for learner, job in job_rows.active_learners(session, TERMINAL_STATES):
            status = self.launcher.status(learner.handle)
            if status.liveness == Liveness.LOST:
                self.launcher.terminate(learner.handle, 0.0)  # whatever it left running
            if _finishing(status):
                continue  # its wrapper is still delivering: its own report comes next
            try:
                with session.begin_nested():  # one learner's trouble is not every job's
                    self._apply(session, job, learner, self._as_report(job, learner, status))
            except Exception:
                log.exception("following learner %s of %s failed", learner.learner_id, job.id)

    def _finish_storing(self, session: Session) -> None:
        """A job still STORING once its learners have all ended (its model's registration or
        its last transition failed, e.g. on a busy database) is taken up again, as after a
        crash: the registration is once per job, so retrying it is safe."""
        for job in job_rows.jobs_in_states(session, [JobState.STORING.value]):
            if job.id not in self._local.completed:
                self._follow_learners(session, job)

    def _as_report(self, job: Job, learner: Learner, status: LearnerStatus) -> dict[str, Any]:
        if status.liveness in (Liveness.RUNNING, Liveness.EXITED) and status.report:
            return status.report
        if status.liveness in (Liveness.LOST, Liveness.NOT_STARTED):
            if job.halt_requested:
                return {"state": JobState.HALTED.value, "message": "halted by request"}
            why = status.reason or "ended without reporting an outcome (was its process killed?)"
            return {
                "state": JobState.FAILED.value,
                "error_code": ErrorCode.LEARNER_LOST.value,
                "message": f"learner {learner.learner_id} {why}",
            }
        return {}

    def _requeue(self, session: Session, job: Job, learners: list[Learner]) -> None:
        for learner in learners:
            self.launcher.terminate(learner.handle, 0.0)
            learner.state = JobState.FAILED.value
            learner.message = "never started: the platform stopped while launching it"
        self.launcher.release([learner.handle for learner in learners])
        if job.halt_requested:
            self._transition(session, job, JobState.HALTED, "halted by request")
            return
        job.queue_reason = "queued again: the platform restarted while launching it"
        self._transition(session, job, JobState.QUEUED, job.queue_reason)

    def _schedule(self, session: Session) -> list[tuple[str, list[LearnerLaunch]]]:
        """Decide for the queue (`queue_pass`); admit what starts, fail what never can."""
        found = queue_pass.run(session, self.launcher, self.settings)
        for job_id, reason in found.never:
            self._never(session, job_id, reason)
        batches = []
        for job_id in found.starts:
            launches = self._admit(session, self._job(session, job_id), found.taken_devices)
            if launches:
                batches.append((job_id, launches))
        return batches

    def _never(self, session: Session, job_id: str, reason: str) -> None:
        code = ErrorCode.INSUFFICIENT_RESOURCES.value
        self._transition(session, self._job(session, job_id), JobState.FAILED, reason, code)

    def _admit(self, session: Session, job: Job, taken: set[int]) -> list[LearnerLaunch]:
        """Record the job's next attempt and its learners, with their GPUs (none of `taken`);
        they are launched after commit. None while its credentials cannot be opened."""
        try:  # opened only here, to go to its learners' wrappers through a pipe
            credentials = sealed.credentials_of(session, self.keys, job.id)
        except SecretKeyError as exc:
            if job.queue_reason != exc.message:
                log.error("job %s stays queued: %s", job.id, exc.message)
                job.queue_reason = exc.message
            return []
        manifest = manifest_from_dict(merge(json.loads(job.manifest), credentials))
        code_zip = self.artifacts.path(job.code_digest)
        try:  # checked at submission; a job queued before an upgrade may still be refused
            environment = spec_section(plan_for(manifest, code_zip), self.settings)
        except ManifestError as exc:
            failed = ErrorCode.ENVIRONMENT_FAILED
            self._transition(session, job, JobState.FAILED, exc.message, failed)
            return []
        owner = session.get_one(User, job.owner_id)
        job.attempt += 1
        job.queue_reason = ""
        job.restart_pending = False
        job.started_at = job.started_at or time.time()
        token = user_rows.new_token("job")
        user_rows.revoke_job_tokens(session, job.id)  # an attempt's token dies with it
        user_rows.add_token(session, owner, token, job_id=job.id)
        free = [d for d in range(self.launcher.capacity().gpus) if d not in taken]
        devices = allocate_devices(free, job.gpus, job.learners)
        taken |= {d for ds in devices for d in ds}
        attempt = Attempt(
            job_id=job.id,
            number=job.attempt,
            manifest=manifest,
            workspace=Workspace(self.settings.jobs_dir, job.id),
            code_zip=code_zip,
            token=token,
            devices=devices,
            api_urls=self.api_urls(session),
            environment=environment,
            owner=owner.name,
        )
        launches, rows = gang_of(attempt, self.settings, self._api_ca)
        job_rows.add_learners(session, rows)
        self._transition(session, job, JobState.PENDING, f"admitted, attempt {job.attempt}")
        return launches

    def _launch(self, job_id: str, launches: list[LearnerLaunch]) -> None:
        try:
            self.launcher.launch(launches)
        except Exception as exc:  # any failure to launch is the platform's, for this job only
            log.exception("launching job %s failed", job_id)
            message = exc.message if isinstance(exc, LaunchError) else f"launch failed: {exc}"
            with self._session() as session:
                job = self._job(session, job_id)
                for launch in launches:
                    self.launcher.terminate(launch.handle, 0.0)
                self.launcher.release([launch.handle for launch in launches])
                for learner in self._current(session, job):
                    learner.state = JobState.FAILED.value
                self._transition(session, job, JobState.FAILED, message, ErrorCode.INTERNAL.value)


def _finishing(status: LearnerStatus) -> bool:
    """The wrapper has written its outcome but is still alive, sending what it spooled: taking
    the outcome now would store its spool a second time beside it (and read all of it). Or it
    is storing its results, which it says itself only when they go somewhere slow: read from
    its file, STORING overtook the PROCESSING report still on its way, which was then dropped
    as stale (a job with no PROCESSING in its history, on a loaded machine)."""
    state = (status.report or {}).get("state")
    ending = {s.value for s in TERMINAL_STATES} | {JobState.STORING.value}
    return status.liveness == Liveness.RUNNING and state in ending


def _overdue(jobs: list[Job]) -> list[tuple[str, int]]:
    """The running jobs past their manifest's `timeout_s` (counted from their start), with it."""
    now = time.time()
    found = []
    for job in jobs:
        if job.halt_requested or job.started_at is None or TIMEOUT not in job.manifest:
            continue
        timeout = json.loads(job.manifest).get("timeout_s")
        if isinstance(timeout, int) and now - job.started_at > timeout:
            found.append((job.id, timeout))
    return found
