"""`/v1/deployments/{name}/drift` and `/payloads`: what a deployment's monitoring found — the
windows of requests its detector tested against the served version's reference, and the
sampled payloads (bodies only) and flagged outliers its gateway kept."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from loom.api.auth import PlatformDep, UserDep
from loom.api.schemas import iso
from loom.serving.drift import window_view
from loom.serving.payloads import read_payloads

router = APIRouter(prefix="/v1/deployments", tags=["monitoring"])


class PayloadsIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    rate: Annotated[float, Field(ge=0, le=1, description="share of requests logged")] | None = None
    retention_days: Annotated[float, Field(gt=0, le=3650)] | None = None
    max_mb: Annotated[float, Field(gt=0, le=1024, description="the log's budget")] | None = None


class MonitoringIn(BaseModel):
    """Drift and outlier detection against the version's reference data, and payload logging."""

    model_config = ConfigDict(extra="forbid", strict=True)

    drift: bool | None = None
    outliers: bool | None = None
    window: Annotated[int, Field(ge=10, le=100_000, description="samples per test")] | None = None
    p_value: Annotated[float, Field(gt=0, le=0.5)] | None = None
    outlier_fpr: Annotated[float, Field(gt=0, le=0.5)] | None = None
    payloads: PayloadsIn | None = None

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


@router.get("/{name}/drift")
def drift(
    name: str,
    loom: PlatformDep,
    user: UserDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    since: Annotated[float | None, Query(description="UNIX time: windows after it")] = None,
) -> dict[str, Any]:
    """The last window's verdict (`drift`, the `features` that drifted, `score`, `p_value`,
    `window`, `since`) and the history, newest first."""
    view = loom.deployments.get(user.id, name)
    windows = loom.deployments.drift.history(user.id, deployment=name, since=since, limit=limit)
    history = [_shown(window_view(w)) for w in windows]
    last = history[0] if history else None
    monitoring = view.get("monitoring") or {}
    return {
        "deployment": name,
        "drift": bool(last and last["drift"]),
        "features": last["features"] if last else [],
        "score": last["score"] if last else None,
        "p_value": last["p_value"] if last else None,
        "window": last["window"] if last else (monitoring.get("window")),
        "since": last["since"] if last else None,
        "at": last["at"] if last else None,
        "version": last["version"] if last else view["model_version"],
        "monitoring": monitoring or None,
        "history": history,
    }


@router.get("/{name}/payloads")
def payloads(
    name: str,
    loom: PlatformDep,
    user: UserDep,
    version: Annotated[int | None, Query(ge=1, le=10**9)] = None,
    since: Annotated[float | None, Query(description="UNIX time")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    outliers: Annotated[bool, Query(description="the flagged requests instead")] = False,
) -> dict[str, Any]:
    """Logged requests and responses (a sample, bodies only), newest first."""
    folder = loom.deployments.folder_of(user.id, name)
    found = read_payloads(folder, version, since, limit, outliers)
    return {"deployment": name, "outliers" if outliers else "payloads": found}


def _shown(window: dict[str, Any]) -> dict[str, Any]:
    return {**window, "since_iso": iso(window["since"]), "at_iso": iso(window["at"])}
