"""What the scheduler needs to know, read from the store: what running learners hold (in all,
per user, which GPUs), each user's quota, and whether a user may queue one more job."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from loom.domain.errors import ErrorCode, InvalidInput, ManifestError, TooManyRequests
from loom.domain.manifest import Manifest
from loom.domain.placement import Verdict as Placement
from loom.domain.resources import Resources
from loom.domain.states import TERMINAL_STATES, JobState
from loom.launchers.base import Launcher
from loom.lifecycle.scheduler import Quota, Usage, never_reason
from loom.lifecycle.workspace import host_path
from loom.settings import Settings
from loom.store import jobs as job_rows
from loom.store.tables import Job, User

Placeable = Callable[[str], Placement | None]


@dataclass
class Holdings:
    """Resources held by learners that have not ended, including those of a job that has
    already failed: they hold their CPUs and GPUs until their processes are gone."""

    in_use: Resources = field(default_factory=Resources)
    per_user: dict[str, Usage] = field(default_factory=dict)
    devices: set[int] = field(default_factory=set)


def holdings(session: Session) -> Holdings:
    found = Holdings()
    jobs_per_user: dict[str, set[str]] = {}
    for learner, job in job_rows.active_learners(session, TERMINAL_STATES):
        one = Resources(job.cpus, job.memory, job.gpus)
        found.in_use = found.in_use + one
        usage = found.per_user.get(job.owner_id, Usage())
        jobs_per_user.setdefault(job.owner_id, set()).add(job.id)
        found.per_user[job.owner_id] = Usage(usage.held + one, len(jobs_per_user[job.owner_id]))
        found.devices |= parse_devices(learner.devices)
    return found


def capacity_report(session: Session, launcher: Launcher) -> dict[str, Any]:
    """What the platform has (per node, on a cluster), what running learners hold, and how
    many jobs wait."""
    held = holdings(session)
    queued = job_rows.count_in_state(session, JobState.QUEUED.value)
    total = launcher.capacity()
    report: dict[str, Any] = {
        "launcher": launcher.name,
        "capacity": {"cpus": total.cpus, "memory": total.memory, "gpus": total.gpus},
        "in_use": {"cpus": held.in_use.cpus, "memory": held.in_use.memory,
                   "gpus": held.in_use.gpus, "gpu_ids": sorted(held.devices)},
        "queued_jobs": queued,
    }  # fmt: skip
    nodes = getattr(launcher, "nodes", None)
    if callable(nodes):
        report["nodes"] = nodes()
    return report


def placement_check(session: Session, launcher: Launcher) -> Placeable | None:
    """With a cluster launcher: whether a queued job's gang can be placed on its nodes, by the
    job's `framework_options.placement`."""
    placeable = getattr(launcher, "placeable", None)
    if not callable(placeable):
        return None

    def check(job_id: str) -> Placement | None:
        job = job_rows.get_job(session, job_id)
        if job is None:
            return None
        options = json.loads(job.manifest).get("framework_options") or {}
        per_learner = Resources(job.cpus, job.memory, job.gpus)
        found = placeable(per_learner, job.learners, str(options.get("placement", "pack")))
        return found if isinstance(found, Placement) else None

    return check


def parse_devices(text: str) -> set[int]:
    return {int(d) for d in text.split(",") if d.strip().isdigit()}


def quotas(session: Session, owners: Iterable[str], settings: Settings) -> dict[str, Quota]:
    """Each user's quota: their own limits where set, else the platform's defaults."""
    found = {}
    wanted = set(owners)
    users = {u.id: u for u in session.scalars(select(User).where(User.id.in_(wanted)))}
    for owner in wanted:
        user = users.get(owner)
        found[owner] = Quota(
            cpus=user.quota_cpus if user and user.quota_cpus is not None else settings.quota_cpus,
            gpus=user.quota_gpus if user and user.quota_gpus is not None else settings.quota_gpus,
            jobs=user.quota_jobs if user and user.quota_jobs is not None else settings.quota_jobs,
        )
    return found


def check_host_paths(manifest: Manifest, roots: list[str]) -> None:
    """A data store on a host folder must lie under a root the admin allows
    (`LOOM_HOST_MOUNT_ROOTS`); none is allowed by default."""
    for index, store in enumerate(manifest.data_stores):
        path = host_path(store)
        if path is None:
            continue
        resolved = os.path.realpath(path)
        if not any(_under(resolved, root) for root in roots):
            raise ManifestError(
                f"data store {store.id!r}: host folder {path!r} is not under a folder this "
                "platform shares with jobs (an admin allows folders with LOOM_HOST_MOUNT_ROOTS)",
                field=f"data_stores[{index}].connection.path",
            )


def _under(path: str, root: str) -> bool:
    root = os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def max_priority(user: User, settings: Settings) -> int:
    """The highest priority the user's jobs may ask for: their own maximum, else the
    platform's (LOOM_MAX_PRIORITY)."""
    return user.max_priority if user.max_priority is not None else settings.max_priority


def check_fits(manifest: Manifest, capacity: Resources) -> None:
    """Refuse at submission a job whose learners together need more than the whole platform:
    it could never start. (If the platform shrinks later, the scheduler fails such jobs.)"""
    need = manifest.per_learner.times(manifest.learners)
    missing = need.missing(capacity)
    if not missing:
        return
    gang = f" ({manifest.learners} learners)" if manifest.learners > 1 else ""
    raise InvalidInput(
        f"{missing[0]}: the job can never start here{gang}: {never_reason(need, capacity)}",
        field=missing[0],
        code=ErrorCode.INSUFFICIENT_RESOURCES,
    )


def check_queue_room(session: Session, owner: User, limit: int | None) -> None:
    """Raise `TooManyRequests` if `owner` already has `limit` queued jobs (None: no limit)."""
    if limit is None:
        return
    mine = select(func.count()).select_from(Job)
    mine = mine.where(Job.owner_id == owner.id, Job.state == JobState.QUEUED.value)
    queued = int(session.scalar(mine) or 0)
    if queued >= limit:
        raise TooManyRequests(
            f"queue: user {owner.name!r} has {queued} queued jobs, the limit "
            f"(LOOM_MAX_QUEUED_JOBS is {limit}); submit again once some have started, "
            "or halt or delete some"
        )


def queued_job(
    owner: User,
    manifest: Manifest,
    redacted: dict[str, Any],
    digest: str,
    job_id: str | None,
    lineage: dict[str, Any] | None,
) -> Job:
    """A new job's row, queued: the manifest as written (credentials redacted), the code by
    its digest, and its resources per learner."""
    per = manifest.per_learner
    return Job(
        id=job_id or job_rows.new_job_id(),
        owner_id=owner.id,
        name=manifest.name,
        state=JobState.QUEUED.value,
        error_code=None,
        status_message="",
        queue_reason="waiting for the scheduler",
        manifest=json.dumps(redacted, default=str),
        code_digest=digest,
        priority=manifest.priority,
        learners=manifest.learners,
        cpus=per.cpus,
        memory=per.memory,
        gpus=per.gpus,
        attempt=0,
        halt_requested=False,
        submitted_at=time.time(),
        lineage=lineage,
    )
