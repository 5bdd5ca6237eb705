"""Drift history, the platform's side: each gateway's detector writes the windows it judged to
`monitor/windows.jsonl` in the deployment's folder; the supervisor takes new lines into the
`drift_windows` table (once each, by the window's key), where the API, the triggers, the
factsheets and the platform's `/metrics` read them. The history outlives the deployment: it
belongs to the model version that was served."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import func, select

from loom.serving.monitor import FOLDER, WINDOWS
from loom.store.db import Database
from loom.store.tables import Deployment, DriftWindow

log = logging.getLogger("loom.serving")

MAX_HISTORY = 1000


class DriftHistory:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._read: dict[str, tuple[int, int]] = {}  # deployment id → (inode, offset) taken

    # -- taking the gateways' windows in -----------------------------------------------------
    def ingest(self, row: Deployment, folder: Path) -> int:
        """New windows of the deployment's file, stored; how many."""
        path = folder / FOLDER / WINDOWS
        try:
            stat = os.stat(path)
        except OSError:
            return 0
        inode, offset = self._read.get(row.id, (stat.st_ino, 0))
        if inode != stat.st_ino or offset > stat.st_size:
            offset = 0  # a new file (a new gateway's folder): read it from the start
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        windows = list(_windows(complete))
        stored = self._store(row, windows) if windows else 0
        self._read[row.id] = (stat.st_ino, offset + len(complete))
        return stored

    def _store(self, row: Deployment, windows: list[dict[str, Any]]) -> int:
        keys = [str(w["key"]) for w in windows]
        with self.db.session() as session:
            known = set(
                session.scalars(
                    select(DriftWindow.window_key).where(
                        DriftWindow.deployment_id == row.id, DriftWindow.window_key.in_(keys)
                    )
                )
            )
            fresh = [w for w in windows if str(w["key"]) not in known]
            for window in fresh:
                session.add(_row(row, window))
        return len(fresh)

    # -- reading -----------------------------------------------------------------------------
    def history(
        self,
        owner: str,
        *,
        deployment: str | None = None,
        model: str | None = None,
        version: int | None = None,
        since: float | None = None,
        limit: int = 200,
    ) -> list[DriftWindow]:
        """Windows, newest first: of a deployment (by name), or of a model (version)."""
        query = select(DriftWindow).where(DriftWindow.owner_id == owner)
        if deployment is not None:
            query = query.where(DriftWindow.deployment == deployment)
        if model is not None:
            query = query.where(DriftWindow.model_name == model)
        if version is not None:
            query = query.where(DriftWindow.model_version == version)
        if since is not None:
            query = query.where(DriftWindow.at > since)
        query = query.order_by(DriftWindow.at.desc(), DriftWindow.id.desc())
        with self.db.session() as session:
            return list(session.scalars(query.limit(min(limit, MAX_HISTORY))))

    def drifted_since(self, owner: str, deployment: str, after_id: int) -> list[DriftWindow]:
        """Windows of the deployment that drifted, stored after the one numbered `after_id`."""
        query = select(DriftWindow).where(
            DriftWindow.owner_id == owner,
            DriftWindow.deployment == deployment,
            DriftWindow.id > after_id,
            DriftWindow.drift.is_(True),
        )
        with self.db.session() as session:
            return list(session.scalars(query.order_by(DriftWindow.id)))

    def last_id(self) -> int:
        with self.db.session() as session:
            return int(session.scalar(select(func.max(DriftWindow.id))) or 0)

    def latest_per_deployment(self) -> list[DriftWindow]:
        """Each live deployment's newest window (for the platform's `/metrics`)."""
        newest = (
            select(DriftWindow.deployment_id, func.max(DriftWindow.id).label("id"))
            .group_by(DriftWindow.deployment_id)
            .subquery()
        )
        query = (
            select(DriftWindow)
            .join(newest, DriftWindow.id == newest.c.id)
            .join(Deployment, Deployment.id == DriftWindow.deployment_id)
        )
        with self.db.session() as session:
            return list(session.scalars(query))


def window_view(window: DriftWindow) -> dict[str, Any]:
    return {
        "drift": window.drift,
        "features": window.features,
        "score": window.score,
        "p_value": window.p_value,
        "window": window.size,
        "outliers": window.outliers,
        "since": window.since,
        "at": window.at,
        "model": window.model_name,
        "version": window.model_version,
        "deployment": window.deployment,
        "detail": window.detail,
    }


class DriftMetrics:
    """The platform's `/metrics`: each deployment's last window (drift, score, p-value). The
    labels are the deployment's name and a short form of its id (names are unique per owner
    only); no user is named."""

    def __init__(self, latest: Callable[[], list[DriftWindow]]) -> None:
        self.latest = latest

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            windows = self.latest()
        except Exception:  # a scrape still answers the rest
            log.warning("metrics: drift windows not read", exc_info=True)
            return
        labels = ["deployment", "deployment_id", "model", "version"]
        families = {
            "drift": GaugeMetricFamily(
                "loom_model_drift",
                "1 if the deployment's last window of requests drifted from the reference",
                labels=labels,
            ),
            "score": GaugeMetricFamily(
                "loom_model_drift_score", "The last window's largest distance", labels=labels
            ),
            "p_value": GaugeMetricFamily(
                "loom_model_drift_p_value", "The last window's smallest p-value", labels=labels
            ),
            "outliers": GaugeMetricFamily(
                "loom_model_window_outliers", "Outlier requests in the last window", labels=labels
            ),
            "at": GaugeMetricFamily(
                "loom_model_drift_window_timestamp_seconds",
                "When the last window was tested (UNIX time)",
                labels=labels,
            ),
        }
        for w in windows:
            values = [w.deployment, w.deployment_id[:8], w.model_name, str(w.model_version)]
            families["drift"].add_metric(values, 1.0 if w.drift else 0.0)
            families["score"].add_metric(values, w.score)
            families["p_value"].add_metric(values, w.p_value)
            families["outliers"].add_metric(values, w.outliers)
            families["at"].add_metric(values, w.at)
        yield from families.values()


def _windows(chunk: bytes) -> Iterator[dict[str, Any]]:
    for line in chunk.splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and found.get("key") and "drift" in found:
            yield found


def _row(row: Deployment, window: dict[str, Any]) -> DriftWindow:
    version = str(window.get("version") or row.model_version)
    return DriftWindow(
        deployment_id=row.id,
        window_key=str(window["key"])[:80],
        owner_id=row.owner_id,
        deployment=row.name,
        model_name=row.model_name,
        model_version=int(version) if version.isdigit() else row.model_version,
        at=float(window.get("until") or 0.0),
        since=float(window.get("since") or 0.0),
        drift=bool(window["drift"]),
        score=float(window.get("score") or 0.0),
        p_value=float(window.get("p_value") or 0.0) if "p_value" in window else 1.0,
        size=int(window.get("size") or 0),
        outliers=int(window.get("outliers") or 0),
        features=[str(f) for f in window.get("features") or []][:1000],
        detail=window.get("detail") if isinstance(window.get("detail"), dict) else {},
    )
