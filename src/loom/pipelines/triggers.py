"""Schedules that fire on an event rather than (or besides) a cron: drift of one of the owner's
deployments, or new objects under a data store's prefix.

    {"drift": {"deployment": "digits", "cooldown_s": 3600}}
    {"new_data": {"url": "s3://bucket/incoming/", "connection": {...}, "poll_s": 60}}

A drift trigger starts a run when a window of the deployment's requests drifted since the last
one it saw (at most once per `cooldown_s`); a data trigger lists the prefix every `poll_s` and
starts a run when an object appeared that was not there before (the listing at creation counts
as seen). What a trigger has seen is stored with the schedule, in the transaction that starts
the run: a crash starts a run once, never twice. A data store's credentials are sealed apart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from loom.domain.errors import InvalidInput
from loom.serving.drift import DriftHistory
from loom.store.tables import PipelineSchedule

log = logging.getLogger("loom.pipelines")

MAX_SEEN = 10_000  # object names a data trigger remembers
DEFAULT_COOLDOWN_S = 3600.0
DEFAULT_POLL_S = 60.0
Lister = Callable[[str, dict[str, Any]], list[str]]


def checked(trigger: Any, host_roots: list[str]) -> dict[str, Any]:
    """The trigger as stored (credentials apart), or InvalidInput naming the field."""
    if not isinstance(trigger, dict) or len(trigger) != 1:
        raise InvalidInput(
            "schedule.trigger: one of {drift: {deployment}} or {new_data: {url}}",
            field="schedule.trigger",
        )
    ((kind, fields),) = trigger.items()
    if not isinstance(fields, dict):
        raise InvalidInput(f"schedule.trigger.{kind}: a mapping", field=f"schedule.trigger.{kind}")
    if kind == "drift":
        deployment = fields.get("deployment")
        if not isinstance(deployment, str) or not deployment:
            raise InvalidInput(
                "schedule.trigger.drift.deployment: the name of one of your deployments",
                field="schedule.trigger.drift.deployment",
            )
        cooldown = _seconds(fields, "cooldown_s", DEFAULT_COOLDOWN_S, "drift")
        return {"drift": {"deployment": deployment, "cooldown_s": cooldown}}
    if kind == "new_data":
        url = fields.get("url")
        if not isinstance(url, str) or not url:
            raise InvalidInput(
                "schedule.trigger.new_data.url: s3://BUCKET/PREFIX or a host folder",
                field="schedule.trigger.new_data.url",
            )
        if not url.startswith("s3://"):
            _within_roots(url, host_roots)
        poll = _seconds(fields, "poll_s", DEFAULT_POLL_S, "new_data")
        return {"new_data": {"url": url, "poll_s": poll}}
    raise InvalidInput(
        f"schedule.trigger: unknown trigger {kind!r} (drift or new_data)", field="schedule.trigger"
    )


def connection_of(trigger: Any) -> dict[str, Any]:
    """The data store's credentials given with a trigger (sealed apart from it)."""
    if isinstance(trigger, dict) and isinstance(trigger.get("new_data"), dict):
        found = trigger["new_data"].get("connection") or {}
        if not isinstance(found, dict):
            raise InvalidInput(
                "schedule.trigger.new_data.connection: a mapping",
                field="schedule.trigger.new_data.connection",
            )
        return {str(k): str(v) for k, v in found.items()}
    return {}


class Triggers:
    def __init__(self, drift: DriftHistory, lister: Lister | None = None) -> None:
        self.drift = drift
        self.lister = lister or list_objects

    def initial_state(self, trigger: dict[str, Any], connection: dict[str, Any]) -> dict[str, Any]:
        """What the trigger counts as seen when it is made."""
        if "drift" in trigger:
            return {"last_window": self.drift.last_id(), "fired_at": 0.0}
        url = trigger["new_data"]["url"]
        return {"seen": sorted(self.lister(url, connection))[-MAX_SEEN:], "polled_at": time.time()}

    def due(
        self, schedule: PipelineSchedule, now: float, connection: Callable[[], dict[str, Any]]
    ) -> str | None:
        """Why the schedule should start a run now (its state moved on), or None."""
        trigger, state = schedule.trigger or {}, dict(schedule.trigger_state or {})
        if "drift" in trigger:
            reason = self._drifted(schedule.owner_id, trigger["drift"], state, now)
        elif "new_data" in trigger:
            reason = self._new_data(trigger["new_data"], state, now, connection)
        else:
            return None
        schedule.trigger_state = state
        return reason

    def _drifted(
        self, owner: str, trigger: dict[str, Any], state: dict[str, Any], now: float
    ) -> str | None:
        if now - float(state.get("fired_at", 0.0)) < float(trigger["cooldown_s"]):
            return None
        windows = self.drift.drifted_since(owner, trigger["deployment"], int(state["last_window"]))
        if not windows:
            return None
        state["last_window"], state["fired_at"] = windows[-1].id, now
        features = sorted({f for w in windows for f in w.features})
        return f"deployment {trigger['deployment']} drifted ({', '.join(features) or 'embedding'})"

    def _new_data(
        self,
        trigger: dict[str, Any],
        state: dict[str, Any],
        now: float,
        connection: Callable[[], dict[str, Any]],
    ) -> str | None:
        if now - float(state.get("polled_at", 0.0)) < float(trigger["poll_s"]):
            return None
        state["polled_at"] = now
        listed = set(self.lister(trigger["url"], connection()))
        new = sorted(listed - set(state.get("seen", [])))
        if not new:
            return None
        state["seen"] = sorted(listed)[-MAX_SEEN:]
        more = f" and {len(new) - 1} more" if len(new) > 1 else ""
        return f"new data under {trigger['url']}: {new[0]}{more}"


def triggered(session: Session) -> list[PipelineSchedule]:
    """Enabled schedules with a trigger, locked (on PostgreSQL) until the caller commits."""
    query = select(PipelineSchedule).where(
        PipelineSchedule.enabled.is_(True), PipelineSchedule.trigger.is_not(None)
    )
    return [s for s in session.scalars(query.with_for_update(skip_locked=True)) if s.trigger]


def list_objects(url: str, connection: dict[str, Any]) -> list[str]:
    """The names of the objects under `url` (a prefix), through fsspec."""
    import fsspec

    if url.startswith("s3://"):
        options: dict[str, Any] = {}
        if connection.get("auth_url") or connection.get("endpoint_url"):
            endpoint = connection.get("endpoint_url") or connection.get("auth_url")
            options["client_kwargs"] = {"endpoint_url": endpoint}
        key = connection.get("user_name") or connection.get("access_key_id")
        secret = connection.get("password") or connection.get("secret_access_key")
        # Without the schedule's own credentials the listing is anonymous: never the
        # platform's (its environment's or its machine's role), which would let a user watch,
        # and learn the names in, a bucket only the platform may read.
        options |= {"key": key, "secret": secret} if key else {"anon": True}
        filesystem = fsspec.filesystem("s3", **options)
        path = url.removeprefix("s3://")
    else:
        filesystem, path = fsspec.filesystem("file"), url.removeprefix("file://")
    try:
        return [str(name) for name in filesystem.find(path)][: MAX_SEEN * 2]
    except FileNotFoundError:
        return []


def _within_roots(url: str, roots: list[str]) -> None:
    path = Path(url.removeprefix("file://")).resolve()
    if not any(path.is_relative_to(Path(root).resolve()) for root in roots):
        raise InvalidInput(
            f"schedule.trigger.new_data.url: {url} is not under a folder the platform shares "
            "with jobs (LOOM_HOST_MOUNT_ROOTS); use s3://BUCKET/PREFIX",
            field="schedule.trigger.new_data.url",
        )


def _seconds(fields: dict[str, Any], key: str, default: float, kind: str) -> float:
    value = fields.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= 86400 * 30
    ):
        raise InvalidInput(
            f"schedule.trigger.{kind}.{key}: seconds between 0 and 30 days, got {value!r}",
            field=f"schedule.trigger.{kind}.{key}",
        )
    return float(value)
