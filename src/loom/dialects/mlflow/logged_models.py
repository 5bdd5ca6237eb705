"""MLflow 3's logged models (`/api/2.0/mlflow/logged-models`): what `log_model` and autolog
make, with their own artifact folder, before any registration."""

from __future__ import annotations

from fastapi import Response

from loom.api.auth import PlatformDep
from loom.dialects.mlflow.calls import ActorDep, Fields, mlflow_router, ok
from loom.dialects.mlflow.shapes import (
    entries,
    files_json,
    integer,
    listed,
    logged_model_json,
    objects,
    offset_of,
    paged,
    strings,
    text,
)
from loom.domain.errors import InvalidInput

router = mlflow_router()


@router.post("/logged-models")
def create(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    model = loom.logged_models.create(
        who,
        fields.get("experiment_id") or "0",
        name=text(fields.get("name"), "name"),
        source_run_id=text(fields.get("source_run_id"), "source_run_id"),
        model_type=text(fields.get("model_type"), "model_type"),
        params=entries(fields.get("params"), "params"),
        tags=entries(fields.get("tags"), "tags"),
    )
    return ok({"model": logged_model_json(model)})


@router.post("/logged-models/search")
def search(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    if objects(fields.get("datasets"), "datasets"):
        raise InvalidInput(
            "datasets: Loom does not link metrics to datasets; search without them",
            field="datasets",
        )
    order = [
        (
            str(text(item.get("field_name"), "order_by.field_name", required=True)),
            item.get("ascending", True) is not False,
        )
        for item in objects(fields.get("order_by"), "order_by")
    ]
    page = loom.logged_models.search(
        who,
        strings(fields.get("experiment_ids"), "experiment_ids"),
        filter=text(fields.get("filter"), "filter"),
        order_by=order,
        max_results=integer(fields.get("max_results"), "max_results", 100) or 0,
        offset=offset_of(fields.get("page_token")),
    )
    return ok(paged("models", [logged_model_json(m) for m in page.items], page.next_offset))


@router.get("/logged-models/{model_id}")
def get(model_id: str, who: ActorDep, loom: PlatformDep) -> Response:
    return ok({"model": logged_model_json(loom.logged_models.get(who, model_id))})


@router.patch("/logged-models/{model_id}")
def finalize(model_id: str, fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    status = str(text(fields.get("status"), "status", required=True))
    return ok({"model": logged_model_json(loom.logged_models.finalize(who, model_id, status))})


@router.delete("/logged-models/{model_id}")
def delete(model_id: str, who: ActorDep, loom: PlatformDep) -> Response:
    loom.logged_models.delete(who, model_id)
    return ok()


@router.patch("/logged-models/{model_id}/tags")
def set_tags(model_id: str, fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.logged_models.set_tags(who, model_id, entries(fields.get("tags"), "tags"))
    return ok()


@router.delete("/logged-models/{model_id}/tags/{key}")
def delete_tag(model_id: str, key: str, who: ActorDep, loom: PlatformDep) -> Response:
    loom.logged_models.delete_tag(who, model_id, key)
    return ok()


@router.post("/logged-models/{model_id}/params")
def log_params(model_id: str, fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.logged_models.log_params(who, model_id, entries(fields.get("params"), "params"))
    return ok()


@router.get("/logged-models/{model_id}/artifacts/directories")
def list_artifacts(model_id: str, fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    model = loom.logged_models.get(who, model_id)
    folder = text(fields.get("artifact_directory_path"), "artifact_directory_path") or ""
    path = f"{model.project_id}/models/{model.id}/artifacts/{folder}".rstrip("/")
    _place, found = loom.run_files.listing(who, path)
    return ok({"root_uri": model.artifact_location, **listed("files", files_json(found))})
