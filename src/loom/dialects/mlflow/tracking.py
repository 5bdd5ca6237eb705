"""MLflow's tracking API (`/api/2.0/mlflow/experiments/…`, `runs/…`, `metrics/…`) over Loom's
runs and projects. Its experiments are Loom's projects."""

from __future__ import annotations

from fastapi import Response

from loom.api.auth import PlatformDep
from loom.dialects.mlflow.calls import ActorDep, Fields, mlflow_router, ok
from loom.dialects.mlflow.shapes import (
    entries,
    experiment_json,
    files_json,
    integer,
    listed,
    metric_json,
    metrics_in,
    objects,
    offset_of,
    paged,
    run_info_json,
    run_json,
    strings,
    text,
    view,
)
from loom.domain.errors import InvalidInput
from loom.domain.runs import Entry, Stage

router = mlflow_router()


def _required(fields: dict[str, object], name: str) -> str:
    return str(text(fields.get(name), name, required=True))


def _run_id(fields: dict[str, object]) -> str:
    found = fields.get("run_id") or fields.get("run_uuid")
    return str(text(found, "run_id", required=True))


# -- experiments (Loom's projects) -----------------------------------------------------------
@router.post("/experiments/create")
def create_experiment(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    if fields.get("artifact_location"):
        raise InvalidInput(
            "artifact_location: Loom keeps every experiment's artifacts itself (behind "
            "mlflow-artifacts:/); leave it out",
            field="artifact_location",
        )
    tags = entries(fields.get("tags"), "tags")
    project = loom.runs.create_project(who, fields.get("name"), tags)
    return ok({"experiment_id": str(project)})


@router.get("/experiments/get")
def get_experiment(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    found = loom.runs.project(who, _required(fields, "experiment_id"))
    return ok({"experiment": experiment_json(found)})


@router.get("/experiments/get-by-name")
def get_experiment_by_name(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    found = loom.runs.project_named(who, _required(fields, "experiment_name"))
    return ok({"experiment": experiment_json(found)})


@router.get("/experiments/search")
@router.post("/experiments/search")
def search_experiments(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    page = loom.runs.search_projects(
        who,
        view=view(fields.get("view_type")),
        filter=text(fields.get("filter"), "filter"),
        order_by=strings(fields.get("order_by"), "order_by"),
        max_results=integer(fields.get("max_results"), "max_results", 1000) or 0,
        offset=offset_of(fields.get("page_token")),
    )
    return ok(paged("experiments", [experiment_json(p) for p in page.items], page.next_offset))


@router.post("/experiments/delete")
def delete_experiment(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.set_project_stage(who, _required(fields, "experiment_id"), Stage.DELETED)
    return ok()


@router.post("/experiments/restore")
def restore_experiment(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.set_project_stage(who, _required(fields, "experiment_id"), Stage.ACTIVE)
    return ok()


@router.post("/experiments/update")
def update_experiment(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    key = _required(fields, "experiment_id")
    if fields.get("new_name"):
        loom.runs.rename_project(who, key, fields.get("new_name"))
    return ok()


@router.post("/experiments/set-experiment-tag")
def set_experiment_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    tag = Entry(_required(fields, "key"), str(text(fields.get("value"), "value") or ""))
    loom.runs.set_project_tag(who, _required(fields, "experiment_id"), tag)
    return ok()


@router.post("/experiments/delete-experiment-tag")
def delete_experiment_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.delete_project_tag(who, _required(fields, "experiment_id"), _required(fields, "key"))
    return ok()


# -- runs --------------------------------------------------------------------------------------
@router.post("/runs/create")
def create_run(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    run = loom.runs.create_run(
        who,
        fields.get("experiment_id") or "0",
        name=text(fields.get("run_name"), "run_name"),
        start_time=integer(fields.get("start_time"), "start_time"),
        tags=entries(fields.get("tags"), "tags"),
        user_id=text(fields.get("user_id"), "user_id"),
    )
    return ok({"run": run_json(run)})


@router.get("/runs/get")
def get_run(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    run_id = _run_id(fields)
    run = loom.runs.run(who, run_id)
    inputs, outputs = loom.runs.io(who, run_id)
    return ok({"run": run_json(run, inputs, outputs)})


@router.post("/runs/update")
def update_run(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    run = loom.runs.update_run(
        who,
        _run_id(fields),
        status=text(fields.get("status"), "status"),
        end_time=integer(fields.get("end_time"), "end_time"),
        name=text(fields.get("run_name"), "run_name"),
    )
    return ok({"run_info": run_info_json(run)})


@router.post("/runs/delete")
def delete_run(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.set_run_stage(who, _run_id(fields), Stage.DELETED)
    return ok()


@router.post("/runs/restore")
def restore_run(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.set_run_stage(who, _run_id(fields), Stage.ACTIVE)
    return ok()


@router.post("/runs/log-metric")
def log_metric(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.log(who, _run_id(fields), metrics=metrics_in([fields], "metric"))
    return ok()


@router.post("/runs/log-parameter")
def log_param(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    param = entries([{"key": fields.get("key"), "value": fields.get("value")}], "param")
    loom.runs.log(who, _run_id(fields), params=param)
    return ok()


@router.post("/runs/set-tag")
def set_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    tag = entries([{"key": fields.get("key"), "value": fields.get("value")}], "tag")
    loom.runs.log(who, _run_id(fields), tags=tag)
    return ok()


@router.post("/runs/delete-tag")
def delete_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.delete_tag(who, _run_id(fields), _required(fields, "key"))
    return ok()


@router.post("/runs/log-batch")
def log_batch(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.log(
        who,
        _run_id(fields),
        metrics=metrics_in(fields.get("metrics")),
        params=entries(fields.get("params"), "params"),
        tags=entries(fields.get("tags"), "tags"),
    )
    return ok()


@router.post("/runs/log-inputs")
def log_inputs(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    found = objects(fields.get("datasets"), "datasets") + objects(fields.get("models"), "models")
    loom.runs.set_io(who, _run_id(fields), "inputs", found)
    return ok()


@router.post("/runs/outputs")
def log_outputs(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.runs.set_io(who, _run_id(fields), "outputs", objects(fields.get("models"), "models"))
    return ok()


@router.post("/runs/log-model")
def log_model(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    """MLflow 2's model history tag; MLflow 3 logs models as logged models instead."""
    raw = text(fields.get("model_json"), "model_json", required=True)
    history = Entry("mlflow.log-model.history", f"[{raw}]")
    loom.runs.log(who, _run_id(fields), tags=[history])
    return ok()


@router.get("/metrics/get-history")
def get_metric_history(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    key = _required(fields, "metric_key")
    found = loom.runs.history(who, _run_id(fields), key)
    offset = offset_of(fields.get("page_token"))
    most = integer(fields.get("max_results"), "max_results")
    end = len(found) if most is None else offset + most
    shown = [metric_json(m) for m in found[offset:end]]
    return ok(paged("metrics", shown, end if end < len(found) else None))


@router.post("/runs/search")
def search_runs(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    page = loom.runs.search_runs(
        who,
        strings(fields.get("experiment_ids"), "experiment_ids"),
        filter=text(fields.get("filter"), "filter"),
        view=view(fields.get("run_view_type"), "run_view_type"),
        order_by=strings(fields.get("order_by"), "order_by"),
        max_results=integer(fields.get("max_results"), "max_results", 1000) or 0,
        offset=offset_of(fields.get("page_token")),
    )
    return ok(paged("runs", [run_json(r) for r in page.items], page.next_offset))


@router.get("/artifacts/list")
def list_artifacts(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    """The files of a run's artifact folder (the client lists through the proxy instead)."""
    run = loom.runs.run(who, _run_id(fields))
    folder = text(fields.get("path"), "path") or ""
    path = f"{run.project_id}/{run.id}/artifacts/{folder}".rstrip("/")
    _place, found = loom.run_files.listing(who, path)
    return ok({"root_uri": run.artifact_uri, **listed("files", files_json(found))})
