"""Where a new model version's files come from, as MLflow's client names them:

    runs:/<run id>/<path>                a folder of a run's artifacts
    models:/m-<id>                       a logged model's files (MLflow 3's `log_model`)
    models:/<name>/<version or alias>    another registered version's files (a copy)
    mlflow-artifacts:/<folder>           a folder behind the artifact proxy

The files are already in the artifact store: a version only names them."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

from loom.api.platform import Platform
from loom.domain.errors import InvalidInput, NotFound
from loom.domain.runs import Actor
from loom.registry.catalog import files_below

MLMODEL = "MLmodel"


@dataclass
class Found:
    """A version's files and what is known of where they came from."""

    files: list[dict[str, Any]]
    run_id: str = ""
    job_id: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    run_info: dict[str, Any] = field(default_factory=dict)

    @property
    def framework(self) -> str:
        return "mlflow" if any(f["path"] == MLMODEL for f in self.files) else ""


def resolve(loom: Platform, who: Actor, source: str, run_id: str, model_id: str) -> Found:
    if model_id or source.startswith("models:/m-"):
        found = _logged_model(loom, who, model_id or source.removeprefix("models:/"))
    elif source.startswith("runs:/"):
        run, _, folder = source.removeprefix("runs:/").partition("/")
        found = _run_folder(loom, who, run, folder)
    elif source.startswith("models:/"):
        found = _version_copy(loom, who, source.removeprefix("models:/"))
    elif source.startswith("mlflow-artifacts:/"):
        found = _proxied(loom, who, source.removeprefix("mlflow-artifacts:").lstrip("/"))
    else:
        raise InvalidInput(
            f"source: Loom registers files it keeps (runs:/…, models:/…, mlflow-artifacts:/…), "
            f"got {source!r:.100}",
            field="source",
        )
    if not found.files:
        raise InvalidInput(f"source: no files at {source!r:.100}", field="source")
    if run_id and not found.run_id:
        _with_run(loom, who, run_id, found)
    return found


def _with_run(loom: Platform, who: Actor, run_id: str, found: Found) -> None:
    """The run's provenance: its job, its final metrics, its params and tags."""
    run = loom.runs.run(who, run_id)
    found.run_id, found.job_id = run.id, run.job_id or ""
    found.metrics = {m.key: m.value for m in run.metrics if math.isfinite(m.value)}
    found.run_info = {"params": run.params, "tags": run.tags}


def _run_folder(loom: Platform, who: Actor, run_id: str, folder: str) -> Found:
    run = loom.runs.run(who, run_id)
    found = Found(files_below(loom.run_files.files(run.id, folder), folder))
    _with_run(loom, who, run.id, found)
    return found


def _logged_model(loom: Platform, who: Actor, model_id: str) -> Found:
    model = loom.logged_models.get(who, model_id)
    found = Found(files_below(loom.run_files.files(model.id, ""), ""))
    if model.source_run_id:
        with contextlib.suppress(NotFound):  # its run deleted since: the files are the model's
            _with_run(loom, who, model.source_run_id, found)
    return found


def _version_copy(loom: Platform, who: Actor, rest: str) -> Found:
    name, _, ref = rest.rpartition("/")
    if not name:
        raise InvalidInput(
            f"source: models:/<name>/<version>, got models:/{rest!r:.80}", field="source"
        )
    version = loom.registry.version(who.user_id, name, ref)
    return Found(
        list(version.files),
        version.run_id or version.job_id,
        version.job_id,
        dict(version.metrics),
        dict(version.run_info or {}),
    )


def _proxied(loom: Platform, who: Actor, path: str) -> Found:
    place = loom.run_files.where(who, path)
    return Found(files_below(loom.run_files.files(place.container, place.path), place.path))
