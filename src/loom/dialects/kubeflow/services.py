"""KServe's InferenceService applied as a Loom deployment (through a pipeline run that fetches and
registers its model, then serves it), its status read back as KServe writes it: `url`,
`address`, conditions (IngressReady, PredictorReady, Ready), the predictor's traffic, the model's
state."""

from __future__ import annotations

import contextlib
import copy
import json
import time
from importlib import resources
from typing import Any

from loom.dialects.kinds import Applied, Condition, Context, Document, KindInfo, Stored, timestamp
from loom.dialects.kubeflow import code as codes
from loom.dialects.kubeflow.kserve import (
    FETCH,
    INITIALIZER,
    KSERVE_GROUP,
    S3,
    SERVE,
    ServicePlan,
    inference_service,
)
from loom.domain.errors import Conflict, NotFound
from loom.serving.canary import CanaryChange
from loom.store import objects

SERVICE = KindInfo(KSERVE_GROUP, ("v1beta1",), "InferenceService", "inferenceservices", ("isvc",))
ENDPOINT = "serving.kserve.io/s3-endpoint"
HTTPS = "serving.kserve.io/s3-usehttps"
REGION = "serving.kserve.io/s3-region"


def credentials(ctx: Context) -> Any:
    """A ServiceAccount's S3 credentials, from its Secrets (KServe's annotations say where)."""

    def find(account: str) -> S3 | None:
        found = ctx.lookup("", "ServiceAccount", account)
        if found is None:
            return None
        for entry in found.document.get("secrets") or []:
            name = str((entry or {}).get("name"))
            secret = ctx.lookup("", "Secret", name)
            if secret is None:
                continue
            data = ctx.secret(name)
            annotations = (secret.document.get("metadata") or {}).get("annotations") or {}
            endpoint = annotations.get(ENDPOINT)
            if endpoint and "://" not in endpoint:
                scheme = "http" if str(annotations.get(HTTPS, "1")) == "0" else "https"
                endpoint = f"{scheme}://{endpoint}"
            return S3(
                endpoint,
                data.get("AWS_ACCESS_KEY_ID"),
                data.get("AWS_SECRET_ACCESS_KEY"),
                annotations.get(REGION) or data.get("AWS_DEFAULT_REGION"),
            )
        return None

    return find


def plan(ctx: Context, document: Document) -> ServicePlan:
    return inference_service(document, credentials(ctx), INITIALIZER)


def initializer_code() -> bytes:
    text = resources.files("loom.dialects.kubeflow").joinpath("storage_initializer.py").read_text()
    return codes.with_files(None, {INITIALIZER: text})


class InferenceServices:
    kinds = (SERVICE,)

    def check(self, ctx: Context, document: Document) -> None:
        found = plan(ctx, document)
        ctx.platform.pipelines.check(json.dumps(found.pipeline), None)
        with ctx.platform.db.session() as session:
            ours = objects.find(session, ctx.user.id, KSERVE_GROUP, SERVICE.kind, found.deployment)
        if ours is None:
            with contextlib.suppress(NotFound):
                ctx.platform.deployments.get(ctx.user.id, found.deployment)
                raise Conflict(
                    f"a deployment named {found.deployment!r} exists; delete it or name the "
                    "InferenceService otherwise"
                )

    def create(self, ctx: Context, document: Document) -> Applied:
        found = plan(ctx, document)
        run = ctx.platform.pipelines.start(
            ctx.user, json.dumps(found.pipeline), initializer_code(), None
        )
        refs = {"pipeline_run": run.id, "deployment": found.deployment}
        return Applied(refs, found.notes)

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied:
        """A new model (a new run: its version served, or its canary); a changed
        `canaryTrafficPercent` alone: the canary's share, or promoted at 100 or when removed."""
        found = plan(ctx, document)
        if _without_canary(stored.document) == _without_canary(document):
            percent = found.canary_percent
            change = (
                CanaryChange(None, None, True, False)
                if percent is None or percent >= 100
                else CanaryChange(None, percent, False, False)
            )
            with contextlib.suppress(Conflict, NotFound):
                ctx.platform.deployments.update(
                    ctx.user.id, found.deployment, {}, None, canary=change
                )
            return Applied(stored.refs, found.notes)
        return self.create(ctx, document)

    def status(self, ctx: Context, stored: Stored) -> dict[str, Any]:
        return service_status(ctx, stored)

    def delete(self, ctx: Context, stored: Stored) -> None:
        with contextlib.suppress(NotFound):
            ctx.platform.deployments.delete(ctx.user.id, str(stored.refs.get("deployment")))
        with contextlib.suppress(NotFound, Conflict):
            pipelines = ctx.platform.pipelines
            run = pipelines.find(ctx.user.id, str(stored.refs.get("pipeline_run")))
            if run.state in ("RUNNING", "PENDING"):
                pipelines.halt(run)
            pipelines.delete(run)


def _without_canary(document: Document) -> Document:
    found = copy.deepcopy(document)
    found.pop("status", None)
    predictor = (found.get("spec") or {}).get("predictor")
    if isinstance(predictor, dict):
        predictor.pop("canaryTrafficPercent", None)
    return found


def service_status(ctx: Context, stored: Stored) -> dict[str, Any]:
    """KServe's status: the predictor's URL once it serves, Ready when it does, and why not."""
    name = str(stored.refs.get("deployment"))
    steps, run_state, run_message = _run(ctx, str(stored.refs.get("pipeline_run")))
    try:
        view: dict[str, Any] | None = ctx.platform.deployments.get(ctx.user.id, name)
    except NotFound:
        view = None
    serving = view is not None and view["state"] in ("ready", "scaled to zero")
    failed = run_state == "FAILED" or (view is not None and view["state"] == "failing")
    why = run_message if run_state == "FAILED" else (view or {}).get("message", "")
    now = time.time()
    fetch = steps.get(FETCH, {}).get("state", "SUCCEEDED" if view else "")
    reason = "" if serving else ("ModelLoadFailed" if failed else "Pending")
    said = "" if serving else why
    loaded = "Loaded" if serving else ("FailedToLoad" if failed else "Pending")
    moving = "UpToDate" if serving else ("BlockedByFailedLoad" if failed else "InProgress")
    status: dict[str, Any] = {
        "conditions": [
            Condition("IngressReady", view is not None, "" if view else "Pending", at=now),
            Condition("PredictorReady", serving, reason, said, now),
            Condition("Ready", serving, reason, said, now),
        ],
        "modelStatus": {
            "states": {"activeModelState": loaded, "targetModelState": "Loaded"},
            "transitionStatus": moving,
            "storageInitializer": fetch,
        },
        "observedGeneration": stored.generation,
    }
    status["conditions"] = [c.as_dict() for c in status["conditions"]]
    if failed:
        failure = {"reason": "ModelLoadFailed", "message": why, "time": timestamp(now)}
        status["modelStatus"]["lastFailureInfo"] = failure
    if view is not None:
        url = str(view["endpoint"])
        status["url"] = url
        status["address"] = {"url": f"{url}/v1/models/{name}:predict"}
        status["components"] = {SERVE: _predictor(view)}
        status["grpcAddress"] = view.get("grpc_endpoint")
    return status


def _predictor(view: dict[str, Any]) -> dict[str, Any]:
    """The predictor's revisions and their traffic: the version served, and its canary."""
    latest = f"{view['name']}-predictor-{view['model_version']}"
    traffic = [{"revisionName": latest, "percent": 100, "latestRevision": view["canary"] is None}]
    found: dict[str, Any] = {"url": view["endpoint"], "latestReadyRevision": latest}
    canary = view.get("canary")
    if canary is not None:
        share = float(canary["percent"])
        canary_name = f"{view['name']}-predictor-{canary['version']}"
        traffic = [
            {
                "revisionName": canary_name,
                "percent": share,
                "latestRevision": True,
                "tag": "latest",
            },
            {
                "revisionName": latest,
                "percent": 100 - share,
                "latestRevision": False,
                "tag": "prev",
            },
        ]
        found["latestCreatedRevision"] = canary_name
    else:
        found["latestCreatedRevision"] = latest
    found["traffic"] = traffic
    return found


def _run(ctx: Context, run_id: str) -> tuple[dict[str, Any], str, str]:
    try:
        run = ctx.platform.pipelines.find(ctx.user.id, run_id)
    except NotFound:
        return {}, "", ""
    return dict(run.steps or {}), run.state, run.message
