"""A deployment's canary: another version served beside the current one to a share of its
requests, until it is promoted (it becomes the version served) or rolled back. What a change
does to the deployment's row; the gateway does the splitting (`Gateway.pools`, `Gateway.send`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loom.domain.errors import Conflict, InvalidInput
from loom.store.tables import Deployment, ModelVersion

DEFAULT_PERCENT = 10.0


@dataclass(frozen=True)
class CanaryChange:
    """Start a canary (`ref`: a version, alias or latest) or change its share (`percent`);
    or promote it to the version served; or roll it back."""

    ref: str | None = None
    percent: float | None = None
    promote: bool = False
    rollback: bool = False


def apply(
    row: Deployment,
    change: CanaryChange,
    resolve: Callable[[str], ModelVersion],
    materialize: Callable[[ModelVersion], None],
) -> None:
    """Change `row`'s canary; `resolve` finds a version of its model by reference, and
    `materialize` copies a version's files next to the deployment."""
    starting = change.ref is not None or change.percent is not None
    if sum([starting, change.promote, change.rollback]) > 1:
        raise InvalidInput(
            "canary: start or change a canary, promote it, or roll it back: one at a time",
            field="canary",
        )
    if change.promote or change.rollback:
        _end(row, promote=change.promote)
        return
    if change.ref is not None:
        version = resolve(change.ref)
        if version.version == row.model_version:
            raise InvalidInput(
                f"canary: version {version.version} is the version served already",
                field="canary",
            )
        materialize(version)
        row.canary_version = version.version
    elif row.canary_version is None:
        raise InvalidInput(
            f"canary_percent: deployment {row.name!r} has no canary; give its version (canary) too",
            field="canary_percent",
        )
    percent = change.percent if change.percent is not None else row.canary_percent
    row.canary_percent = DEFAULT_PERCENT if percent is None else percent


def _end(row: Deployment, *, promote: bool) -> None:
    if row.canary_version is None:
        raise Conflict(
            f"deployment {row.name!r} has no canary to {'promote' if promote else 'roll back'}"
        )
    if promote:
        row.model_version = row.canary_version
        row.model_ref = str(row.canary_version)
    row.canary_version, row.canary_percent = None, None
