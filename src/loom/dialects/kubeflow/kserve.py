"""KServe's InferenceService (`serving.kserve.io/v1beta1`) as a Loom deployment of the same name,
made by a pipeline of two steps: KServe's storage initializer as a job (the model at
`storageUri` fetched and registered as a version of the model named after the service), then
the deployment of that version (a canary of it, with `canaryTrafficPercent`). A `loom://` URI
deploys a registered version at once. Pure."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loom.dialects.kinds import Document, Note
from loom.dialects.kubeflow.pods import GPU_RESOURCES, Notes, quantity
from loom.domain import spec_checks as check

KSERVE_GROUP = "serving.kserve.io"
INITIALIZER = ".kserve/storage_initializer.py"
FETCH, SERVE = "storage-initializer", "predictor"
# KServe's model formats → what the storage initializer lays out for Loom's runtimes.
FORMATS = {
    "onnx": "onnx",
    "pytorch": "pytorch",
    "triton": "onnx",
    "mlflow": "mlflow",
    "xgboost": "xgboost",
}
REFUSED_FORMATS = {
    "sklearn": "a scikit-learn model is a pickle, which would run its author's code when "
    "loaded; save it as ONNX (skl2onnx) and use modelFormat onnx",
    "lightgbm": "save it as ONNX (onnxmltools) and use modelFormat onnx",
    "tensorflow": "save it as ONNX (tf2onnx) and use modelFormat onnx",
    "pmml": "no PMML runtime is offered",
    "paddle": "no Paddle runtime is offered",
    "huggingface": "no Hugging Face runtime is offered",
}
_PREDICTOR = (
    *("model", "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "batcher"),
    *("containerConcurrency", "timeout", "canaryTrafficPercent", "serviceAccountName", "logger"),
    *FORMATS,
    *REFUSED_FORMATS,
    "containers",
)
_POD = (
    "nodeSelector", "tolerations", "affinity", "imagePullSecrets", "priorityClassName",
    "securityContext", "volumes", "annotations", "labels", "deploymentStrategy",
)  # fmt: skip
_MODEL = (
    *("modelFormat", "storageUri", "runtime", "protocolVersion", "resources", "env", "args"),
    *("name", "image", "storage", "ports", "readinessProbe", "livenessProbe"),
)
TARGET = "autoscaling.knative.dev/target"


@dataclass(frozen=True)
class S3:
    """Credentials and endpoint for an s3:// model, from the predictor's service account."""

    endpoint: str | None
    key: str | None
    secret: str | None
    region: str | None = None


@dataclass
class ServicePlan:
    pipeline: dict[str, Any]
    deployment: str
    canary_percent: float | None
    notes: tuple[Note, ...]
    storage: str = ""  # the storage URI
    files: dict[str, str] = field(default_factory=dict)


Credentials = Callable[[str], S3 | None]


def inference_service(
    document: Document, credentials: Credentials, initializer: str
) -> ServicePlan:
    """The pipeline that serves an InferenceService; refused naming the field."""
    notes = Notes()
    name = str(document["metadata"]["name"])
    if len(name) > 63 or "." in name:
        raise check.fail("metadata.name", f"{name!r}: an InferenceService's name is a DNS label")
    spec = check.section(document, "spec", "", "the predictor")
    check.known(spec, ("predictor", "transformer", "explainer"), "spec")
    for part in ("transformer", "explainer"):
        if part in spec:
            raise check.fail(
                f"spec.{part}",
                f"a {part} container is not run; serve the model alone (a predictor)",
            )
    predictor = check.section(spec, "predictor", "spec", "the model to serve")
    check.known(predictor, (*_PREDICTOR, *_POD), "spec.predictor")
    for key in _POD:
        if key in predictor:
            notes.add(
                f"spec.predictor.{key}", "ignored", "replicas run in Loom's sandbox, placed by Loom"
            )
    if "containers" in predictor:
        raise check.fail(
            "spec.predictor.containers",
            "a custom predictor container is not run; give predictor.model with a storageUri",
        )
    kind, model, at = _model(predictor, notes)
    uri = check.text(model.get("storageUri") or "", f"{at}.storageUri")
    deploy = _deploy_step(name, predictor, document, notes)
    steps: list[dict[str, Any]] = []
    if uri.startswith("loom://"):
        deploy["model"] = _registered(uri, f"{at}.storageUri")
    else:
        fetch = _fetch_step(
            name, kind, uri, f"{at}.storageUri", predictor, credentials, initializer
        )
        steps.append(fetch)
        deploy["after"] = [FETCH]
        deploy["model"] = "${{ steps." + FETCH + ".outputs.model }}"
    steps.append(deploy)
    percent = deploy.get("canary_percent")
    pipeline = {"name": f"isvc-{name}", "description": f"InferenceService {name}", "steps": steps}
    return ServicePlan(pipeline, name, percent, notes.all(), uri)


def _model(predictor: dict[str, Any], notes: Notes) -> tuple[str, dict[str, Any], str]:
    """The model's format (Loom's layout) and its spec: `model`, or a framework's key."""
    if "model" in predictor:
        at = "spec.predictor.model"
        model = check.mapping(predictor["model"], at)
        check.known(model, _MODEL, at)
        format_ = check.mapping(model.get("modelFormat") or {}, f"{at}.modelFormat")
        check.known(format_, ("name", "version"), f"{at}.modelFormat")
        name = str(format_.get("name") or "").lower()
        where = f"{at}.modelFormat.name"
    else:
        given = [k for k in (*FORMATS, *REFUSED_FORMATS) if k in predictor]
        if len(given) != 1:
            raise check.fail("spec.predictor.model", "give the model to serve (predictor.model)")
        name = given[0]
        at = where = f"spec.predictor.{name}"
        model = check.mapping(predictor[name], at)
        check.known(model, _MODEL, at)
    if name in REFUSED_FORMATS:
        raise check.fail(where, f"{name}: {REFUSED_FORMATS[name]}")
    if name not in FORMATS:
        offered = ", ".join(sorted(FORMATS))
        raise check.fail(where, f"{name!r} is not a model format Loom serves ({offered})")
    if name == "pytorch":
        notes.add(
            where,
            "approximated",
            "a TorchScript model (model.pt) is served; TorchServe's archives (.mar) are not",
        )
    if name == "triton":
        notes.add(
            where, "approximated", "the ONNX model of Triton's repository is served by ONNX Runtime"
        )
    for key, why in {
        "runtime": "Loom's runtimes serve it (ONNX Runtime, TorchScript, XGBoost)",
        "protocolVersion": "every deployment answers V1 and V2 over REST, and V2 over gRPC",
        "env": "a replica's environment is Loom's",
        "args": "a replica's server is Loom's",
        "image": "a replica's server is Loom's",
        "ports": "the deployment's endpoint is chosen by Loom",
    }.items():
        if key in model:
            notes.add(f"{at}.{key}", "ignored", why)
    return FORMATS[name], model, at


def _registered(uri: str, where: str) -> str:
    """`loom://MODEL[@ALIAS|@VERSION]` as NAME@REF."""
    ref = uri.removeprefix("loom://").strip("/")
    model, _, version = ref.partition("@")
    if not model or "/" in model:
        raise check.fail(where, f"{uri!r}: write loom://MODEL or loom://MODEL@ALIAS")
    return f"{model}@{version or 'latest'}"


def _fetch_step(
    name: str,
    kind: str,
    uri: str,
    where: str,
    predictor: dict[str, Any],
    credentials: Credentials,
    initializer: str,
) -> dict[str, Any]:
    """KServe's storage initializer as a job that registers the model `name`."""
    manifest: dict[str, Any] = {
        "name": f"{name}-storage-initializer",
        "model_name": name,
        "cpus": 0.25,
        "memory": "512MiB",
        "framework": {
            "name": "python",
            "command": f"python {initializer} --uri {shlex.quote(uri)} --format {kind}",
        },
        "environment": {"install_framework": False},
    }
    if uri.startswith("s3://"):
        manifest["data_stores"] = [_s3_store(uri, where, predictor, credentials)]
    elif uri.startswith("file://"):
        path = uri.removeprefix("file://")
        if not path.startswith("/") or ".." in path.split("/"):
            raise check.fail(where, f"{uri!r}: file:// takes an absolute path")
        folder, _, leaf = path.rstrip("/").rpartition("/")
        manifest["data_stores"] = [
            {
                "id": "model",
                "type": "mount_volume",
                "training_data": {"container": leaf},
                "connection": {"type": "host_mount", "path": folder or "/"},
            }
        ]
    elif not uri.startswith(("http://", "https://")):
        scheme = uri.split("://", 1)[0] if "://" in uri else uri
        raise check.fail(
            where,
            f"{scheme!r}: storageUri may be s3://, file://, http(s):// or loom://MODEL[@ALIAS]",
        )
    return {"name": FETCH, "kind": "job", "manifest": manifest}


def _s3_store(
    uri: str, where: str, predictor: dict[str, Any], credentials: Credentials
) -> dict[str, Any]:
    bucket = uri.removeprefix("s3://").strip("/")
    if not bucket:
        raise check.fail(where, f"{uri!r} names no bucket")
    account = predictor.get("serviceAccountName")
    found = credentials(str(account)) if account else None
    if account and found is None:
        raise check.fail(
            "spec.predictor.serviceAccountName",
            f"no ServiceAccount {account!r} with a Secret: apply them with the service",
        )
    connection: dict[str, str] = {}
    if found is not None:
        for key, value in (
            ("auth_url", found.endpoint),
            ("user_name", found.key),
            ("password", found.secret),
            ("region", found.region),
        ):
            if value:
                connection[key] = value
    return {
        "id": "model",
        "type": "s3_datastore",
        "training_data": {"container": bucket},
        "connection": connection,
    }


def _deploy_step(
    name: str, predictor: dict[str, Any], document: Document, notes: Notes
) -> dict[str, Any]:
    """The deployment's step: its replicas, scaling, batching, canary."""
    at = "spec.predictor"
    low = check.count(predictor.get("minReplicas", 1), f"{at}.minReplicas", 0)
    high = check.count(predictor.get("maxReplicas"), f"{at}.maxReplicas", 0)
    step: dict[str, Any] = {
        "name": SERVE,
        "kind": "deploy",
        "deployment": name,
        "min_replicas": low,
    }
    if high:  # KServe's 0 (or none): the autoscaler's own bound
        step["max_replicas"] = max(high, low or 1)
    scaling = _scaling(predictor, document, notes)
    if predictor.get("canaryTrafficPercent") is not None:
        percent = check.number(predictor["canaryTrafficPercent"], f"{at}.canaryTrafficPercent")
        if not 0 <= percent <= 100:
            raise check.fail(f"{at}.canaryTrafficPercent", f"0 to 100, got {percent:g}")
        step["canary_percent"] = percent
    if scaling:
        step["scaling"] = scaling
    return step


def _scaling(predictor: dict[str, Any], document: Document, notes: Notes) -> dict[str, Any]:
    """Autoscaling, batching, logging and GPUs as the deployment's settings."""
    at = "spec.predictor"
    scaling: dict[str, Any] = {}
    target = predictor.get("scaleTarget")
    annotations = (document.get("metadata") or {}).get("annotations") or {}
    if target is None and TARGET in annotations:
        target = annotations[TARGET]
    if target is not None:
        scaling["target_concurrency"] = check.number(target, f"{at}.scaleTarget")
        metric = predictor.get("scaleMetric", "concurrency")
        if metric != "concurrency":
            notes.add(
                f"{at}.scaleMetric",
                "approximated",
                f"{metric}: replicas scale on requests in flight (concurrency)",
            )
    if "containerConcurrency" in predictor:
        notes.add(
            f"{at}.containerConcurrency",
            "approximated",
            "a replica's requests in flight are bounded by the gateway (twice the target)",
        )
    batcher = check.mapping(predictor.get("batcher") or {}, f"{at}.batcher")
    check.known(batcher, ("maxBatchSize", "maxLatency", "timeout"), f"{at}.batcher")
    if "maxBatchSize" in batcher:
        scaling["batch_size"] = check.count(
            batcher["maxBatchSize"], f"{at}.batcher.maxBatchSize", 1
        )
    if "maxLatency" in batcher:
        scaling["batch_wait_ms"] = check.number(batcher["maxLatency"], f"{at}.batcher.maxLatency")
    if "logger" in predictor:
        scaling["request_log"] = True
        notes.add(
            f"{at}.logger", "approximated", "requests are logged by the gateway, not sent to a URL"
        )
    gpus = _gpus(predictor)
    if gpus:
        scaling["gpus_per_replica"] = gpus
    if "timeout" in predictor:
        notes.add(f"{at}.timeout", "ignored", "a request waits at the gateway by its own limits")
    return scaling


def _gpus(predictor: dict[str, Any]) -> int:
    model = predictor.get("model") if isinstance(predictor.get("model"), dict) else {}
    resources = (model or {}).get("resources") or {}
    limits = resources.get("limits") or {} if isinstance(resources, dict) else {}
    for key in GPU_RESOURCES:
        if key in limits:
            return int(quantity(limits[key], f"spec.predictor.model.resources.limits.{key}"))
    return 0
