"""How a deployment scales, batches and takes GPUs: what its owner may ask for and change,
checked; stored as the deployment's columns of the same names."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from loom.domain.errors import InvalidInput
from loom.store.tables import Deployment


@dataclass(frozen=True)
class Scaling:
    """How a deployment scales and batches; every field optional in an update."""

    min_replicas: int = 1
    max_replicas: int | None = None  # default: min_replicas, at least 1
    target_concurrency: float = 8.0
    scale_down_delay_s: float = 30.0
    batch_size: int = 1
    batch_wait_ms: float = 0.0
    request_log: bool = False
    gpus_per_replica: int = 0

    def checked(self, gpus: int | None = None) -> Scaling:
        """The settings, refused with the field when they make no sense (or, when `gpus` is
        known, when a replica would want more GPUs than the platform serves with)."""
        if gpus is not None and self.gpus_per_replica > gpus:
            have = f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "no GPU"
            raise InvalidInput(
                f"gpus_per_replica: {self.gpus_per_replica} asked, but this platform serves "
                f"models with {have} (LOOM_SERVING_GPUS)",
                field="gpus_per_replica",
            )
        top = self.max_replicas if self.max_replicas is not None else max(self.min_replicas, 1)
        if top < max(self.min_replicas, 1):
            raise InvalidInput(
                f"max_replicas: must be at least min_replicas ({self.min_replicas}) and at "
                f"least 1, got {top}",
                field="max_replicas",
            )
        return replace(self, max_replicas=top)


def columns(scaling: Scaling) -> dict[str, Any]:
    """The scaling settings as the deployment's columns (they have the same names)."""
    return asdict(scaling)


def columns_of(row: Deployment) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in fields(Scaling)}
