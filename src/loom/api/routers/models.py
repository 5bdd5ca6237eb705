"""`/v1/models`: registered models, their versions with provenance, aliases, downloads, and the
best version by a final metric."""

from __future__ import annotations

import os
import tempfile
import zipfile
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import FileResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.background import BackgroundTask

from loom.api.audit import AuditDep
from loom.api.auth import PlatformDep, UserDep
from loom.api.openapi import JSON_OR_MARKDOWN, ZIP
from loom.api.platform import Platform
from loom.api.schemas import PRINTABLE, iso
from loom.domain.errors import Conflict
from loom.registry.factsheet import factsheet, markdown
from loom.registry.models import ModelSummary
from loom.store.tables import ModelVersion

router = APIRouter(prefix="/v1/models", tags=["models"])
# Letters, digits and dashes, at least one not a digit: a number is a version, not an alias.
ALIAS_PATTERN = r"^[A-Za-z0-9-]*[A-Za-z-][A-Za-z0-9-]*$"

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=PRINTABLE)]


class AliasIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    version: int | Annotated[str, Field(min_length=1, max_length=100, pattern=PRINTABLE)]


def summary_json(found: ModelSummary) -> dict[str, Any]:
    return {
        "name": found.model.name,
        "versions": found.versions,
        "latest_version": found.latest,
        "aliases": found.aliases,
        "created_at": iso(found.model.created_at),
    }


def version_json(
    version: ModelVersion, name: str, aliases: dict[str, int], user: str
) -> dict[str, Any]:
    return {
        "model": name,
        "version": version.version,
        "aliases": sorted(a for a, v in aliases.items() if v == version.version),
        "created_at": iso(version.created_at),
        "provenance": {
            "job_id": version.job_id,
            "user": user,
            "code_digest": version.code_digest,
            "framework": version.framework,
            "data_stores": version.data_stores,
            "manifest": version.manifest,
            "params": (version.run_info or {}).get("params", {}),
            "tags": (version.run_info or {}).get("tags", {}),
            "lineage": version.lineage,  # e.g. the experiment and trial, with its parameters
        },
        "metrics": version.metrics,
        "files": version.files,
    }


@router.get("")
def list_models(loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    return {"models": [summary_json(m) for m in loom.registry.models(user.id)]}


@router.get("/{name}")
def show_model(name: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    found = loom.registry.summary(user.id, name)
    versions = loom.registry.versions(user.id, name)
    return {
        **summary_json(found),
        "version_list": [version_json(v, name, found.aliases, user.name) for v in versions],
    }


@router.get("/{name}/best")
def best(
    name: str,
    loom: PlatformDep,
    user: UserDep,
    metric: Annotated[str, Query(min_length=1, max_length=200)],
    mode: Literal["max", "min"] = "max",
) -> dict[str, Any]:
    """The version with the best final `metric` (`test/accuracy`, or just `accuracy`)."""
    version = loom.registry.best(user.id, name, metric, mode)
    return version_json(version, name, loom.registry.summary(user.id, name).aliases, user.name)


@router.get("/{name}/versions/{ref}")
def show_version(name: str, ref: str, loom: PlatformDep, user: UserDep) -> dict[str, Any]:
    """A version by number, alias or `latest`."""
    version = loom.registry.version(user.id, name, ref)
    return version_json(version, name, loom.registry.summary(user.id, name).aliases, user.name)


@router.get("/{name}/versions/{ref}/factsheet", response_model=None, responses=JSON_OR_MARKDOWN)
def show_factsheet(
    name: str,
    ref: str,
    loom: PlatformDep,
    user: UserDep,
    fmt: Annotated[str, Query(alias="format", pattern="^(json|markdown)$")] = "json",
) -> dict[str, Any] | PlainTextResponse:
    """The version's factsheet: provenance, training metrics, evaluations, drift history,
    owner and deployments; `?format=markdown` for a document."""
    sheet = factsheet(loom.registry, user.id, user.name, name, ref)
    if fmt == "markdown":
        return PlainTextResponse(markdown(sheet), media_type="text/markdown; charset=utf-8")
    return {**sheet, "created_at": iso(sheet["created_at"])}


@router.get("/{name}/versions/{ref}/download", response_class=FileResponse, responses=ZIP)
def download(
    name: str, ref: str, loom: PlatformDep, user: UserDep, file: str | None = None
) -> FileResponse:
    """One file of the version (`?file=model.onnx`), or all of them as a zip."""
    version = loom.registry.version(user.id, name, ref)
    if file is not None:
        path = loom.registry.file(version, file)
        return FileResponse(path, filename=os.path.basename(file))
    fd, target = tempfile.mkstemp(suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry in version.files:
            archive.write(loom.artifacts.path(entry["digest"]), entry["path"])
    return FileResponse(
        target,
        media_type="application/zip",
        filename=f"{name}-v{version.version}.zip",
        background=BackgroundTask(os.unlink, target),
    )


@router.put("/{name}/aliases/{alias}")
def set_alias(
    name: str,
    alias: Annotated[str, Path(max_length=100, pattern=ALIAS_PATTERN)],
    body: AliasIn,
    loom: PlatformDep,
    user: UserDep,
    audit: AuditDep,
) -> dict[str, Any]:
    """Point an alias (e.g. `production`) at a version."""
    version = loom.registry.set_alias(user.id, name, alias, str(body.version))
    audit("model.alias_set", name, alias=alias, version=version.version)
    return version_json(version, name, loom.registry.summary(user.id, name).aliases, user.name)


@router.delete("/{name}/aliases/{alias}", status_code=204)
def delete_alias(name: str, alias: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    loom.registry.delete_alias(user.id, name, alias)
    audit("model.alias_delete", name, alias=alias)


@router.delete("/{name}/versions/{ref}", status_code=204)
def delete_version(name: str, ref: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    version = loom.registry.version(user.id, name, ref)
    _not_deployed(loom, user.id, name, version.version)
    loom.registry.delete(user.id, name, ref)
    audit("model.version_delete", name, version=version.version)


@router.delete("/{name}", status_code=204)
def delete_model(name: str, loom: PlatformDep, user: UserDep, audit: AuditDep) -> None:
    loom.registry.summary(user.id, name)  # 404 first
    _not_deployed(loom, user.id, name)
    loom.registry.delete(user.id, name)
    audit("model.delete", name)


def _not_deployed(loom: Platform, owner: str, name: str, version: int | None = None) -> None:
    serving = loom.deployments.using(owner, name, version)
    if serving:
        what = f"version {version} of model {name!r}" if version else f"model {name!r}"
        raise Conflict(f"{what} is served by deployment {', '.join(serving)}; delete that first")
