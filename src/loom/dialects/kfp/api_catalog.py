"""KFP's API v2beta1, the part that keeps things: healthz, experiments, and pipelines with
their versions (each version holds its compiled IR, checked when it is uploaded)."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request, UploadFile

import loom
from loom.api.auth import PlatformDep, UserDep
from loom.dialects.kfp import listing, shapes
from loom.dialects.kfp.api_common import (
    PREFIX,
    KfpRoute,
    documents_of,
    json_body,
    objects,
    read_package,
    spec_of,
)
from loom.dialects.kfp.objects import KfpObjects
from loom.dialects.kfp.translate import translate
from loom.domain.errors import Conflict, InvalidInput, NotFound
from loom.store.tables import DialectObject

# KFP's API, not Loom's: its clients read KFP's definitions, so it stays out of Loom's OpenAPI.
router = APIRouter(prefix=PREFIX, tags=["kfp"], route_class=KfpRoute, include_in_schema=False)
Text = Annotated[str | None, Query(max_length=10_000)]
PageSize = Annotated[int | None, Query(ge=0, le=listing.MAX_PAGE)]
DEFAULT_EXPERIMENT = "Default"


@router.get("/healthz")
def healthz() -> dict[str, Any]:
    """KFP's health answer: one user's view of the platform (not multi-user namespaces)."""
    return {"multi_user": False, "pipeline_store": "database", "tag_name": loom.__version__}


# -- experiments -------------------------------------------------------------------------------
def experiment_json(kept: KfpObjects, row: DialectObject) -> dict[str, Any]:
    runs = kept.all("run", row.id)
    last = max((r.created_at for r in runs), default=None)
    return shapes.experiment(row.id, row.body, row.created_at, last)


def default_experiment(kept: KfpObjects) -> DialectObject:
    """The caller's experiment named Default, made on first use (as KFP has one)."""
    found = kept.named("experiment", DEFAULT_EXPERIMENT)
    if found is not None:
        return found
    body = {"display_name": DEFAULT_EXPERIMENT, "description": "runs not given an experiment"}
    return kept.add("experiment", DEFAULT_EXPERIMENT, body)


@router.post("/experiments")
async def create_experiment(
    request: Request, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    body = json_body(await request.body(), "experiment")
    name = str(body.get("display_name") or "").strip()
    if not name:
        raise InvalidInput("display_name: an experiment needs a name", field="display_name")
    kept = objects(platform, user)
    if kept.named("experiment", name) is not None:
        raise Conflict(f"display_name: you already have an experiment {name!r}")
    fields = {"display_name": name, "description": str(body.get("description") or "")}
    return experiment_json(kept, kept.add("experiment", name, fields))


@router.get("/experiments")
def list_experiments(
    platform: PlatformDep,
    user: UserDep,
    filter: Text = None,
    sort_by: Text = None,
    page_token: Text = None,
    page_size: PageSize = None,
    namespace: Text = None,
) -> dict[str, Any]:
    kept = objects(platform, user)
    found = [experiment_json(kept, row) for row in kept.all("experiment")]
    chosen, total, token = listing.page(
        found,
        filter_json=filter,
        sort_by=sort_by,
        page_token=page_token,
        page_size=page_size,
        keys=("display_name", "experiment_id", "created_at", "storage_state", "description"),
    )
    return {"experiments": chosen, "total_size": total, "next_page_token": token}


@router.get("/experiments/{experiment_id}")
def get_experiment(experiment_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    kept = objects(platform, user)
    return experiment_json(kept, kept.get("experiment", experiment_id))


@router.delete("/experiments/{experiment_id}")
def delete_experiment(experiment_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """The experiment; its runs stay (as KFP keeps them)."""
    kept = objects(platform, user)
    kept.remove(kept.get("experiment", experiment_id))
    return {}


@router.post("/experiments/{experiment_id}:archive")
def archive_experiment(experiment_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """The experiment and its runs archived: hidden from listings that ask for AVAILABLE."""
    return _storage(experiment_id, platform, user, "ARCHIVED")


@router.post("/experiments/{experiment_id}:unarchive")
def unarchive_experiment(
    experiment_id: str, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    return _storage(experiment_id, platform, user, "AVAILABLE")


def _storage(experiment_id: str, platform: Any, user: Any, state: str) -> dict[str, Any]:
    kept = objects(platform, user)
    row = kept.get("experiment", experiment_id)
    kept.change(row, storage_state=state)
    if state == "ARCHIVED":
        for run in kept.all("run", row.id):
            kept.change(run, storage_state=state)
    return {}


# -- pipelines and versions --------------------------------------------------------------------
def pipeline_json(row: DialectObject) -> dict[str, Any]:
    return shapes.pipeline(row.id, row.body, row.created_at)


def version_json(row: DialectObject, with_spec: bool = True) -> dict[str, Any]:
    return shapes.pipeline_version(row.id, str(row.parent_id), row.body, row.created_at, with_spec)


def check_pipeline(documents: list[dict[str, Any]]) -> None:
    """Refuses, at upload, a pipeline Loom could not run (naming the task and field)."""
    spec, platform = documents[0], (documents[1] if len(documents) > 1 else {})
    try:
        translate(spec, platform, None, require=False)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a shape not foreseen
        raise InvalidInput(
            f"uploadfile: not a compiled KFP pipeline Loom can read: {type(exc).__name__}: {exc}",
            field="uploadfile",
        ) from None


async def _package(uploadfile: UploadFile) -> list[dict[str, Any]]:
    data = await uploadfile.read()
    documents = await anyio.to_thread.run_sync(read_package, data, uploadfile.filename or "")
    await anyio.to_thread.run_sync(check_pipeline, documents)
    return documents


def _new_pipeline(kept: KfpObjects, name: str, description: str) -> DialectObject:
    if kept.named("pipeline", name) is not None:
        raise Conflict(f"name: you already have a pipeline {name!r}; upload a version of it")
    body = {"name": name, "display_name": name, "description": description}
    return kept.add("pipeline", name, body)


def _new_version(
    kept: KfpObjects, pipeline: DialectObject, name: str, description: str, documents: list[Any]
) -> DialectObject:
    if any(v.name == name for v in kept.all("pipeline_version", pipeline.id)):
        raise Conflict(f"name: pipeline {pipeline.name!r} already has a version {name!r}")
    body = {
        "name": name,
        "display_name": name,
        "description": description,
        "pipeline_spec": spec_of(documents),
    }
    return kept.add("pipeline_version", name, body, parent_id=pipeline.id)


@router.post("/pipelines/upload")
async def upload_pipeline(
    uploadfile: UploadFile,
    platform: PlatformDep,
    user: UserDep,
    name: Text = None,
    display_name: Text = None,
    description: Text = None,
    namespace: Text = None,
) -> dict[str, Any]:
    """A compiled pipeline as a new pipeline with its first version."""
    documents = await _package(uploadfile)
    title = (display_name or name or _file_title(uploadfile.filename)).strip()
    kept = objects(platform, user)
    pipeline = _new_pipeline(kept, title, description or "")
    _new_version(kept, pipeline, title, description or "", documents)
    return pipeline_json(pipeline)


@router.post("/pipelines/upload_version")
async def upload_pipeline_version(
    uploadfile: UploadFile,
    platform: PlatformDep,
    user: UserDep,
    pipelineid: Text = None,
    name: Text = None,
    display_name: Text = None,
    description: Text = None,
) -> dict[str, Any]:
    documents = await _package(uploadfile)
    kept = objects(platform, user)
    pipeline = kept.get("pipeline", str(pipelineid or ""))
    title = (display_name or name or _file_title(uploadfile.filename)).strip()
    return version_json(_new_version(kept, pipeline, title, description or "", documents))


def _file_title(filename: str | None) -> str:
    base = (filename or "pipeline").rsplit("/", 1)[-1]
    return base.split(".", 1)[0] or "pipeline"


@router.post("/pipelines")
async def create_pipeline(request: Request, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """A pipeline with no version yet."""
    body = json_body(await request.body(), "pipeline")
    title = str(body.get("display_name") or body.get("name") or "").strip()
    if not title:
        raise InvalidInput("display_name: a pipeline needs a name", field="display_name")
    kept = objects(platform, user)
    return pipeline_json(_new_pipeline(kept, title, str(body.get("description") or "")))


@router.post("/pipelines/create")
async def create_pipeline_and_version(
    request: Request, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    body = json_body(await request.body(), "body")
    given = body.get("pipeline") or {}
    version = body.get("pipeline_version") or {}
    documents = documents_of(version.get("pipeline_spec"), "pipeline_version.pipeline_spec")
    await anyio.to_thread.run_sync(check_pipeline, documents)
    title = str(given.get("display_name") or given.get("name") or "").strip()
    if not title:
        raise InvalidInput(
            "pipeline.display_name: a pipeline needs a name", field="pipeline.display_name"
        )
    kept = objects(platform, user)
    pipeline = _new_pipeline(kept, title, str(given.get("description") or ""))
    name = str(version.get("display_name") or version.get("name") or title)
    _new_version(kept, pipeline, name, str(version.get("description") or ""), documents)
    return pipeline_json(pipeline)


@router.post("/pipelines/{pipeline_id}/versions")
async def create_pipeline_version(
    pipeline_id: str, request: Request, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    body = json_body(await request.body(), "pipeline_version")
    if body.get("package_url") and not body.get("pipeline_spec"):
        raise InvalidInput(
            "package_url: Loom does not fetch packages from URLs; upload the file "
            "(upload_pipeline_version) or send pipeline_spec",
            field="package_url",
        )
    documents = documents_of(body.get("pipeline_spec"))
    await anyio.to_thread.run_sync(check_pipeline, documents)
    kept = objects(platform, user)
    pipeline = kept.get("pipeline", pipeline_id)
    name = str(body.get("display_name") or body.get("name") or "").strip()
    if not name:
        raise InvalidInput("display_name: a version needs a name", field="display_name")
    return version_json(
        _new_version(kept, pipeline, name, str(body.get("description") or ""), documents)
    )


@router.get("/pipelines")
def list_pipelines(
    platform: PlatformDep,
    user: UserDep,
    filter: Text = None,
    sort_by: Text = None,
    page_token: Text = None,
    page_size: PageSize = None,
    namespace: Text = None,
) -> dict[str, Any]:
    found = [pipeline_json(row) for row in objects(platform, user).all("pipeline")]
    chosen, total, token = listing.page(
        found,
        filter_json=filter,
        sort_by=sort_by,
        page_token=page_token,
        page_size=page_size,
        keys=("display_name", "pipeline_id", "created_at", "description"),
    )
    return {"pipelines": chosen, "total_size": total, "next_page_token": token}


@router.get("/pipelines/names/{name}")
def get_pipeline_by_name(name: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    found = objects(platform, user).named("pipeline", name)
    if found is None:
        raise _missing("pipeline", name)
    return pipeline_json(found)


def _missing(kind: str, name: str) -> NotFound:
    return NotFound(f"no {kind} {name!r}")


@router.get("/pipelines/{pipeline_id}")
def get_pipeline(pipeline_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    return pipeline_json(objects(platform, user).get("pipeline", pipeline_id))


@router.delete("/pipelines/{pipeline_id}")
def delete_pipeline(pipeline_id: str, platform: PlatformDep, user: UserDep) -> dict[str, Any]:
    """The pipeline and its versions; runs made from them stay."""
    kept = objects(platform, user)
    pipeline = kept.get("pipeline", pipeline_id)
    for version in kept.all("pipeline_version", pipeline.id):
        kept.remove(version)
    kept.remove(pipeline)
    return {}


@router.get("/pipelines/{pipeline_id}/versions")
def list_pipeline_versions(
    pipeline_id: str,
    platform: PlatformDep,
    user: UserDep,
    filter: Text = None,
    sort_by: Text = None,
    page_token: Text = None,
    page_size: PageSize = None,
) -> dict[str, Any]:
    kept = objects(platform, user)
    pipeline = kept.get("pipeline", pipeline_id)
    found = [version_json(row, False) for row in kept.all("pipeline_version", pipeline.id)]
    chosen, total, token = listing.page(
        found,
        filter_json=filter,
        sort_by=sort_by,
        page_token=page_token,
        page_size=page_size,
        keys=("display_name", "pipeline_version_id", "created_at", "description"),
    )
    return {"pipeline_versions": chosen, "total_size": total, "next_page_token": token}


@router.get("/pipelines/{pipeline_id}/versions/{version_id}")
def get_pipeline_version(
    pipeline_id: str, version_id: str, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    row = objects(platform, user).get("pipeline_version", version_id)
    if row.parent_id != pipeline_id:
        raise _missing("pipeline version", version_id)
    return version_json(row)


@router.delete("/pipelines/{pipeline_id}/versions/{version_id}")
def delete_pipeline_version(
    pipeline_id: str, version_id: str, platform: PlatformDep, user: UserDep
) -> dict[str, Any]:
    kept = objects(platform, user)
    row = kept.get("pipeline_version", version_id)
    if row.parent_id != pipeline_id:
        raise _missing("pipeline version", version_id)
    kept.remove(row)
    return {}


def pipeline_documents(kept: KfpObjects, reference: dict[str, Any]) -> list[dict[str, Any]]:
    """The IR of a run's `pipeline_version_reference` (its latest version when only the
    pipeline is named)."""
    version_id = reference.get("pipeline_version_id")
    if version_id:
        return documents_of(kept.get("pipeline_version", str(version_id)).body["pipeline_spec"])
    pipeline = kept.get("pipeline", str(reference.get("pipeline_id") or ""))
    versions = kept.all("pipeline_version", pipeline.id)
    if not versions:
        raise InvalidInput(
            f"pipeline_version_reference: pipeline {pipeline.name!r} has no version yet",
            field="pipeline_version_reference",
        )
    return documents_of(versions[-1].body["pipeline_spec"])
