"""The training kinds' handler: Training Operator v1 jobs (and Trainer v2's TrainJob) applied as
Loom jobs of their owner, their status read back the Kubeflow way."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from typing import Any

from loom.dialects.kinds import Applied, Context, Document, Immutable, KindInfo, Note, Stored
from loom.dialects.kubeflow import code as codes
from loom.dialects.kubeflow import images
from loom.dialects.kubeflow.status import JobView, training_status
from loom.dialects.kubeflow.training import FAMILIES, GROUP, JobPlan, training_job
from loom.dialects.kubeflow.trainjob import TRAINJOB_GROUP, train_job
from loom.domain.errors import Conflict, ManifestError, NotFound
from loom.domain.learner_images import RUNS_IMAGES
from loom.domain.manifest import manifest_from_dict
from loom.domain.replicas import layout_of
from loom.store import jobs as job_rows

TRAINING = tuple(KindInfo(GROUP, ("v1",), kind, kind.lower() + "s") for kind in FAMILIES)
TRAINJOB = KindInfo(TRAINJOB_GROUP, ("v1alpha1",), "TrainJob", "trainjobs")
SUSPENDED = "suspended (runPolicy.suspend)"
PIP = "loom.dev/pip"  # an object's annotation: packages its job installs


def config_maps(ctx: Context) -> Callable[[str], dict[str, str] | None]:
    """A ConfigMap's data by name, for volumes that mount one."""

    def find(name: str) -> dict[str, str] | None:
        found = ctx.lookup("", "ConfigMap", name)
        if found is None:
            return None
        return {str(k): str(v) for k, v in (found.document.get("data") or {}).items()}

    return find


def plan(ctx: Context, document: Document, name: str | None = None) -> JobPlan:
    """The Loom job an object becomes; refused naming the field."""
    name = name or str(document["metadata"]["name"])
    names = codes.names(ctx.code)
    if document["kind"] == "TrainJob":
        found = train_job(document, name, names, config_maps=config_maps(ctx))
    else:
        found = training_job(document, name, names, config_maps=config_maps(ctx))
    images.place(found.manifest, runs_images(ctx))
    packages = _packages(document)
    if packages:
        environment = found.manifest.setdefault("environment", {})
        environment["pip"] = packages
    return found


def runs_images(ctx: Context) -> bool:
    """Whether the platform's launcher runs learners in images (Kubernetes)."""
    return ctx.platform.lifecycle.launcher.name in RUNS_IMAGES


def _packages(document: Document) -> list[str]:
    annotations = (document.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(PIP)
    return [p for p in str(text).replace(",", " ").split() if p] if text else []


def checked(ctx: Context, found: JobPlan) -> tuple[Any, bytes]:
    """The plan's manifest validated as Loom's, and the code it runs; refused as Loom would."""
    try:
        manifest = manifest_from_dict(copy.deepcopy(found.manifest))
    except ManifestError as exc:
        raise ManifestError(
            f"as a Loom job: {exc.message}", field=f"(Loom manifest) {exc.field}"
        ) from None
    zipped = codes.with_files(ctx.code, found.files)
    ctx.platform.lifecycle.check_submission(manifest, zipped)
    return manifest, zipped


class TrainingJobs(Immutable):
    """TFJob, PyTorchJob, MPIJob, XGBoostJob, JAXJob, PaddleJob and TrainJob."""

    kinds = (*TRAINING, TRAINJOB)

    def check(self, ctx: Context, document: Document) -> None:
        checked(ctx, plan(ctx, document))

    def create(self, ctx: Context, document: Document) -> Applied:
        found = plan(ctx, document)
        manifest, zipped = checked(ctx, found)
        kind, name = str(document["kind"]), str(document["metadata"]["name"])
        lineage = {
            "kind": "object",
            "object": f"{kind}/{name}",
            "apiVersion": document["apiVersion"],
        }
        job = ctx.platform.lifecycle.submit(
            ctx.user, manifest, found.manifest, zipped, lineage=lineage
        )
        if found.suspend:
            ctx.platform.lifecycle.halt(job.id, SUSPENDED)
        notes = list(found.notes)
        if "namespace" in document.get("metadata", {}):
            notes.append(Note("metadata.namespace", "ignored", "objects belong to their owner"))
        if found.ttl_s is not None:
            notes.append(
                Note(
                    "spec.runPolicy.ttlSecondsAfterFinished",
                    "ignored",
                    "the job and its logs are kept until deleted (loom delete)",
                )
            )
        return Applied({"job": job.id}, tuple(notes))

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied:
        """Only `runPolicy.suspend` may change (as the operators allow): halt or resume."""
        if _without_suspend(stored.document) != _without_suspend(document):
            return super().update(ctx, stored, document)
        job_id = str(stored.refs["job"])
        lifecycle = ctx.platform.lifecycle
        with contextlib.suppress(Conflict):  # already there: halted, or running
            if _suspended(document):
                lifecycle.halt(job_id, SUSPENDED)
            else:
                lifecycle.resume(job_id)
        return Applied(stored.refs, stored.notes)

    def status(self, ctx: Context, stored: Stored) -> dict[str, Any]:
        view = job_view(ctx, str(stored.refs.get("job")))
        if view is None:
            return {"conditions": [], "message": "its job was deleted"}
        with ctx.platform.db.session() as session:
            job = job_rows.get_job(session, view.id)
            manifest = json.loads(job.manifest) if job is not None else {}
        layout = layout_of((manifest.get("framework_options") or {}).get("replicas"))
        if layout is None:
            return {}
        return training_status(stored.kind, stored.name, layout, view)

    def delete(self, ctx: Context, stored: Stored) -> None:
        with contextlib.suppress(NotFound):
            ctx.platform.lifecycle.delete(str(stored.refs.get("job")))


def job_view(ctx: Context, job_id: str) -> JobView | None:
    with ctx.platform.db.session() as session:
        job = job_rows.get_job(session, job_id)
        if job is None:
            return None
        learners = job_rows.learners_of(session, job.id, job.attempt) if job.attempt else []
        return JobView(
            id=job.id,
            state=job.state,
            message=job.status_message,
            submitted_at=job.submitted_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            attempt=job.attempt,
            restart_pending=job.restart_pending,
            learners=tuple((lr.learner_id, lr.state) for lr in learners),
            suspended=SUSPENDED in job.status_message,
        )


def _suspended(document: Document) -> bool:
    return bool(((document.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def _without_suspend(document: Document) -> Document:
    found = copy.deepcopy(document)
    policy = (found.get("spec") or {}).get("runPolicy")
    if isinstance(policy, dict):
        policy.pop("suspend", None)
    found.pop("status", None)
    return found
