"""MLflow's model registry (`/api/2.0/mlflow/registered-models/…`, `model-versions/…`) on
Loom's registry: the same models and versions `loom models` lists and `loom deploy` serves."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi import Response

from loom.api.auth import PlatformDep
from loom.api.platform import Platform
from loom.dialects.mlflow import sources
from loom.dialects.mlflow.calls import ActorDep, Fields, mlflow_router, ok
from loom.dialects.mlflow.shapes import (
    entries,
    integer,
    model_json,
    offset_of,
    paged,
    registry_uri,
    strings,
    text,
    version_json,
)
from loom.domain.catalog import STAGES, ModelRecord, VersionRecord, latest_by_stage, stage_named
from loom.domain.errors import Conflict, Forbidden, InvalidInput, NotFound
from loom.domain.run_search import (
    MODELS,
    VERSIONS,
    Clause,
    OrderKey,
    compare,
    parse_filter,
    parse_order_by,
)
from loom.domain.runs import Actor, check_name, check_value

router = mlflow_router()
MAX_TAG_VALUE = 100_000
PROMPT = "mlflow.prompt.is_prompt"  # MLflow keeps prompts as registered models with this tag


def _name(fields: dict[str, object], key: str = "name") -> str:
    return str(text(fields.get(key), key, required=True))


def _number(fields: dict[str, object]) -> int:
    found = integer(fields.get("version"), "version")
    if found is None or found < 1:
        raise InvalidInput("version: a version number (1, 2, …)", field="version")
    return found


def _tag(fields: dict[str, object]) -> tuple[str, str]:
    key = check_name("tag", fields.get("key"))
    value = check_value("tag", text(fields.get("value"), "value") or "", MAX_TAG_VALUE)
    return key, value


# -- registered models -----------------------------------------------------------------------
@router.post("/registered-models/create")
def create_model(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    tags = {t.key: t.value for t in entries(fields.get("tags"), "tags")}
    description = text(fields.get("description"), "description") or ""
    found = loom.catalog.create_model(who.user_id, _name(fields), description, tags)
    return ok({"registered_model": model_json(found)})


@router.get("/registered-models/get")
def get_model(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    return ok({"registered_model": model_json(loom.catalog.model(who.user_id, _name(fields)))})


@router.patch("/registered-models/update")
def update_model(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    description = text(fields.get("description"), "description") or ""
    found = loom.catalog.describe(who.user_id, _name(fields), description)
    return ok({"registered_model": model_json(found)})


@router.post("/registered-models/rename")
def rename_model(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    name = _name(fields)
    _not_from_a_job(who, "rename a registered model")
    _not_served(loom, who, name)
    found = loom.catalog.rename(who.user_id, name, _name(fields, "new_name"))
    return ok({"registered_model": model_json(found)})


@router.delete("/registered-models/delete")
def delete_model(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    name = _name(fields)
    loom.catalog.model(who.user_id, name)  # 404 first
    _not_from_a_job(who, "delete a registered model")
    _not_served(loom, who, name)
    loom.registry.delete(who.user_id, name)
    return ok()


@router.get("/registered-models/search")
def search_models(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    clauses, prompts = _without_prompts(parse_filter(text(fields.get("filter"), "filter"), MODELS))
    order = parse_order_by(strings(fields.get("order_by"), "order_by"), MODELS)
    found = [
        m
        for m in loom.catalog.models(who.user_id)
        if (m.tags.get(PROMPT) == "true") == prompts
        and all(compare(_model_value(m, c.kind, c.key), c.op, c.value) for c in clauses)
    ]
    found.sort(key=lambda m: m.name)
    _ordered(found, order, _model_value)
    return _page(fields, "registered_models", [model_json(m) for m in found], 100)


@router.get("/registered-models/get-latest-versions")
@router.post("/registered-models/get-latest-versions")
def latest_versions(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    wanted = tuple(stage_named(s) for s in strings(fields.get("stages"), "stages")) or STAGES
    versions = loom.catalog.versions(who.user_id, _name(fields))
    if not versions:
        loom.catalog.model(who.user_id, _name(fields))  # 404 for a model that is not there
    found = latest_by_stage(versions, wanted)
    return ok({"model_versions": [version_json(v) for v in found]})


@router.post("/registered-models/set-tag")
def set_model_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.catalog.set_tag(who.user_id, _name(fields), *_tag(fields))
    return ok()


@router.delete("/registered-models/delete-tag")
def delete_model_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.catalog.delete_tag(who.user_id, _name(fields), _name(fields, "key"))
    return ok()


@router.post("/registered-models/alias")
def set_alias(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    alias = _name(fields, "alias")
    if alias.lower() == "latest" or (alias[:1] in "vV" and alias[1:].isdigit()):
        raise InvalidInput(f"alias: {alias!r} would read as a version", field="alias")
    loom.registry.set_alias(who.user_id, _name(fields), alias, str(_number(fields)))
    return ok()


@router.delete("/registered-models/alias")
def delete_alias(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    name, alias = _name(fields), _name(fields, "alias")
    try:
        loom.registry.delete_alias(who.user_id, name, alias)
    except NotFound:
        loom.catalog.model(who.user_id, name)  # no such model is an error; no such alias is not
    return ok()


@router.get("/registered-models/alias")
def by_alias(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    found = loom.catalog.by_alias(who.user_id, _name(fields), _name(fields, "alias"))
    return ok({"model_version": version_json(found)})


# -- versions ----------------------------------------------------------------------------------
@router.post("/model-versions/create")
def create_version(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    name = _name(fields)
    loom.catalog.model(who.user_id, name)  # 404 before looking for files
    source = text(fields.get("source"), "source") or ""
    run_id = text(fields.get("run_id"), "run_id") or ""
    model_id = text(fields.get("model_id"), "model_id") or ""
    found = sources.resolve(loom, who, source, run_id, model_id)
    version = loom.catalog.create_version(
        who.user_id,
        name,
        files=found.files,
        source=source or f"models:/{model_id}",
        run_id=found.run_id or run_id,
        job_id=found.job_id,
        framework=found.framework,
        metrics=found.metrics,
        run_info=found.run_info,
        description=text(fields.get("description"), "description") or "",
        tags={t.key: t.value for t in entries(fields.get("tags"), "tags")},
    )
    return ok({"model_version": version_json(version)})


@router.get("/model-versions/get")
def get_version(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    found = loom.catalog.version(who.user_id, _name(fields), _number(fields))
    return ok({"model_version": version_json(found)})


@router.patch("/model-versions/update")
def update_version(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    description = text(fields.get("description"), "description") or ""
    found = loom.catalog.describe_version(who.user_id, _name(fields), _number(fields), description)
    return ok({"model_version": version_json(found)})


@router.post("/model-versions/transition-stage")
def transition(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    stage = stage_named(_name(fields, "stage"))
    archive = fields.get("archive_existing_versions") in (True, "true", "True")
    found = loom.catalog.transition(who.user_id, _name(fields), _number(fields), stage, archive)
    return ok({"model_version": version_json(found)})


@router.delete("/model-versions/delete")
def delete_version(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    name, number = _name(fields), _number(fields)
    loom.catalog.version(who.user_id, name, number)  # 404 first
    _not_from_a_job(who, "delete a model version")
    _not_served(loom, who, name, number)
    loom.registry.delete(who.user_id, name, str(number))
    return ok()


@router.get("/model-versions/search")
def search_versions(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    clauses, prompts = _without_prompts(
        parse_filter(text(fields.get("filter"), "filter"), VERSIONS)
    )
    order = parse_order_by(strings(fields.get("order_by"), "order_by"), VERSIONS) or [
        OrderKey("attribute", "last_updated_timestamp", False),
        OrderKey("attribute", "name", True),
        OrderKey("attribute", "version_number", False),
    ]
    names = {c.value for c in clauses if c.kind == "attribute" and c.key == "name" and c.op == "="}
    pool = loom.catalog.versions(who.user_id, str(next(iter(names))) if len(names) == 1 else None)
    found = [
        v
        for v in pool
        if (v.tags.get(PROMPT) == "true") == prompts
        and all(compare(_version_value(v, c.kind, c.key), c.op, c.value) for c in clauses)
    ]
    _ordered(found, order, _version_value)
    return _page(fields, "model_versions", [version_json(v) for v in found], 10_000)


@router.get("/model-versions/get-download-uri")
def download_uri(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    name, number = _name(fields), _number(fields)
    loom.catalog.version(who.user_id, name, number)
    model_id = loom.registry.summary(who.user_id, name).model.id
    return ok({"artifact_uri": registry_uri(model_id, number)})


@router.post("/model-versions/set-tag")
def set_version_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    loom.catalog.set_tag(who.user_id, _name(fields), *_tag(fields), version=_number(fields))
    return ok()


@router.delete("/model-versions/delete-tag")
def delete_version_tag(fields: Fields, who: ActorDep, loom: PlatformDep) -> Response:
    key = _name(fields, "key")
    loom.catalog.delete_tag(who.user_id, _name(fields), key, version=_number(fields))
    return ok()


# -- helpers -------------------------------------------------------------------------------------
def _not_from_a_job(who: Actor, what: str) -> None:
    """A job's token registers models and versions, but deletes and renames none: a job's code
    is its owner's, not trusted with what the owner keeps."""
    if who.job_id is not None:
        raise Forbidden(f"a job's token cannot {what}; use your own token")


def _not_served(loom: Platform, who: Actor, name: str, version: int | None = None) -> None:
    serving = loom.deployments.using(who.user_id, name, version)
    if serving:
        what = f"version {version} of model {name!r}" if version else f"model {name!r}"
        raise Conflict(f"{what} is served by deployment {', '.join(serving)}; delete that first")


def _without_prompts(clauses: list[Clause]) -> tuple[list[Clause], bool]:
    """MLflow's client asks for models that are not prompts (`tags.mlflow.prompt.is_prompt !=
    'true'`), which models without the tag are: that clause is taken apart, as MLflow's server
    does. Whether prompts are asked for instead."""
    prompts = False
    kept = []
    for clause in clauses:
        if clause.kind == "tag" and clause.key == PROMPT:
            wanted = str(clause.value).lower()
            prompts = (clause.op, wanted) in (("=", "true"), ("!=", "false"))
        else:
            kept.append(clause)
    return kept, prompts


def _model_value(model: ModelRecord, kind: str, key: str) -> str | float | None:
    if kind == "tag":
        return model.tags.get(key)
    found: dict[str, str | float] = {
        "name": model.name,
        "creation_timestamp": round(model.created_at * 1000),
        "last_updated_timestamp": round(model.updated_at * 1000),
    }
    return found.get(key)


def _version_value(version: VersionRecord, kind: str, key: str) -> str | float | None:
    if kind == "tag":
        return version.tags.get(key)
    found: dict[str, str | float] = {
        "name": version.model,
        "run_id": version.run_id,
        "source_path": version.source,
        "current_stage": version.stage,
        "version_number": version.version,
        "creation_timestamp": round(version.created_at * 1000),
        "last_updated_timestamp": round(version.updated_at * 1000),
    }
    return found.get(key)


def _ordered(items: list[Any], order: list[OrderKey], value: Callable[..., object]) -> None:
    """Sort in place by each key in turn (the first the strongest), missing values last."""
    for key in reversed(order):
        items.sort(
            key=partial(_sort_key, value=value, kind=key.kind, name=key.key),
            reverse=not key.ascending,
        )


def _sort_key(item: Any, *, value: Callable[..., object], kind: str, name: str) -> tuple[bool, Any]:
    found = value(item, kind, name)
    return (found is None, found if found is not None else "")


def _page(fields: dict[str, object], key: str, shown: list[object], most: int) -> Response:
    limit = integer(fields.get("max_results"), "max_results", 100) or 0
    if not 1 <= limit <= most:
        raise InvalidInput(f"max_results: between 1 and {most}, got {limit}", field="max_results")
    offset = offset_of(fields.get("page_token"))
    more = offset + limit < len(shown)
    return ok(paged(key, shown[offset : offset + limit], offset + limit if more else None))
