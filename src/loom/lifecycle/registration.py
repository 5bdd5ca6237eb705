"""A completed job's model registered as a new version (in the registry's own transaction),
and the sentence its job's COMPLETED carries about it."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from loom.domain.errors import PayloadTooLarge
from loom.domain.manifest import manifest_from_dict
from loom.lifecycle.workspace import Workspace
from loom.registry import evaluations
from loom.registry.models import ModelRegistry
from loom.settings import Settings
from loom.store import jobs as job_rows
from loom.store.db import Database
from loom.tds.service import TrainingData

log = logging.getLogger("loom.lifecycle")


def register_model(
    db: Database, registry: ModelRegistry, tds: TrainingData, settings: Settings, job_id: str
) -> str | None:
    """Register the job's `RESULT_DIR/model/` (if it wrote one); the job's final message, or
    None if the job is gone. A registry failure never stops the job: it is said instead."""
    message = "all learners completed"
    try:
        with db.session() as session:
            job = job_rows.get_job(session, job_id)
        if job is None:
            return None
        results = Workspace(settings.jobs_dir, job.id).results
        metrics = tds.metrics.final(job.id)
        original = json.loads(job.manifest)
        version = registry.register(job, original, results, metrics, model_cap(settings, original))
        if version is not None:
            message += f"; registered model version {version.version}"
        evaluated = evaluations.record_from(db, job, results)
        if evaluated:
            message += f"; recorded evaluations: {', '.join(evaluated)}"
    except PayloadTooLarge as exc:
        message += f"; its model was not registered: {exc.message}"
    except Exception:  # a registry failure must not stop the lifecycle, nor the job
        log.exception("registering the model of job %s failed", job_id)
        message += "; its model could not be registered (see the platform log)"
    return message


def has_results_to_register(settings: Settings, job_id: str) -> bool:
    """Whether a completed job left anything for `register_model`: an entry in
    `RESULT_DIR/model/` or an evaluation record (two looks at the platform's disk, so that a
    job without either completes in the transaction that saw its learners end)."""
    results = Workspace(settings.jobs_dir, job_id).results
    try:
        with os.scandir(results / "model") as entries:
            if next(entries, None) is not None:
                return True
    except NotADirectoryError:
        return True  # not a folder: what `register` makes of it is its own to say
    except OSError:
        pass  # no model folder
    return os.path.lexists(results / evaluations.FILE)


def model_cap(settings: Settings, original: dict[str, Any]) -> int | None:
    """The most a job's model may take: the platform's cap, and the job's `storage`."""
    caps = [] if settings.max_model_mb is None else [settings.max_model_mb * 2**20]
    storage = manifest_from_dict(original).storage
    if storage:
        caps.append(float(storage))
    return int(min(caps)) if caps else None
