"""Evaluations recorded with a model version: a job (a pipeline's evaluation step, say) that
completes with `RESULT_DIR/evaluations.json` (written by `loom.evaluation.record`) has each
result stored with the version it names — one of the job owner's own models, never another's."""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import select

from loom.sandbox.files import UnsafePath, open_regular
from loom.store.db import Database
from loom.store.tables import Job, Model, ModelEvaluation, ModelVersion

log = logging.getLogger("loom.registry")

FILE = "evaluations.json"
MAX_BYTES = 1 * 2**20
KINDS = ("accuracy", "fairness", "robustness", "explanations")


def record_from(db: Database, job: Job, results: Path) -> list[str]:
    """The kinds of evaluation the job's results hold, stored with their version; [] when it
    wrote none, or named a version its owner does not have (said in the platform log)."""
    try:
        with open_regular(results, FILE) as handle:  # written by untrusted code: no link
            text = handle.read(MAX_BYTES + 1)
    except (OSError, UnsafePath):
        return []
    try:
        document: Any = json.loads(text) if len(text) <= MAX_BYTES else {}
        name, number = str(document["model"]), int(document["version"])
        found = {k: v for k, v in dict(document["results"]).items() if k in KINDS}
    except (TypeError, KeyError, ValueError):
        log.warning("job %s: %s is not an evaluation record; ignored", job.id, FILE)
        return []
    with db.session() as session:
        model = session.scalars(
            select(Model).where(Model.owner_id == job.owner_id, Model.name == name)
        ).first()
        version = (
            session.scalars(
                select(ModelVersion).where(
                    ModelVersion.model_id == model.id, ModelVersion.version == number
                )
            ).first()
            if model is not None
            else None
        )
        if model is None or version is None:
            log.warning("job %s evaluated %s@%s, which its owner has not", job.id, name, number)
            return []
        for kind, values in found.items():
            existing = session.scalars(
                select(ModelEvaluation).where(
                    ModelEvaluation.job_id == job.id,
                    ModelEvaluation.model_id == model.id,
                    ModelEvaluation.version == number,
                    ModelEvaluation.kind == kind,
                )
            ).first()
            if existing is None:
                session.add(
                    ModelEvaluation(
                        id=uuid.uuid4().hex,
                        model_id=model.id,
                        version=number,
                        kind=kind,
                        job_id=job.id,
                        lineage=job.lineage,
                        results=values if isinstance(values, dict) else {"value": values},
                        created_at=time.time(),
                    )
                )
    return sorted(found)


def of_version(db: Database, model_id: str, version: int) -> list[ModelEvaluation]:
    with db.session() as session:
        query = select(ModelEvaluation).where(
            ModelEvaluation.model_id == model_id, ModelEvaluation.version == version
        )
        return list(session.scalars(query.order_by(ModelEvaluation.created_at)))
