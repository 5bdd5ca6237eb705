"""What a learner's wrapper on another machine fetches and sends (no shared disk, design 3.8):
its job's code and CHECKPOINT_DIR, and its own checkpoints and results, unpacked into the job's
folders here (`loom.learner.transfer` is the other side). The API checked the job's token.

An upload is a zip: every member is checked, all of it is unpacked beside the job's folder, then
each file is moved in over the one of its name (`sandbox.zips.unpack_over`), so a refused or
broken upload changes nothing. A checkpoints upload may list the files the learner deleted since
(`.loom-deleted.json`); they are removed here too.
"""

from __future__ import annotations

import os
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from loom.domain.errors import Conflict, InvalidInput, NotFound, StorageError
from loom.domain.states import TERMINAL_STATES, JobState
from loom.lifecycle.workspace import Workspace
from loom.sandbox.zips import DELETIONS, ArchiveRefused, unpack_over, zip_tree
from loom.store import jobs as job_rows
from loom.store.db import Database
from loom.store.tables import Job

Folder = Literal["checkpoints", "results"]
LIMIT_NAME = " (LOOM_LEARNER_UPLOAD_MAX_MB)"


def live_job(db: Database, job_id: str) -> Job:
    """The job, while it has not ended: NotFound when there is none, Conflict once it ended."""
    with db.session() as session:
        job = job_rows.get_job(session, job_id)
    if job is None:
        raise NotFound(f"no job {job_id!r}")
    if JobState(job.state) in TERMINAL_STATES:
        raise Conflict(f"job {job_id} is {job.state}: its learners have nothing more to move")
    return job


def check_learner(db: Database, job_id: str, attempt: int, learner_id: int) -> None:
    """A learner of the job's current attempt may send; one of an attempt that is over may not
    (its checkpoints would overwrite newer ones)."""
    job = live_job(db, job_id)
    if attempt != job.attempt:
        raise Conflict(f"attempt {attempt} of job {job_id} is over; it runs attempt {job.attempt}")
    with db.session() as session:
        if job_rows.get_learner(session, job_id, attempt, learner_id) is None:
            raise Conflict(f"job {job_id} has no learner {learner_id} in attempt {attempt}")


def body_bytes(max_mb: int) -> int:
    """The largest upload body: what it may unpack to, and room for the zip's own headers."""
    unpacked = max_mb * 2**20
    return unpacked + unpacked // 64 + 2**20


def zip_checkpoints(jobs_dir: Path, job_id: str) -> Path:
    """A zip of the job's CHECKPOINT_DIR (plain files, no link followed; empty when there is
    none) in a temporary file beside it, for the caller to remove."""
    workspace = Workspace(jobs_dir, job_id)
    target = scratch_file(workspace, ".checkpoints-download-")
    zip_tree(workspace.checkpoints, target, zipfile.ZIP_STORED)  # checkpoints hardly compress
    return target


def scratch_file(workspace: Workspace, prefix: str) -> Path:
    """A new empty file in the job's folder (the disk its checkpoints and results are on)."""
    workspace.root.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=workspace.root, prefix=prefix, suffix=".zip")
    os.close(fd)
    return Path(name)


def receive(body: Path, jobs_dir: Path, job_id: str, which: Folder, max_mb: int) -> dict[str, Any]:
    """Unpack an upload over the job's checkpoints or results folder: what it held."""
    workspace = Workspace(jobs_dir, job_id)
    target = workspace.checkpoints if which == "checkpoints" else workspace.results
    limit = max_mb * 2**20
    with _one_at_a_time(target):
        try:
            done = unpack_over(
                body,
                target,
                max_bytes=limit,
                limit_name=LIMIT_NAME,
                deletions=DELETIONS if which == "checkpoints" else None,
                max_folder_bytes=limit,
            )
        except ArchiveRefused as exc:
            raise InvalidInput(f"{which} refused: {exc}", field="body") from exc
        except OSError as exc:
            raise StorageError(f"the job's {which} could not be stored: {exc}") from exc
    return {"files": done.files, "bytes": done.bytes, "deleted": len(done.deleted)}


_guard = threading.Lock()
_folders: dict[Path, tuple[threading.Lock, int]] = {}


@contextmanager
def _one_at_a_time(folder: Path) -> Iterator[None]:
    """Uploads into one folder (a job's learners send theirs at once) one after the other, so
    that each sees what the one before it left (its size limit, files it deletes)."""
    with _guard:
        lock, users = _folders.get(folder, (threading.Lock(), 0))
        _folders[folder] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _guard:
            lock, users = _folders[folder]
            if users == 1:
                del _folders[folder]
            else:
                _folders[folder] = (lock, users - 1)
