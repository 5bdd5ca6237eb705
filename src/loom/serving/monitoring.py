"""What a deployment's owner asks of its monitoring: drift and outlier detection against the
served version's reference data (`tracking.save_reference`), over windows of requests, and a
payload log (a sample of requests and responses, kept for a while, bounded in bytes).

Stored as the deployment's `monitoring` column and written into the gateway's spec; the gateway
(`monitor.py`) and its detector process do the work."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from loom.domain.errors import InvalidInput

REFERENCE_FILE = "reference.npz"  # in the model version's files, written by save_reference
MAX_WINDOW = 100_000
MAX_PAYLOAD_MB = 1024


@dataclass(frozen=True)
class DetectorRuntime:
    """How this platform's gateways run drift detectors (the admin's settings): in an
    environment the gateway builds with the platform's environment builder, or in an
    interpreter the admin names; a detector not ready within `start_timeout_s` is failing."""

    python: str = ""  # LOOM_MONITORING_PYTHON: an interpreter with the detector's packages
    environment: dict[str, Any] | None = None  # else a builder's section (once per hash)
    start_timeout_s: float = 900.0
    cpu_budget: float = 0.02  # on busy cores, of the rest's CPU; 0: no budget


@dataclass(frozen=True)
class Monitoring:
    """A deployment's monitoring; every field has a default, so `{"drift": true}` is enough."""

    drift: bool = False
    outliers: bool = False
    window: int = 500  # requests (samples) per drift test
    p_value: float = 0.05  # a window drifts below this (Bonferroni-corrected over features)
    outlier_fpr: float = 0.001  # share of reference samples that would be flagged outliers
    payload_rate: float = 0.0  # share of requests whose payloads are logged; 0: none
    payload_retention_days: float = 7.0
    payload_max_mb: float = 64.0  # per deployment, oldest segments dropped past it

    @property
    def detects(self) -> bool:
        return self.drift or self.outliers

    @property
    def active(self) -> bool:
        return self.detects or self.payload_rate > 0

    def checked(self) -> Monitoring:
        """The settings, refused naming the field when they make no sense."""
        _within("window", self.window, 10, MAX_WINDOW)
        _within("p_value", self.p_value, 1e-9, 0.5)
        _within("outlier_fpr", self.outlier_fpr, 1e-6, 0.5)
        _within("payloads.rate", self.payload_rate, 0.0, 1.0)
        _within("payloads.retention_days", self.payload_retention_days, 0.001, 3650)
        _within("payloads.max_mb", self.payload_max_mb, 0.01, MAX_PAYLOAD_MB)
        return self

    def as_dict(self) -> dict[str, Any]:
        """As the API shows it: the payload settings under `payloads`."""
        flat = asdict(self)
        return {
            "drift": flat["drift"],
            "outliers": flat["outliers"],
            "window": flat["window"],
            "p_value": flat["p_value"],
            "outlier_fpr": flat["outlier_fpr"],
            "payloads": {
                "rate": flat["payload_rate"],
                "retention_days": flat["payload_retention_days"],
                "max_mb": flat["payload_max_mb"],
            },
        }

    @classmethod
    def of(cls, stored: dict[str, Any] | None) -> Monitoring | None:
        """From the API's shape (or the column); None for no monitoring."""
        if not stored:
            return None
        return cls().changed(stored)

    def changed(self, given: dict[str, Any]) -> Monitoring:
        """These settings with the fields `given` (the API's shape) replaced, checked."""
        payloads = given.get("payloads") or {}
        flat = {k: v for k, v in given.items() if k != "payloads" and v is not None}
        flat |= {f"payload_{k}": v for k, v in payloads.items() if v is not None}
        known = {f.name for f in fields(Monitoring)}
        unknown = sorted(set(flat) - known)
        if unknown:
            raise InvalidInput(f"monitoring: unknown field {unknown[0]!r}", field="monitoring")
        return replace(self, **flat).checked()


def _within(name: str, value: float, low: float, high: float) -> None:
    if isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(
            f"monitoring.{name}: must be between {low:g} and {high:g}, got {value!r}",
            field=f"monitoring.{name}",
        )
